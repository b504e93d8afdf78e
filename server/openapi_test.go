package server

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"marspec/api"
)

type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openapiJSON, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// Every route the server registers is described in openapi.json, and every operation there
// is a route (the gallery's static files at / and /ui/ are not API).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := start(t, "", false, nil)
	engine := ts.Handler().(*gin.Engine)
	param := regexp.MustCompile(`:([a-z]+)`)
	routes := map[string]bool{}
	for _, r := range engine.Routes() {
		if r.Path == "/" || strings.HasPrefix(r.Path, "/ui/") {
			continue
		}
		routes[strings.ToLower(r.Method)+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	doc := loadOpenAPI(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			documented[method+" "+path] = true
		}
	}
	for r := range routes {
		if !documented[r] {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for d := range documented {
		if !routes[d] {
			t.Errorf("openapi.json describes %s, which is no route", d)
		}
	}
	if len(routes) < 10 {
		t.Errorf("only %d routes found", len(routes))
	}
}

// The request schema lists exactly the fields the strict decoder accepts.
func TestOpenAPIRequestFields(t *testing.T) {
	doc := loadOpenAPI(t)
	var inSpec []string
	for name := range doc.Components.Schemas["GenerateRequest"].Properties {
		inSpec = append(inSpec, name)
	}
	var inGo []string
	typ := reflect.TypeOf(api.GenerateRequest{})
	for i := range typ.NumField() {
		inGo = append(inGo, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	slices.Sort(inSpec)
	slices.Sort(inGo)
	if !slices.Equal(inSpec, inGo) {
		t.Errorf("GenerateRequest fields\n spec: %v\n   Go: %v", inSpec, inGo)
	}
}

// The schemas of the answers (and of the OpenAI adapter's request) list exactly the JSON
// fields of their Go types (fields tagged "-", such as Generation.Replayed, are the client's
// own).
func TestOpenAPIAnswerFields(t *testing.T) {
	doc := loadOpenAPI(t)
	for schema, v := range map[string]any{"Generation": api.Generation{}, "Progress": api.Progress{}, "Error": api.ErrorBody{}, "Key": api.Key{}, "Keys": api.Keys{},
		"Webhook": api.Webhook{}, "WebhookDelivery": api.WebhookDelivery{}, "WebhookPayload": api.WebhookPayload{},
		"OpenAIImageRequest": openAIImageRequest{}, "OpenAIImages": openAIImages{}, "OpenAIImageData": openAIImageData{},
		"OpenAIModelList": openAIModelList{}} {
		var inSpec, inGo []string
		for name := range doc.Components.Schemas[schema].Properties {
			inSpec = append(inSpec, name)
		}
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			if name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; name != "-" {
				inGo = append(inGo, name)
			}
		}
		slices.Sort(inSpec)
		slices.Sort(inGo)
		if !slices.Equal(inSpec, inGo) {
			t.Errorf("%s fields\n spec: %v\n   Go: %v", schema, inSpec, inGo)
		}
	}
	var post struct {
		Parameters []struct{ Name, In string } `json:"parameters"`
		Responses  map[string]json.RawMessage  `json:"responses"`
	}
	if err := json.Unmarshal(doc.Paths["/v1/generations"]["post"], &post); err != nil {
		t.Fatal(err)
	}
	header := false
	for _, p := range post.Parameters {
		header = header || (p.Name == idempotencyHeader && p.In == "header")
	}
	if !header || post.Responses["422"] == nil || post.Responses["429"] == nil {
		t.Errorf("POST /v1/generations does not describe the Idempotency-Key header (%v) or its 422 and 429", header)
	}
}
