package generation

import (
	"fmt"
	"os"
	"path"
	"sync"

	"marspec/mar"
	"marspec/models"
	"marspec/onnxrt"
)

// Models gives the scheduler runnable models by pack name. The ONNX implementation opens each
// pack once; tests use Fixed with mar/analytic models.
type Models interface {
	Model(pack string) (*mar.Model, error)
}

// OpenModels is what Models that can list their open packs add (both here do): metrics read
// the open models without opening one.
type OpenModels interface {
	Open() map[string]*mar.Model
}

// Fixed is a Models over models built beforehand.
type Fixed map[string]*mar.Model

// Model returns the model named pack.
func (f Fixed) Model(pack string) (*mar.Model, error) {
	if m, ok := f[pack]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("model pack %q is not loaded", pack)
}

// Open returns the models, all open from the start.
func (f Fixed) Open() map[string]*mar.Model { return f }

// ORTModels opens packs with ONNX Runtime on first use and keeps them open.
type ORTModels struct {
	ORTLib    string
	Provider  string // cpu, cuda or cuda:N
	Threads   int
	Tuning    onnxrt.Tuning // ONNX Runtime's CPU settings (zero: its defaults)
	Precision string        // of the transformer and head graphs: mar.FP32 ("" too) or mar.Int8

	mu     sync.Mutex
	models map[string]*mar.Model
}

// LoadPack resolves a pack name as the CLI does: "target" and "draft" are the embedded packs
// unless a folder of that name exists; anything else is a folder.
func LoadPack(name string) (*mar.Pack, error) { return LoadPackAt(name, mar.FP32) }

// LoadPackAt is LoadPack with the transformer and head graphs at precision (mar.FP32, mar.Int8).
// A pack's settings are checked as requests use them (CheckSettings).
func LoadPackAt(name, precision string) (*mar.Pack, error) {
	var p *mar.Pack
	var err error
	if st, serr := os.Stat(name); (name == "target" || name == "draft") && (serr != nil || !st.IsDir()) {
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

// Model opens pack (once).
func (o *ORTModels) Model(pack string) (*mar.Model, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m, ok := o.models[pack]; ok {
		return m, nil
	}
	dev, err := onnxrt.ParseDevice(o.Provider)
	if err != nil {
		return nil, err
	}
	if err := ValidateRuntime(dev.Provider(), o.Threads); err != nil {
		return nil, err
	}
	p, err := LoadPackAt(pack, o.Precision)
	if err != nil {
		return nil, err
	}
	if err := onnxrt.Prepare(o.ORTLib, dev); err != nil {
		return nil, err
	}
	m, err := p.Open(onnxrt.SessionOptions{Device: dev, IntraOpThreads: o.Threads, Tuning: o.Tuning})
	if err != nil {
		return nil, err
	}
	if o.models == nil {
		o.models = map[string]*mar.Model{}
	}
	o.models[pack] = m
	return m, nil
}
