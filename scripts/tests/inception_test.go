package tests

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"codeberg.org/sbinet/npyio/npy"
	"gonum.org/v1/gonum/mat"

	"marspec/fid"
	"marspec/onnxrt"
)

// The standard evaluator with random weights (scripts/tests/test_export_inception.py makes the
// fixtures): its ONNX graph against PyTorch, marspec's TF1 resize against NumPy's, folders of
// 256x256 (and other) PNGs end to end, ADM's reference layouts, and FID against NumPy.
func TestInceptionEvaluator(t *testing.T) {
	needTorch(t)
	lib := ortLib(t)
	dir := t.TempDir()
	cmd := exec.Command(python, "test_export_inception.py", "--out", dir)
	cmd.Env = append(os.Environ(), "PYTHONWARNINGS=ignore", "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("test_export_inception.py failed: %v\n%s", err, out)
	}
	if err := onnxrt.Init(lib, onnxrt.CPU); err != nil {
		t.Fatal(err)
	}
	ev, err := fid.LoadEvaluator(os.DirFS(filepath.Join(dir, "pack")), ".", "inception-random", onnxrt.SessionOptions{IntraOpThreads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	resized := readNpy(t, filepath.Join(dir, "resized.npy"))
	wantFeats := readNpy(t, filepath.Join(dir, "features.npy"))
	wantLogits := readNpy(t, filepath.Join(dir, "logits.npy"))

	t.Run("graph", func(t *testing.T) {
		// the exported graph on PyTorch's exact input: export faithfulness alone
		g, err := onnxrt.NewGraph(mustRead(t, filepath.Join(dir, "pack", "model.onnx")), "model.onnx", onnxrt.SessionOptions{IntraOpThreads: 2},
			[]onnxrt.IOSpec{{Name: "images", Shape: []int64{-1, 3, 299, 299}}},
			[]onnxrt.IOSpec{{Name: "features", Shape: []int64{-1, 2048}}, {Name: "logits", Shape: []int64{-1, 1008}}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		x := make([]float32, len(resized))
		for i, v := range resized {
			x[i] = (float32(v) - 128) / 128
		}
		feats, logits := make([]float32, 8*2048), make([]float32, 8*1008)
		if err := g.Run(8, [][]float32{feats, logits}, x); err != nil {
			t.Fatal(err)
		}
		t.Logf("ONNX vs PyTorch, relative to the largest value: features %.2g, logits %.2g",
			scaledErr(t, "features", f64(feats), wantFeats, 1e-4), scaledErr(t, "logits", f64(logits), wantLogits, 1e-4))
	})

	files, err := fid.ImageFiles(filepath.Join(dir, "a"))
	if err != nil || len(files) != 8 {
		t.Fatalf("folder a: %d files, %v", len(files), err)
	}
	t.Run("resize", func(t *testing.T) {
		worst := 0.0
		for i, f := range files {
			im, err := fid.ReadImage(f, 3)
			if err != nil {
				t.Fatal(err)
			}
			plane := make([]float32, im.Height*im.Width)
			out := make([]float32, 299*299)
			for c := 0; c < 3; c++ {
				for j := range plane {
					plane[j] = float32(im.Pix[c*len(plane)+j])
				}
				if err := fid.ResizeTF1(plane, im.Height, im.Width, 299, 299, out); err != nil {
					t.Fatal(err)
				}
				want := resized[(i*3+c)*299*299:][:299*299]
				for j, v := range out {
					// relative to the pixel range: Go interpolates in float32 as TF does
					e := math.Abs(float64(v)-want[j]) / 255
					worst = math.Max(worst, e)
					if e > 1e-5 {
						t.Fatalf("%s channel %d pixel %d: Go %g, NumPy %g", filepath.Base(f), c, j, v, want[j])
					}
				}
			}
		}
		t.Logf("Go TF1 resize vs NumPy: worst relative difference %.2g", worst)
	})

	accA, probsA, err := fid.FolderStats(ev, filepath.Join(dir, "a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("folder", func(t *testing.T) {
		// PNGs of 256x256, grey and 150x200 through marspec's evaluator: PNG reading, resize,
		// scaling and graph together against NumPy's resize and PyTorch
		feats := folderFeatures(t, ev, files)
		scaledErr(t, "folder a features", feats, wantFeats, 1e-4)
		if accA.N != 8 || len(probsA) != 8 {
			t.Fatalf("folder stats of %d images, %d probability rows; want 8", accA.N, len(probsA))
		}
	})

	t.Run("flat-slices", func(t *testing.T) {
		// eval hands generated images over as bare [C][S][S] slices: the size follows from
		// the length, colour and grey alike
		var flat [][]uint8
		var ims []fid.Image
		for _, f := range files[5:7] { // 05: 256x256 RGB, 06: the grey one
			im, err := fid.ReadImage(f, 3)
			if err != nil {
				t.Fatal(err)
			}
			ims = append(ims, im)
		}
		flat = append(flat, ims[0].Pix, ims[1].Pix[:256*256])
		got, _, err := ev.Evaluate(flat)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := ev.EvaluateImages(ims)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			scaledErr(t, "flat slice features", got[i], want[i], 0)
		}
		if _, _, err := ev.Evaluate([][]uint8{make([]uint8, 3*256*255)}); err == nil || !strings.Contains(err.Error(), "no square image") {
			t.Fatalf("a non-square flat slice: %v", err)
		}
	})

	t.Run("cli", func(t *testing.T) {
		// `marspec fid --evaluator PACK --stats FOLDER`: the folder of 256x256 and other PNGs
		// through the command gives the statistics the package gives
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		bin := filepath.Join(t.TempDir(), "marspec")
		if out, err := exec.Command(gobin, "build", "-o", bin, "marspec/cmd/marspec").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		statsPath := filepath.Join(t.TempDir(), "a.npz")
		cmd := exec.Command(bin, "fid", "--evaluator", filepath.Join(dir, "pack"), "--stats", filepath.Join(dir, "a"), "-o", statsPath, "--quiet")
		cmd.Env = append(os.Environ(), "MARSPEC_ORT_LIB="+lib)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("marspec fid --stats: %v\n%s", err, out)
		}
		st, err := fid.ReadStats(statsPath)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2048; i += 101 {
			// float32 features; the command may run other thread counts, so other sum orders
			if math.Abs(st.Mu[i]-accA.Mean[i]) > 1e-5*math.Max(math.Abs(accA.Mean[i]), 1) {
				t.Fatalf("mu %d from the command %g, from the package %g", i, st.Mu[i], accA.Mean[i])
			}
		}
	})

	t.Run("adm-images", func(t *testing.T) {
		accB, _, err := fid.FolderStats(ev, filepath.Join(dir, "b"), nil)
		if err != nil {
			t.Fatal(err)
		}
		opened := false
		st, err := fid.ReadReference(filepath.Join(dir, "ref_images.npz"), func() (*fid.Evaluator, error) { opened = true; return ev, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !opened {
			t.Fatal("arr_0-only reference read without running the evaluator")
		}
		sigma, _ := accB.Covariance()
		for i := 0; i < 2048; i += 97 {
			if relErr(st.Mu[i], accB.Mean[i]) > 1e-9 || relErr(st.Sigma.At(i, (i*7)%2048), sigma.At(i, (i*7)%2048)) > 1e-9 {
				t.Fatalf("statistics from arr_0 differ from the same images as PNGs at %d: mu %g vs %g", i, st.Mu[i], accB.Mean[i])
			}
		}
	})

	t.Run("adm-stats", func(t *testing.T) {
		st, err := fid.ReadReference(filepath.Join(dir, "ref_stats.npz"), func() (*fid.Evaluator, error) {
			t.Fatal("reference with mu and sigma opened the evaluator")
			return nil, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := readPy(t, dir, `import numpy as np, json, sys; d = np.load(sys.argv[1]); print(json.dumps({"mu": d["mu"].tolist(), "sigma": d["sigma"].tolist()}))`, "ref_stats.npz")
		var ref struct {
			Mu    []float64
			Sigma [][]float64
		}
		if err := json.Unmarshal(want, &ref); err != nil {
			t.Fatal(err)
		}
		if len(st.Mu) != 16 || len(ref.Mu) != 16 {
			t.Fatalf("mu has %d values, want 16", len(st.Mu))
		}
		for i := range ref.Mu {
			for j := range ref.Mu {
				if st.Mu[i] != ref.Mu[i] || relErr(st.Sigma.At(i, j), ref.Sigma[i][j]) > 1e-15 {
					t.Fatalf("mu/sigma read wrongly at %d,%d", i, j)
				}
			}
		}
	})

	t.Run("fid-vs-numpy", func(t *testing.T) {
		accB, _, err := fid.FolderStats(ev, filepath.Join(dir, "b"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s1, _ := accA.Covariance()
		s2, _ := accB.Covariance()
		got, err := fid.Frechet(accA.Mean, s1, accB.Mean, s2)
		if err != nil {
			t.Fatal(err)
		}
		// NumPy on the same features, dumped from Go
		pa, pb := filepath.Join(dir, "fa.npy"), filepath.Join(dir, "fb.npy")
		writeNpy(t, pa, folderFeatures(t, ev, files))
		filesB, _ := fid.ImageFiles(filepath.Join(dir, "b"))
		writeNpy(t, pb, folderFeatures(t, ev, filesB))
		out, err := exec.Command(python, "test_export_inception.py", "--fid", pa, pb).Output()
		if err != nil {
			t.Fatalf("NumPy FID: %v", err)
		}
		var ref struct{ FID float64 }
		if err := json.Unmarshal(out, &ref); err != nil {
			t.Fatal(err)
		}
		t.Logf("FID Go %.10g, NumPy %.10g", got, ref.FID)
		if relErr(got, ref.FID) > 1e-6 {
			t.Fatalf("FID Go %.10g, NumPy %.10g (relative %.2g, allowed 1e-6)", got, ref.FID, relErr(got, ref.FID))
		}
	})
}

func folderFeatures(t *testing.T, ev *fid.Evaluator, files []string) []float64 {
	t.Helper()
	var ims []fid.Image
	for _, f := range files {
		im, err := fid.ReadImage(f, 3)
		if err != nil {
			t.Fatal(err)
		}
		ims = append(ims, im)
	}
	feats, _, err := ev.EvaluateImages(ims)
	if err != nil {
		t.Fatal(err)
	}
	var flat []float64
	for _, f := range feats {
		flat = append(flat, f...)
	}
	return flat
}

// scaledErr is the largest difference relative to the largest reference value; over tol fails.
func scaledErr(t *testing.T, what string, got, want []float64, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale, worst := 0.0, 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	for i := range got {
		worst = math.Max(worst, math.Abs(got[i]-want[i])/scale)
	}
	if !(worst <= tol) {
		t.Errorf("%s: differs by up to %.3g of the largest value (allowed %g)", what, worst, tol)
	}
	return worst
}

func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func readNpy(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var v []float32
	if err := npy.Read(f, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f64(v)
}

func writeNpy(t *testing.T, path string, rows []float64) {
	t.Helper()
	m := mat.NewDense(len(rows)/2048, 2048, rows)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := npy.Write(f, m); err != nil {
		t.Fatal(err)
	}
}

func readPy(t *testing.T, dir, script string, args ...string) []byte {
	t.Helper()
	for i, a := range args {
		args[i] = filepath.Join(dir, a)
	}
	out, err := exec.Command(python, append([]string{"-c", script}, args...)...).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	return []byte(strings.TrimSpace(string(out)))
}
