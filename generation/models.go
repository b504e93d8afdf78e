package generation

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"marspec/api"
	"marspec/mar"
	"marspec/models"
	"marspec/onnxrt"
	"marspec/progress"
)

// Models gives the scheduler runnable models by pack name and precision (mar.FP32, mar.Int8, mar.FP16;
// "" is fp32). The ONNX implementation opens each pack once per precision asked for, on first
// use; tests use Fixed with mar/analytic models.
type Models interface {
	Model(pack, precision string) (*mar.Model, error)
}

// OpenModels is what Models that can list their open packs add (both here do): metrics read
// the open models without opening one. The keys are ModelName's.
type OpenModels interface {
	Open() map[string]*mar.Model
}

// ModelName names a pack at a precision: the pack's name at fp32 (so names read as they did
// before there was a choice), "NAME@PRECISION" otherwise.
func ModelName(pack, precision string) string {
	if precision == "" || precision == mar.FP32 {
		return pack
	}
	return pack + "@" + precision
}

// SplitModelName undoes ModelName.
func SplitModelName(name string) (pack, precision string) {
	if pack, precision, ok := strings.Cut(name, "@"); ok {
		return pack, precision
	}
	return name, mar.FP32
}

// Fixed is a Models over models built beforehand, keyed by ModelName: a model given under a
// pack's bare name is its fp32 one, and no other precision is made up from it.
type Fixed map[string]*mar.Model

// Model returns the model of pack at precision.
func (f Fixed) Model(pack, precision string) (*mar.Model, error) {
	if m, ok := f[ModelName(pack, precision)]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("model pack %q is not loaded at precision %s", pack, pick(precision, "", mar.FP32))
}

// Open returns the models, all open from the start.
func (f Fixed) Open() map[string]*mar.Model { return f }

// ORTModels opens packs with ONNX Runtime on first use, once per precision asked for, and
// keeps them open: a server whose requests name int8 now and then holds both sets of graphs.
type ORTModels struct {
	ORTLib   string
	Provider string // cpu, cuda or cuda:N
	Threads  int
	Tuning   onnxrt.Tuning // ONNX Runtime's CPU settings (zero: its defaults)
	// Log, when set, hears a line as each pack starts opening and one when it is open (a
	// big pack takes seconds): "opening NAME (PRECISION)..." and "opened NAME in X s".
	Log io.Writer
	// PrepareImages, when above 0, makes opening a pack also open the unrolled fused head
	// sessions its default requests call with up to that many images in flight (a server's
	// --max-batch; mar.Model.PrepareUnrolled), so first requests pay no session opening. Only
	// where the head takes unrolled graphs (CUDA by default): elsewhere there is nothing to open.
	PrepareImages int

	mu     sync.Mutex
	models map[string]*mar.Model // by ModelName
}

// LoadPack resolves a pack name as the CLI does: "target" and "draft" are the embedded packs
// unless a folder of that name exists; anything else is a folder.
func LoadPack(name string) (*mar.Pack, error) { return LoadPackAt(name, mar.FP32) }

// LoadPackAt is LoadPack with the transformer and head graphs at precision (mar.FP32, mar.Int8, mar.FP16).
// A pack's settings are checked as requests use them (CheckSettings).
func LoadPackAt(name, precision string) (*mar.Pack, error) {
	var p *mar.Pack
	var err error
	if isEmbeddedPack(name) {
		p, err = mar.LoadPackFSAt(models.FS, name, path.Join("embedded", name), precision)
	} else {
		p, err = mar.LoadPackDirAt(name, precision)
	}
	if err != nil {
		return nil, err
	}
	if err := CheckSettings(p.Manifest); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %v", p.Source, err)
	}
	return p, nil
}

// isEmbeddedPack reports whether name is an embedded pack: "target" or "draft" with no folder of
// that name.
func isEmbeddedPack(name string) bool {
	st, err := os.Stat(name)
	return (name == "target" || name == "draft") && (err != nil || !st.IsDir())
}

