package server

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
)

// The OpenAI images API (docs/openai.md) as an adapter over marspec's own request path: a
// request becomes an api.GenerateRequest and goes through submit (validation, the store, the
// scheduler) like POST /v1/generations; the call then waits for the job up to --max-wait
// and answers with its PNGs. Every error under openAIPrefix is in OpenAI's shape
// (answerError). The prefix keeps marspec's own /v1/models free.

// openAIPrefix is the base URL an OpenAI client is given (with the server's address).
const openAIPrefix = "/openai/v1"

// processStart is the "created" of the model list: a pack carries no date of its own.
var processStart = time.Now().Unix()

func isOpenAIPath(path string) bool {
	return path == openAIPrefix || strings.HasPrefix(path, openAIPrefix+"/")
}

// openAIRoutes registers the adapter's routes: keys as on /v1 (identify, auth).
func (s *Server) openAIRoutes(r *gin.Engine) {
	g := r.Group(openAIPrefix, s.identify)
	g.POST("/images/generations", s.auth, s.openAIGenerate)
	g.GET("/models", s.openAIModels)
}

// openAIImages is the answer of POST /images/generations.
type openAIImages struct {
	Created      int64             `json:"created"`
	Data         []openAIImageData `json:"data"`
	Size         string            `json:"size"`
	OutputFormat string            `json:"output_format"`
}

// openAIImageData is one image: its PNG in base64 or its URL; revised_prompt is the class
// name the prompt resolved to.
type openAIImageData struct {
	B64JSON       string `json:"b64_json,omitempty"`
	URL           string `json:"url,omitempty"`
	RevisedPrompt string `json:"revised_prompt"`
}

// openAIGenerate is POST /openai/v1/images/generations.
func (s *Server) openAIGenerate(c *gin.Context) {
	var in openAIImageRequest
	if err := decodeStrict(c.Request, &in); err != nil {
		s.fail(c, err)
		return
	}
	req, err := in.generateRequest(s.cat)
	if err != nil {
		s.fail(c, err)
		return
	}
	id, err := s.submit(c, req)
	if err != nil {
		s.fail(c, asPrompt(err))
		return
	}
	c.Header("Location", "/v1/generations/"+id)
	s.await(c.Request.Context(), id, s.cfg.MaxWait)
	g, err := s.view(id)
	if err != nil {
		s.fail(c, err)
		return
	}
	if g.Status != api.StatusSucceeded {
		s.openAIUnfinished(c, g)
		return
	}
	out := openAIImages{Created: g.Created.Unix(), Data: []openAIImageData{}, OutputFormat: "png", Size: packSize(s.cat)}
	for _, im := range g.Images {
		d := openAIImageData{RevisedPrompt: im.ClassName}
		if in.ResponseFormat == "url" {
			d.URL = absoluteURL(c.Request, im.URL)
		} else {
			png, err := s.store.ImagePNG(im.ID)
			if err != nil {
				s.fail(c, err)
				return
			}
			d.B64JSON = base64.StdEncoding.EncodeToString(png)
		}
		out.Data = append(out.Data, d)
	}
	c.JSON(http.StatusOK, out)
}

// openAIUnfinished answers for a job that has no images to give: still queued or running
// when --max-wait passed (504; the job goes on, its id is in the message and Location, and
// x-should-retry tells the SDKs not to post it again), or failed or cancelled (500 with the
// job's own error, which its GET shows too).
func (s *Server) openAIUnfinished(c *gin.Context, g api.Generation) {
	if !ended(g.Status) {
		c.Header("x-should-retry", "false")
		answerError(c, http.StatusGatewayTimeout, api.ErrorBody{Error: fmt.Sprintf(
			"generation %s is still %s after the server's --max-wait %s; follow it at /v1/generations/%s",
			g.ID, g.Status, s.cfg.MaxWait, g.ID)})
		return
	}
	msg := fmt.Sprintf("generation %s %s", g.ID, g.Status)
	if g.Error != "" {
		msg += ": " + g.Error
	}
	answerError(c, http.StatusInternalServerError, api.ErrorBody{Error: msg})
}

// absoluteURL makes a path of this server a URL as the client reached it.
func absoluteURL(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// openAIModelList is GET /openai/v1/models in OpenAI's list shape.
type openAIModelList struct {
	Object string        `json:"object"`
	Data   []openAIModel `json:"data"`
}

type openAIModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// openAIModels lists the pack a request's model may name: the one that makes the images.
func (s *Server) openAIModels(c *gin.Context) {
	out := openAIModelList{Object: "list", Data: []openAIModel{}}
	if name := servedPack(s.cat); name != "" {
		out.Data = append(out.Data, openAIModel{ID: name, Object: "model", Created: processStart, OwnedBy: "marspec"})
	}
	c.JSON(http.StatusOK, out)
}

// servedPack is the name of the pack that makes a request's images: the target's (the
// draft's on a server that serves only a draft).
func servedPack(cat generation.Catalog) string {
	if man := servedManifest(cat); man != nil {
		return man.Name
	}
	return ""
}

func servedManifest(cat generation.Catalog) *mar.Manifest {
	if cat.Target != nil {
		return cat.Target
	}
	return cat.Draft
}
