package arsampler

import (
	"testing"

	"marspec/align"
	"marspec/mar"
	"marspec/mar/analytic"
)

func sameTokens(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// requestJobs is n images of one request with its own seed (0 = the configuration's).
func requestJobs(request string, seed uint64, n int) []Job {
	js := make([]Job, n)
	for i := range js {
		js[i] = Job{Index: i, Class: (i + int(seed)) % 3, Seed: seed, Request: request}
	}
	return js
}

// An image depends only on (its seed, its index, position): two requests with different seeds
// and the same indexes, merged into one batch (5 in flight, joining and leaving between rounds),
// give each image bit for bit as when its request ran alone with the seed as the configuration's
// (Job.Seed 0). Results come back in job order with their request and seed, although both
// requests have an image 0. Checked with a draft pack and self-drafting, batched and lazy.
func TestMergedRequestsGiveTheSameImages(t *testing.T) {
	target, draft := analytic.New(selfTargetParams()), analytic.New(draftParams())
	for _, d := range []*mar.Model{draft, nil} {
		for _, sch := range []Schedule{Batched, Lazy} {
			cfg := specConfig(1, Prefix, align.Exact)
			cfg.Schedule = sch
			a, b := requestJobs("a", 11, 6), requestJobs("b", 22, 6)
			merged, err := mustEngine(t, target, d, cfg).Run(append(append([]Job(nil), a...), b...), 5)
			if err != nil {
				t.Fatal(err)
			}
			for k, req := range []struct {
				jobs []Job
				seed uint64
			}{{a, 11}, {b, 22}} {
				alone := cfg
				alone.Sampling.Seed = req.seed
				plain := make([]Job, len(req.jobs))
				for i, j := range req.jobs {
					plain[i] = Job{Index: j.Index, Class: j.Class}
				}
				ref, err := mustEngine(t, target, d, alone).Run(plain, 2)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range merged[k*6 : k*6+6] {
					j := req.jobs[i]
					if r.Request != j.Request || r.Seed != req.seed || r.Index != j.Index || r.Class != j.Class {
						t.Fatalf("result %d of request %s is %s/%d/%d/%d", i, j.Request, r.Request, r.Seed, r.Index, r.Class)
					}
					if !sameTokens(r.Tokens, ref[i].Tokens) || ref[i].Seed != req.seed {
						t.Fatalf("self=%v %v: request %s image %d differs merged and alone", d == nil, sch, j.Request, j.Index)
					}
				}
			}
		}
	}
}

// Remove drops a request's unfinished images between rounds and leaves the others' images as
// they would have been.
func TestRemoveRequest(t *testing.T) {
	target := analytic.New(selfTargetParams())
	cfg := specConfig(3, Prefix, align.Exact)
	e := mustEngine(t, target, nil, cfg)
	if err := e.Add(append(requestJobs("a", 5, 4), requestJobs("b", 6, 4)...)...); err != nil {
		t.Fatal(err)
	}
	var got []Result
	for round := 0; e.Active() > 0; round++ {
		if round == 2 {
			if n := e.Remove("a"); n != 4 {
				t.Fatalf("removed %d images of request a, want 4", n)
			}
			if n := e.Remove("a"); n != 0 {
				t.Fatalf("removed %d images twice", n)
			}
		}
		done, err := e.Round()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, done...)
	}
	ref, err := mustEngine(t, target, nil, cfg).Run(requestJobs("b", 6, 4), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d images finished, want request b's 4", len(got))
	}
	for _, r := range got {
		if r.Request != "b" || !sameTokens(r.Tokens, ref[r.Index].Tokens) {
			t.Fatalf("image %s/%d changed by the removal", r.Request, r.Index)
		}
	}
}

func mustEngine(t *testing.T, target, draft *mar.Model, cfg Config) *Engine {
	t.Helper()
	e, err := NewEngine(target, draft, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
