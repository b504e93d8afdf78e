package server

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"marspec/api"
	"marspec/diffusion"
	"marspec/generation"
	"marspec/mar"
)

// Read-only resources: image files and the model catalog.

var imageFile = regexp.MustCompile(`^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-([0-9]{1,5})\.png$`)

func (s *Server) image(c *gin.Context) {
	file := c.Param("file")
	if !imageFile.MatchString(file) {
		s.fail(c, &generation.FieldError{Field: "id", Value: strconv.Quote(truncate(file)), Allowed: "JOBID-INDEX.png", Reason: "malformed image name"})
		return
	}
	data, err := s.store.ImagePNG(strings.TrimSuffix(file, ".png"))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", "public, max-age=31536000, immutable") // an image id never changes content
	c.Data(http.StatusOK, "image/png", data)
}

func (s *Server) models(c *gin.Context) {
	out := api.Models{Presets: generation.PresetNames(), Modes: []string{generation.ModeTarget, generation.ModeDraft, generation.ModeSpec},
		DefaultPreset: generation.DefaultPreset, PresetAbout: map[string]string{}}
	for name, p := range generation.Presets {
		out.PresetAbout[name] = p.About
	}
	if man := s.cat.Target; man != nil {
		out.Models = append(out.Models, wireModel("target", man, s.cat.MaxImages))
	}
	if man := s.cat.Draft; man != nil {
		out.Models = append(out.Models, wireModel("draft", man, s.cat.MaxImages))
	}
	c.JSON(http.StatusOK, out)
}

func wireModel(role string, man *mar.Manifest, maxImages int) api.Model {
	m := api.Model{Role: role, Name: man.Name, Classes: man.Classes, SeqLen: man.SeqLen(), Steps: man.Diffusion.SamplingSteps,
		Image: [3]int{man.Image.Height, man.Image.Width, man.Image.Channels}, MaxImage: maxImages}
	for _, s := range diffusion.Samplers {
		if s != diffusion.Distilled || man.DistilledHead != nil {
			m.Samplers = append(m.Samplers, string(s))
		}
	}
	if man.DistilledHead != nil {
		m.DistilledSteps = man.DistilledHead.Steps
	}
	return m
}