// LoadManifest reads only a pack's manifest, resolved and checked as LoadPack does: what a
// request needs before the pack opens, for one small file instead of the pack's graphs (1.7 GB
// at MAR-B). A graph missing or broken shows when the pack opens.
func LoadManifest(name string) (*mar.Manifest, error) {
	var m *mar.Manifest
	source := name
	if isEmbeddedPack(name) {
		source = path.Join("embedded", name)
		data, err := fs.ReadFile(models.FS, path.Join(name, "manifest.json"))
		if err != nil {
			return nil, fmt.Errorf("model pack %s: cannot read manifest.json: %v", source, err)
		}
		if m, err = mar.ParseManifest(data, source+"/manifest.json"); err != nil {
			return nil, err
		}
	} else {
		if st, err := os.Stat(name); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("model pack %s: no such folder", name)
		}
		var err error
		if m, err = mar.LoadManifest(name); err != nil {
			return nil, err
		}
	}
	if err := CheckSettings(m); err != nil {
		return nil, fmt.Errorf("%s/manifest.json: %v", source, err)
	}
	return m, nil
}

// Open returns a copy of the packs opened so far, by name.
func (o *ORTModels) Open() map[string]*mar.Model {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]*mar.Model, len(o.models))
	for name, m := range o.models {
		out[name] = m
	}
	return out
}

// Model opens pack at precision (once).
func (o *ORTModels) Model(pack, precision string) (*mar.Model, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	name := ModelName(pack, precision)
	if m, ok := o.models[name]; ok {
		return m, nil
	}
	dev, err := onnxrt.ParseDevice(o.Provider)
	if err != nil {
		return nil, err
	}
	if err := ValidateRuntime(dev.Provider(), o.Threads); err != nil {
		return nil, err
	}
	// the runtime first: a missing library or provider is the one line a refused run prints
	if err := onnxrt.Prepare(o.ORTLib, dev); err != nil {
		return nil, err
	}
	start := time.Now() // reading the graphs is part of opening: a big pack's files take seconds
	if o.Log != nil {
		fmt.Fprintf(o.Log, "opening %s (%s)...\n", pack, pick(precision, "", mar.FP32))
	}
	p, err := LoadPackAt(pack, precision)
	if err != nil {
		return nil, err
	}
	m, err := p.Open(onnxrt.SessionOptions{Device: dev, IntraOpThreads: o.Threads, Tuning: o.Tuning})
	if err != nil {
		return nil, err
	}
	if o.PrepareImages > 0 {
		if err := prepareDefaults(m, p.Manifest, o.PrepareImages); err != nil {
			return nil, fmt.Errorf("%s: %v", pack, err)
		}
	}
	if o.Log != nil {
		fmt.Fprintf(o.Log, "opened %s in %s\n", pack, progress.Span(time.Since(start)))
	}
	if o.models == nil {
		o.models = map[string]*mar.Model{}
	}
	o.models[name] = m
	return m, nil
}

// prepareDefaults opens the unrolled sessions a request with nothing set calls (the pack's
// default preset, as ValidateRequest resolves it), at every batch from 1 to images: jobs merged
// into one engine step add their rows, and each sum rounds up to a power of two that some batch
// of these covers. A default that is not a target run (spec), or that this pack cannot run
// alone (a draft pack under the pair's distilled preset), has nothing to prepare here: such
// requests are refused, or run, without this pack's fused head.
func prepareDefaults(m *mar.Model, man *mar.Manifest, images int) error {
	var zero uint64
	req := Request{GenerateRequest: api.GenerateRequest{Seed: &zero}}
	mode, _, pre, err := ResolveMode(req, PackSettings(man), man.Name)
	if err != nil || mode != ModeTarget {
		return nil
	}
	opt, err := samplingOptions(withPreset(req, pre), man)
	if err != nil {
		return nil
	}
	for b := 1; ; b *= 2 {
		if err := m.PrepareUnrolled(opt, min(b, images)); err != nil {
			return err
		}
		if b >= images {
			return nil
		}
	}
}
