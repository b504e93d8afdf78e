package generation

import (
	"bytes"
	"context"
	"math"
	"testing"

	"marspec/api"
)

// One Generator runs every mode; chunks made apart with their first index give the images of
// one run (how scoring runs make their images), and self-drafting needs no draft pack.
func TestGeneratorModesAndChunks(t *testing.T) {
	models, cat := TestModels()
	for _, req := range []Request{
		{GenerateRequest: api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Seed: u64(5), Mode: ModeTarget}},
		{GenerateRequest: api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Seed: u64(5), Mode: ModeDraft}},
		{GenerateRequest: api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Seed: u64(5), Gamma: "3"}},
		{GenerateRequest: api.GenerateRequest{Class: api.Classes{"all"}, N: 2, Seed: u64(5), Gamma: "3"}, SelfDraft: true},
	} {
		plan, err := ValidateRequest(req, cat)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := Execute(context.Background(), plan, models, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(whole.Images) != 6 || (plan.Spec != nil) != (whole.Summary != nil) {
			t.Fatalf("%s: %d images, summary %v", plan.Params(), len(whole.Images), whole.Summary)
		}
		gen, err := NewGenerator(plan, models, 2)
		if err != nil {
			t.Fatal(err)
		}
		for first := 0; first < 6; first += 4 {
			end := min(first+4, 6)
			part, err := gen.Generate(context.Background(), plan.Classes[first:end], first)
			if err != nil {
				t.Fatal(err)
			}
			for k, img := range part.Images {
				want := whole.Images[first+k]
				if img.Index != want.Index || !bytes.Equal(img.Pixels, want.Pixels) {
					t.Fatalf("%s: image %d made in a chunk differs from the whole run", plan.Params(), first+k)
				}
			}
		}
	}
	self, _ := ValidateRequest(Request{GenerateRequest: api.GenerateRequest{Class: api.Classes{"0"}}, SelfDraft: true},
		Catalog{TargetPack: "target", Target: cat.Target})
	if self.DraftPack != "" || !self.Spec.SelfDraft {
		t.Fatalf("self-drafting plan: %+v", self)
	}
	res, err := Execute(context.Background(), self, Fixed{"target": models["target"]}, 0) // no draft model at all
	if err != nil || res.Summary.DraftForwards != 0 {
		t.Fatalf("self-drafting: %v, %+v", err, res.Summary)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Execute(ctx, self, models, 0); err == nil {
		t.Fatal("a cancelled context still ran")
	}
}

func TestAcceptanceRates(t *testing.T) {
	models, cat := TestModels()
	plan, err := Validate(api.GenerateRequest{Class: api.Classes{"all"}, Seed: u64(1), Mode: ModeSpec}, cat)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Execute(context.Background(), plan, models, 0)
	if err != nil {
		t.Fatal(err)
	}
	rates := AcceptanceRates(res.Summary)
	if len(rates) != plan.SeqLen {
		t.Fatalf("%d rates for %d positions", len(rates), plan.SeqLen)
	}
	for pos, r := range rates {
		n := res.Summary.AcceptedAtPos[pos] + res.Summary.RejectedAtPos[pos]
		if (n == 0) != math.IsNaN(r) || (n > 0 && (r < 0 || r > 1)) {
			t.Fatalf("position %d: rate %v over %d drafts", pos, r, n)
		}
	}
}
