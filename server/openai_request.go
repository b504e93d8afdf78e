package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"marspec/api"
	"marspec/generation"
)

// openAIImageRequest is the body of POST /openai/v1/images/generations: OpenAI's fields, and
// marspec's preset and seed as extra fields. Any other field is a 400 naming it.
type openAIImageRequest struct {
	Prompt         string  `json:"prompt"`          // a class id or name, as marspec's class takes
	Model          string  `json:"model"`           // the served pack's name (GET /openai/v1/models), or omitted
	N              int     `json:"n"`               // images; default 1
	Size           string  `json:"size"`            // the pack's own "WxH", "auto", or omitted
	Quality        string  `json:"quality"`         // mapped to a preset (qualityPresets)
	ResponseFormat string  `json:"response_format"` // b64_json (default) or url
	OutputFormat   string  `json:"output_format"`   // png only
	Style          string  `json:"style"`           // ignored: a class has no style
	User           string  `json:"user"`            // ignored
	Preset         string  `json:"preset"`          // marspec's preset by name; wins over quality
	Seed           *uint64 `json:"seed"`            // marspec's seed
}

// qualityPresets maps OpenAI's quality values to the presets of marspec's built-in table;
// "auto" and "" take the pack's default preset, as does a value whose preset the pack lacks.
// A preset's own name is taken too.
var qualityPresets = map[string]string{
	"auto": "", "low": "fast", "standard": "balanced", "medium": "balanced",
	"hd": "quality", "high": "quality", "xhigh": "quality", "max": "quality",
}

// generateRequest is the marspec request the OpenAI one asks for.
func (in openAIImageRequest) generateRequest(cat generation.Catalog) (api.GenerateRequest, error) {
	man := servedManifest(cat)
	if man == nil {
		return api.GenerateRequest{}, fmt.Errorf("no pack is served")
	}
	req := api.GenerateRequest{Class: api.Classes{in.Prompt}, N: in.N, Seed: in.Seed, Preset: in.Preset}
	if strings.TrimSpace(in.Prompt) == "" {
		return req, &generation.FieldError{Field: "prompt", Reason: "required", Allowed: "a class id or name of the pack (GET /v1/models)"}
	}
	if in.Model != "" && in.Model != man.Name {
		return req, &generation.FieldError{Field: "model", Value: strconv.Quote(in.Model), Reason: "not served here", Allowed: strconv.Quote(man.Name) + " or omitted"}
	}
	if size := packSize(cat); in.Size != "" && in.Size != "auto" && in.Size != size {
		return req, &generation.FieldError{Field: "size", Value: strconv.Quote(in.Size), Reason: "not the pack's size", Allowed: strconv.Quote(size) + ", auto, or omitted"}
	}
	switch in.ResponseFormat {
	case "", "b64_json", "url":
	default:
		return req, &generation.FieldError{Field: "response_format", Value: strconv.Quote(in.ResponseFormat), Reason: "unknown", Allowed: "b64_json, url"}
	}
	if in.OutputFormat != "" && in.OutputFormat != "png" {
		return req, &generation.FieldError{Field: "output_format", Value: strconv.Quote(in.OutputFormat), Reason: "unsupported", Allowed: "png"}
	}
	if req.Preset == "" {
		preset, err := qualityPreset(in.Quality, generation.PackSettings(man).PresetNames())
		if err != nil {
			return req, err
		}
		req.Preset = preset
	}
	return req, nil
}

// qualityPreset is the preset a quality value runs with on a pack with presets names.
func qualityPreset(quality string, names []string) (string, error) {
	if quality == "" || slices.Contains(names, quality) {
		return quality, nil
	}
	preset, ok := qualityPresets[quality]
	if !ok {
		return "", &generation.FieldError{Field: "quality", Value: strconv.Quote(quality), Reason: "unknown",
			Allowed: "auto, low, medium, high, xhigh, max, standard, hd, or a preset: " + strings.Join(names, ", ")}
	}
	if !slices.Contains(names, preset) {
		return "", nil // the pack's default
	}
	return preset, nil
}

// packSize is the served pack's image size as OpenAI writes it, width x height.
func packSize(cat generation.Catalog) string {
	man := servedManifest(cat)
	if man == nil {
		return ""
	}
	return fmt.Sprintf("%dx%d", man.Image.Width, man.Image.Height)
}

// asPrompt names the prompt where validation named the class it became.
func asPrompt(err error) error {
	var fe *generation.FieldError
	if errors.As(err, &fe) && fe.Field == "class" {
		renamed := *fe
		renamed.Field = "prompt"
		return &renamed
	}
	return err
}

// openAIError is OpenAI's error body.
type openAIError struct {
	Error openAIErrorDetail `json:"error"`
}

type openAIErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// openAIErrorOf is marspec's error body in OpenAI's shape: the message as it is, the field
// as param, the type and code OpenAI gives the status.
func openAIErrorOf(status int, body api.ErrorBody) openAIError {
	d := openAIErrorDetail{Message: body.Error, Type: "invalid_request_error"}
	if body.Field != "" && body.Field != "body" {
		d.Param = &body.Field
	}
	code := ""
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusNotFound:
		code = "not_found"
	case status == http.StatusTooManyRequests:
		d.Type, code = "rate_limit_error", "rate_limit_exceeded"
	case status == http.StatusGatewayTimeout:
		d.Type, code = "server_error", "timeout"
	case status == http.StatusServiceUnavailable:
		d.Type, code = "server_error", "service_unavailable"
	case status >= 500:
		d.Type = "server_error"
	}
	if code != "" {
		d.Code = &code
	}
	return openAIError{Error: d}
}
