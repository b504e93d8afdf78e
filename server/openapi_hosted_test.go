package server

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"marspec/api"
)

// The job and webhook schemas list exactly the fields the server writes.
func TestOpenAPIJobAndWebhookFields(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{"Generation": api.Generation{}, "Webhook": api.Webhook{},
		"WebhookDelivery": api.WebhookDelivery{}, "WebhookPayload": api.WebhookPayload{}} {
		var inSpec, inGo []string
		for p := range doc.Components.Schemas[name].Properties {
			inSpec = append(inSpec, p)
		}
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			inGo = append(inGo, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		slices.Sort(inSpec)
		slices.Sort(inGo)
		if !slices.Equal(inSpec, inGo) {
			t.Errorf("%s fields\n spec: %v\n   Go: %v", name, inSpec, inGo)
		}
	}
}
