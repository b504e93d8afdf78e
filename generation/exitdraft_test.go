package generation

import (
	"context"
	"math"
	"strings"
	"testing"

	"marspec/api"
	"marspec/arsampler"
)

// Every wrong early-exit setting is refused with a FieldError that names the field and what is
// allowed, before anything runs.
func TestValidateEarlyExitErrors(t *testing.T) {
	_, withExit := TestModelsWithExit()
	_, noExit := TestModels()
	base := func() Request {
		return Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}, Seed: u64(1), Mode: ModeSpec}, EarlyExit: true}
	}
	cases := []struct {
		name, field, want string
		cat               Catalog
		edit              func(*Request)
	}{
		{"exit and self", "draft", "one of: a draft pack, self, exit", withExit, func(r *Request) { r.SelfDraft = true }},
		{"max error negative", "exit_max_error", "exit_max_error -0.1: out of range (allowed: 0 = no bound, or a positive RMS error)", withExit,
			func(r *Request) { r.ExitMaxError = f64(-0.1) }},
		{"max error NaN", "exit_max_error", "NaN: out of range", withExit, func(r *Request) { r.ExitMaxError = f64(math.NaN()) }},
		{"max error Inf", "exit_max_error", "+Inf: out of range", withExit, func(r *Request) { r.ExitMaxError = f64(math.Inf(1)) }},
		{"max error without exit", "exit_max_error", "use draft exit", withExit,
			func(r *Request) { r.EarlyExit = false; r.ExitMaxError = f64(0.3) }},
		{"group verify", "verify", "(allowed: prefix)", withExit, func(r *Request) { r.Verify = "group" }},
		{"lazy schedule", "schedule", "(allowed: auto, batched)", withExit, func(r *Request) { r.Schedule = "lazy" }},
		{"pack without exit", "draft", "target pack target has no early_exit entry (allowed: a draft pack, or self; scripts/train/early_exit.py adds", noExit,
			func(r *Request) {}},
		{"exit in target mode", "draft", "applies to mode spec only", withExit, func(r *Request) { r.Mode = ModeTarget }},
	}
	for _, c := range cases {
		req := base()
		c.edit(&req)
		_, err := ValidateRequest(req, c.cat)
		if Field(err) != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want a FieldError on %q containing %q", c.name, err, c.field, c.want)
		}
	}
}

// A valid exit request becomes a batched prefix plan with no draft pack whatever the provider,
// stamped draft=exit with its bound; it runs on the analytic exit and reports a verification
// pass cheaper than a target step.
func TestEarlyExitPlanRuns(t *testing.T) {
	models, cat := TestModelsWithExit()
	req := Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Seed: u64(3), Gamma: "3"},
		EarlyExit: true, ExitMaxError: f64(0.3)}
	plan, err := ValidateRequest(req, cat)
	if err != nil {
		t.Fatal(err)
	}
	c := plan.Spec
	if !c.EarlyExit || c.SelfDraft || c.ExitMaxError != 0.3 || c.Schedule != arsampler.Batched || c.Verify != arsampler.Prefix {
		t.Fatalf("config %+v: want early exit, bound 0.3, batched prefix (cpu resolves auto to lazy otherwise)", c)
	}
	if plan.DraftPack != "" || plan.DraftSource() != DraftExit || plan.Settings().Draft != DraftExit {
		t.Fatalf("draft pack %q, source %q", plan.DraftPack, plan.DraftSource())
	}
	for _, text := range []string{plan.Params(), plan.SpecText()} {
		if !strings.Contains(text, "draft=exit") || !strings.Contains(text, "exit_max_error=0.3") {
			t.Errorf("%q lacks draft=exit exit_max_error=0.3", text)
		}
	}
	delete(models, "draft") // the run must not need a draft pack
	res, err := Execute(context.Background(), plan, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if len(res.Images) != plan.Images() || s.Drafted == 0 || s.DraftForwards == 0 || !(s.VerifyCost > 0 && s.VerifyCost < 1) {
		t.Fatalf("%d images, summary %+v: want drafts from exit passes and a verification cost below 1", len(res.Images), s)
	}
}
