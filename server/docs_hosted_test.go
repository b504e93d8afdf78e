package server

import (
	"os"
	"strings"
	"testing"
)

// docs/api.md shows receivers the same check the webhook tests use on every call.
func TestDocsShowTheWebhookCheck(t *testing.T) {
	src, err := os.ReadFile("webhook_test.go")
	if err != nil {
		t.Fatal(err)
	}
	code := string(src)
	from := strings.Index(code, "func verifyAsDocumented(")
	to := strings.Index(code[from:], "\n}\n")
	if from < 0 || to < 0 {
		t.Fatal("verifyAsDocumented not found in webhook_test.go")
	}
	body := code[from+len("func verifyAsDocumented(") : from+to+2]
	doc := readDoc(t, "docs/api.md")
	if !strings.Contains(doc, strings.Join(strings.Fields("func verifyWebhook("+body), " ")) {
		t.Error("docs/api.md does not show verifyAsDocumented (as verifyWebhook) word for word")
	}
}
