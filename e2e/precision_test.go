package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"marspec/api"
	"marspec/server"
)

// post sends a generation request and returns the status and the decoded answer (a
// Generation, or the error body's text).
func post(t *testing.T, base, body string) (int, api.Generation, string) {
	t.Helper()
	res, err := http.Post(base+"/v1/generations?wait=60s", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var g api.Generation
	_ = json.Unmarshal(raw, &g)
	return res.StatusCode, g, string(raw)
}

// fetchPNG reads image index of job id.
func fetchPNG(t *testing.T, base, id string, index int) []byte {
	t.Helper()
	res, err := http.Get(fmt.Sprintf("%s/v1/images/%s-%d.png", base, id, index))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("image %d of %s: %s", index, id, res.Status)
	}
	return data
}

// meanAbsDiff is the mean absolute difference of two PNGs' gray levels, in 0..255.
func meanAbsDiff(t *testing.T, a, b []byte) float64 {
	t.Helper()
	ia, err1 := png.Decode(bytes.NewReader(a))
	ib, err2 := png.Decode(bytes.NewReader(b))
	if err1 != nil || err2 != nil {
		t.Fatalf("decoding: %v %v", err1, err2)
	}
	r := ia.Bounds()
	if r != ib.Bounds() {
		t.Fatalf("sizes differ: %v %v", r, ib.Bounds())
	}
	var sum float64
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			ga, _, _, _ := ia.At(x, y).RGBA()
			gb, _, _, _ := ib.At(x, y).RGBA()
			sum += math.Abs(float64(ga)-float64(gb)) / 257
		}
	}
	return sum / float64(r.Dx()*r.Dy())
}

// A request chooses its precision on the real embedded packs: fp32 and int8 jobs posted
// together run on their own graphs (an int8 job made beside others gives the same PNG as made
// alone, and not the fp32 job's), say so in their settings, and the models list names the
// precisions; a precision the server does not serve is a 400 naming the field. int8 jobs merge
// into one batch like fp32 ones, so the same int8 request gives the same bytes only because
// int8 rows are independent of their batch-mates (activations quantised per row): checked
// against a fresh server whose opening memo first saw the classes in another batch.
func TestRequestPrecision(t *testing.T) {
	ts := startServer(t, nil)
	base := ts.URL

	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models api.Models
	if err := json.NewDecoder(res.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if models.DefaultPrecision != "fp32" {
		t.Errorf("default_precision %q, want fp32", models.DefaultPrecision)
	}
	for _, m := range models.Models {
		if !slices.Equal(m.Precisions, []string{"fp32", "int8"}) {
			t.Errorf("%s pack: precisions %v, want [fp32 int8] (both embedded packs carry int8 graphs)", m.Role, m.Precisions)
		}
	}

	// target mode, the fast preset's head in one step: a few images, cheap on one thread
	body := func(precision string) string {
		p := ""
		if precision != "" {
			p = fmt.Sprintf(`,"precision":%q`, precision)
		}
		return fmt.Sprintf(`{"class":[1,7],"n":1,"seed":11,"preset":"fast"%s}`, p)
	}
	var wg sync.WaitGroup
	var jobs [3]api.Generation
	var codes [3]int
	var texts [3]string
	for i, precision := range []string{"fp32", "int8", "int8"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], jobs[i], texts[i] = post(t, base, body(precision))
		}()
	}
	wg.Wait()
	for i := range 3 {
		if codes[i] != http.StatusOK || jobs[i].Status != "succeeded" {
			t.Fatalf("job %d: %d %s", i, codes[i], texts[i])
		}
	}
	fp32, int8, twin := jobs[0], jobs[1], jobs[2]
	if fp32.Settings.Precision != "" || int8.Settings.Precision != "int8" {
		t.Errorf("settings precision: fp32 job %q (want omitted), int8 job %q", fp32.Settings.Precision, int8.Settings.Precision)
	}
	// a fresh server whose memo sees class 7 first in a batch of three
	fresh := startServer(t, nil)
	if code, _, text := post(t, fresh.URL, `{"class":[7,3,5],"n":1,"seed":4,"preset":"fast","precision":"int8"}`); code != http.StatusOK {
		t.Fatalf("warming the fresh server: %d %s", code, text)
	}
	code, alone, text := post(t, fresh.URL, body("int8"))
	if code != http.StatusOK {
		t.Fatalf("int8 alone: %d %s", code, text)
	}
	for i := range 2 {
		a, b, c := fetchPNG(t, base, fp32.ID, i), fetchPNG(t, base, int8.ID, i), fetchPNG(t, fresh.URL, alone.ID, i)
		if !bytes.Equal(b, c) || !bytes.Equal(b, fetchPNG(t, base, twin.ID, i)) {
			t.Errorf("image %d: the int8 job made beside others differs from the same request made alone on a fresh server, or from its twin", i)
		}
		// int8 weights move the image a little (about 1 to 8% RMS on the graphs' outputs,
		// docs/BENCHMARKS.md): different from fp32, yet the same picture
		d := meanAbsDiff(t, a, b)
		t.Logf("image %d: mean |fp32 - int8| = %.2f gray levels", i, d)
		if bytes.Equal(a, b) {
			t.Errorf("image %d: the int8 job's PNG equals the fp32 job's: it did not run the int8 graphs", i)
		} else if d > 40 {
			t.Errorf("image %d: int8 and fp32 differ by %.1f gray levels on average: not the same picture", i, d)
		}
	}

	code, _, text = post(t, base, `{"class":1,"precision":"bf16"}`)
	if code != http.StatusBadRequest || !strings.Contains(text, `"precision"`) || !strings.Contains(text, "fp32, int8") {
		t.Errorf("precision bf16: %d %s, want 400 naming precision and the allowed ones", code, text)
	}

	only := startServer(t, func(c *server.Config) { c.Precisions = "fp32" })
	code, _, text = post(t, only.URL, body("int8"))
	if code != http.StatusBadRequest || !strings.Contains(text, "does not serve int8") {
		t.Errorf("int8 on a server with --precisions fp32: %d %s, want 400 saying it does not serve int8", code, text)
	}
}
