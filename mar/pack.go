package mar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"marspec/onnxrt"
)

// Manifest describes a model pack (docs/model-pack.md).
type Manifest struct {
	Format string `json:"format"`
	Name   string `json:"name"`
	Image  struct {
		Height   int `json:"height"`
		Width    int `json:"width"`
		Channels int `json:"channels"`
	} `json:"image"`
	Tokenizer struct {
		Kind  string `json:"kind"`
		Patch int    `json:"patch"`
		Scale string `json:"scale"`
		// Graph names the decoder graph of a vae_decoder tokenizer (mar/decoder.go);
		// LatentScale records the factor that graph divides tokens by (it applies it itself).
		Graph       string  `json:"graph,omitempty"`
		LatentScale float64 `json:"latent_scale,omitempty"`
	} `json:"tokenizer"`
	Grid struct {
		Height int `json:"height"`
		Width  int `json:"width"`
	} `json:"grid"`
	TokenDim   int      `json:"token_dim"`
	Width      int      `json:"width"`
	BufferSize int      `json:"buffer_size"`
	Classes    []string `json:"classes"`
	Diffusion  struct {
		Schedule      string `json:"schedule"`
		TrainingSteps int    `json:"training_steps"`
		SamplingSteps int    `json:"sampling_steps"`
		Variance      string `json:"variance"`
		ClipX0        bool   `json:"clip_x0"`
	} `json:"diffusion"`
	Training json.RawMessage `json:"training,omitempty"`
	// HeadLoop names the optional fused reverse-diffusion graph (scripts/packs/fuse_head.py).
	HeadLoop *HeadLoopSpec `json:"head_loop,omitempty"`
	// EarlyExit names the optional early-exit draft graphs (mar/earlyexit.go).
	EarlyExit *EarlyExitSpec `json:"early_exit,omitempty"`
	// Precisions names reduced-precision variants of the transformer and head graphs
	// (mar/precision.go, scripts/packs/quantize_pack.py, half_pack.py), by precision name.
	Precisions map[string]PrecisionSpec `json:"precisions,omitempty"`
	// DistilledHead names the optional few-step student head (mar/distilled.go).
	DistilledHead *DistilledHeadSpec `json:"distilled_head,omitempty"`
	// Cache names the optional cached transformer graph for caching across AR steps
	// (mar/cache.go, scripts/packs/cached_transformer.py).
	Cache *CacheSpec `json:"cache,omitempty"`
	// Picked names the optional transformer that makes z at chosen positions only (mar/
	// pickedgraph.go, scripts/packs/picked_transformer.py).
	Picked *PickedSpec `json:"picked,omitempty"`
	// Settings are the pack's own defaults and named presets, with their provenance
	// (mar/settings.go); nil in older packs, which get settings derived from the embedded
	// pack's (generation.PackSettings).
	Settings *Settings `json:"settings,omitempty"`
}

// HeadLoopSpec is the manifest's head_loop entry.
type HeadLoopSpec struct {
	File   string `json:"file"`
	Format string `json:"format"`
	// Unrolled are the same graph unrolled for given step counts (scripts/packs/unroll_head.py)
	Unrolled []UnrolledLoop `json:"unrolled,omitempty"`
	// StackedWidth is the floats per row and step the graph computes once per call, before its
	// loop (the AdaLN modulations of every step); 0 where it computes them per step. A call
	// holds steps x rows x StackedWidth values of them.
	StackedWidth int `json:"stacked_width,omitempty"`
}

// Pack is a manifest plus the bytes of its graphs.
type Pack struct {
	Source    string // where it was read from, for messages
	Precision string // the precision its transformer and head graphs were read at (FP32, Int8, FP16)
	Manifest  *Manifest
	// Transformer is transformer.onnx; nil when the cached graph serves every transformer pass
	// (ServesFromCache), or when TransformerFile is set
	Transformer []byte
	Head        []byte
	HeadLoop    []byte // nil when the manifest names none, or when HeadLoopFile is set
	// HeadLoopFile is head_loop.onnx's path in a pack on disk (opened by path, and only where
	// sampling uses it or FusedLoop asks)
	HeadLoopFile string
	Decoder      []byte // the vae_decoder tokenizer's graph; nil for fixed tokenizers
	// ExitDraft and ExitRest are the early-exit graphs; nil when the manifest names none
	ExitDraft, ExitRest []byte
	// Distilled is the distilled_head graph; nil when the manifest names none
	Distilled []byte
	// Cached is the cached transformer graph at the pack's precision; nil when there is none, or
	// when CachedFile is set
	Cached []byte
	// Picked is the picked transformer at the pack's precision; nil when there is none, or when
	// PickedFile is set (its path on disk)
	Picked     []byte
	PickedFile string
	// TransformerFile, CachedFile, HeadFile and DecoderFile are set instead of Transformer,
	// Cached, Head and Decoder for a pack read from a folder (LoadPackDirAt): ONNX Runtime opens
	// the graph by its path, which also finds the weights of a graph over 2 GB in the .onnx.data
	// file beside it (MAR-H's).
	TransformerFile, CachedFile, HeadFile, DecoderFile string
	files                                              graphFiles // the graph files read, for messages
	servesFromCache                                    bool       // ServesFromCache
	// plainTransformer gives transformer.onnx (its bytes, or its path on disk) of a pack that
	// serves from its cached graph, for a device that runs full passes on it anyway
	plainTransformer func() (data []byte, file string, err error)
	// headLoopErr is a named but unreadable fused graph, reported by Open after the other
	// graphs so errors come in the order transformer, head, fused head.
	headLoopErr error
	// unrolled are the fused head's unrolled graphs at the pack's precision
	unrolled []unrolledGraph
}

// SeqLen is L, the number of tokens per image.
func (m *Manifest) SeqLen() int { return m.Grid.Height * m.Grid.Width }

// ClassIndex resolves a class given by index or by (case-insensitive) name.
func (m *Manifest) ClassIndex(s string) (int, error) {
	s = strings.TrimSpace(s)
	if i, err := strconv.Atoi(s); err == nil {
		if i < 0 || i >= len(m.Classes) {
			return 0, fmt.Errorf("class %d out of range (allowed: 0 to %d, or a name: %s)", i, len(m.Classes)-1, strings.Join(m.Classes, ", "))
		}
		return i, nil
	}
	for i, name := range m.Classes {
		if strings.EqualFold(name, s) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown class %q (allowed: 0 to %d, or a name: %s)", s, len(m.Classes)-1, strings.Join(m.Classes, ", "))
}

// ParseManifest decodes and validates manifest bytes; source names the file in errors.
func ParseManifest(data []byte, source string) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %v", source, err)
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	return &m, nil
}

func (m *Manifest) validate() error {
	switch {
	case m.Format != "marspec-pack/1":
		return fmt.Errorf("format %q unsupported (allowed: marspec-pack/1)", m.Format)
	case m.Name == "":
		return errors.New("name is missing")
	case m.Image.Height < 1 || m.Image.Width < 1 || m.Image.Channels < 1:
		return errors.New("image height, width and channels are missing or not positive")
	case m.Tokenizer.Kind != "space_to_depth" && m.Tokenizer.Kind != TokenizerVAEDecoder:
		return fmt.Errorf("tokenizer kind %q unsupported (allowed: space_to_depth, %s)", m.Tokenizer.Kind, TokenizerVAEDecoder)
	case m.Tokenizer.Kind == TokenizerVAEDecoder && !isPackFileName(m.Tokenizer.Graph):
		return fmt.Errorf("tokenizer graph %q: want a file name in the pack folder ending in .onnx", m.Tokenizer.Graph)
	case m.Tokenizer.Patch < 1:
		return errors.New("tokenizer patch is missing or not positive")
	case m.Grid.Height*m.Tokenizer.Patch != m.Image.Height || m.Grid.Width*m.Tokenizer.Patch != m.Image.Width:
		return fmt.Errorf("grid %dx%d with patch %d does not cover image %dx%d",
			m.Grid.Height, m.Grid.Width, m.Tokenizer.Patch, m.Image.Height, m.Image.Width)
	case m.Tokenizer.Kind == "space_to_depth" && m.TokenDim != m.Image.Channels*m.Tokenizer.Patch*m.Tokenizer.Patch:
		return fmt.Errorf("token_dim %d != channels*patch*patch = %d", m.TokenDim, m.Image.Channels*m.Tokenizer.Patch*m.Tokenizer.Patch)
	case m.Width < 1:
		return errors.New("width is missing or not positive")
	case m.BufferSize < 0:
		return errors.New("buffer_size must not be negative")
	case len(m.Classes) == 0:
		return errors.New("classes is missing or empty")
	case m.Diffusion.Schedule != "cosine" && m.Diffusion.Schedule != "linear":
		return fmt.Errorf("diffusion schedule %q unsupported (allowed: cosine, linear)", m.Diffusion.Schedule)
	case m.Diffusion.Variance != "learned_range":
		return fmt.Errorf("diffusion variance %q unsupported (allowed: learned_range)", m.Diffusion.Variance)
	case m.Diffusion.TrainingSteps < 2:
		return errors.New("diffusion training_steps must be at least 2")
	case m.Diffusion.SamplingSteps < 1 || m.Diffusion.SamplingSteps > m.Diffusion.TrainingSteps:
		return fmt.Errorf("diffusion sampling_steps %d out of range (allowed: 1 to training_steps %d)",
			m.Diffusion.SamplingSteps, m.Diffusion.TrainingSteps)
	}
	if h := m.HeadLoop; h != nil {
		switch {
		case h.Format != HeadLoopFormat:
			return fmt.Errorf("head_loop format %q unsupported (allowed: %s)", h.Format, HeadLoopFormat)
		case h.File == "" || h.File != path.Base(h.File) || strings.ContainsRune(h.File, '\\') || !strings.HasSuffix(h.File, ".onnx"):
			return fmt.Errorf("head_loop file %q: want a file name in the pack folder ending in .onnx", h.File)
		case h.StackedWidth < 0:
			return fmt.Errorf("head_loop stacked_width %d: want 0 or more", h.StackedWidth)
		}
		if err := validateUnrolled(m, "head_loop unrolled", h.Unrolled); err != nil {
			return err
		}
	}
	if x := m.EarlyExit; x != nil {
		if err := x.validate(m); err != nil {
			return err
		}
	}
	if d := m.DistilledHead; d != nil {
		if err := d.validate(m); err != nil {
			return err
		}
	}
	if c := m.Cache; c != nil {
		if err := c.validate(); err != nil {
			return err
		}
	}
	if pk := m.Picked; pk != nil {
		if err := pk.validate(); err != nil {
			return err
		}
	}
	if s := m.Settings; s != nil {
		if err := s.validate(); err != nil {
			return err
		}
	}
	return m.validatePrecisions()
}

// LoadManifest reads and validates dir/manifest.json.
func LoadManifest(dir string) (*Manifest, error) {
	file := filepath.Join(dir, "manifest.json")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("model pack %s: cannot read manifest.json: %v", dir, err)
	}
	return ParseManifest(data, file)
}

// LoadPackFS reads a pack from dir inside fsys (e.g. the embedded default packs) at fp32.
func LoadPackFS(fsys fs.FS, dir, source string) (*Pack, error) {
	return LoadPackFSAt(fsys, dir, source, FP32)
}

// LoadPackFSAt reads a pack with its transformer and head graphs at precision (FP32, Int8, FP16);
// only that precision's graphs are read.
func LoadPackFSAt(fsys fs.FS, dir, source, precision string) (*Pack, error) {
	return loadPack(fsys, dir, source, precision, "")
}

// loadPack is LoadPackFSAt; a pack on disk gives its folder as disk, and its large graphs (the
// transformer graph: transformer.onnx, the cached graph or their int8 variant; the head; the
// decoder) are then not read but opened by path: ONNX Runtime reads the file itself, so the
// process never holds the graphs' bytes beside the sessions' weights (at MAR-B 689 MB, 143 MB
// and 153 MB, kept as long as the Pack).
func loadPack(fsys fs.FS, dir, source, precision, disk string) (*Pack, error) {
	read := func(name string) ([]byte, error) {
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("model pack %s: cannot read %s: %v", source, name, err)
		}
		return data, nil
	}
	raw, err := read("manifest.json")
	if err != nil {
		return nil, err
	}
	m, err := ParseManifest(raw, source+"/manifest.json")
	if err != nil {
		return nil, err
	}
	if precision, err = ParsePrecision(precision); err != nil {
		return nil, err
	}
	files, err := m.graphFiles(precision)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", source, err)
	}
	// byPath is where a transformer graph opens from on disk ("" for a pack read from fsys)
	byPath := func(name string) (string, error) {
		if disk == "" {
			return "", nil
		}
		if _, err := fs.Stat(fsys, path.Join(dir, name)); err != nil {
			return "", fmt.Errorf("model pack %s: cannot read %s: %v", source, name, err)
		}
		return filepath.Join(disk, name), nil
	}
	p := &Pack{Source: source, Manifest: m, Precision: precision, files: files}
	if files.cached != "" {
		size, err := graphBytes(fsys, path.Join(dir, files.transformer))
		if err != nil {
			return nil, fmt.Errorf("model pack %s: cannot read %s: %v", source, files.transformer, err)
		}
		p.servesFromCache = size >= FullPassesFromCacheBytes
	}
	// graph gives a graph file: its path when the pack is on disk (ONNX Runtime opens it), else
	// its bytes
	graph := func(name string) ([]byte, string, error) {
		file, err := byPath(name)
		if err != nil || file != "" {
			return nil, file, err
		}
		data, err := read(name)
		return data, "", err
	}
	if p.ServesFromCache() {
		// read only if a device runs full passes on it (fullPassesFromCache)
		p.plainTransformer = func() ([]byte, string, error) { return graph(files.transformer) }
	} else if p.Transformer, p.TransformerFile, err = graph(files.transformer); err != nil {
		return nil, err
	}
	if p.Head, p.HeadFile, err = graph(files.head); err != nil {
		return nil, err
	}
	if files.headLoop != "" {
		p.HeadLoop, p.HeadLoopFile, p.headLoopErr = graph(files.headLoop)
	}
	for _, u := range files.unrolled {
		if p.headLoopErr != nil {
			break
		}
		g := unrolledGraph{UnrolledLoop: u}
		g.data, g.file, p.headLoopErr = graph(u.File)
		p.unrolled = append(p.unrolled, g)
	}
	if m.Tokenizer.Kind == TokenizerVAEDecoder {
		if p.Decoder, p.DecoderFile, err = graph(m.Tokenizer.Graph); err != nil {
			return nil, err
		}
	}
	if x := m.EarlyExit; x != nil {
		if p.ExitDraft, err = read(x.Draft); err != nil {
			return nil, err
		}
		if p.ExitRest, err = read(x.Rest); err != nil {
			return nil, err
		}
	}
	if d := m.DistilledHead; d != nil {
		if p.Distilled, err = read(d.File); err != nil {
			return nil, err
		}
	}
	if files.cached != "" {
		if p.Cached, p.CachedFile, err = graph(files.cached); err != nil {
			return nil, err
		}
	}
	if files.picked != "" && !p.ServesFromCache() { // a pack that large opens transformer.onnx on a GPU only
		if p.Picked, p.PickedFile, err = graph(files.picked); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// LoadPackDir reads a pack from a folder on disk at fp32.
func LoadPackDir(dir string) (*Pack, error) { return LoadPackDirAt(dir, FP32) }

// LoadPackDirAt reads a pack from a folder on disk at precision (FP32, Int8, FP16).
func LoadPackDirAt(dir, precision string) (*Pack, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("model pack %s: no such folder", dir)
	}
	return loadPack(os.DirFS(dir), ".", dir, precision, dir)
}

// FullPassesFromCacheBytes is the transformer graph's size (with its external weights) from
// which a pack's cached graph serves every transformer pass: holding the weights twice costs
// a MAR-B pack 689 MB and more in the runtime's copies, while the embedded pack's 5 MB cost
// nothing and its plain graph's full pass is 1.09x to 1.23x faster than the cached graph's.
// Tests lower it to reach the one-graph path on small packs.
var FullPassesFromCacheBytes int64 = 64 << 20

// ServesFromCache says whether the cached graph (transformer_cached.onnx, or its variant at
// the pack's precision) serves every transformer pass, full ones included (FullPasses): when
// the precision has a cached graph and the transformer is at least FullPassesFromCacheBytes.
// On the CPU the transformer graph is then neither read nor opened, and its weights are held
// once; a GPU opens it for full passes (fullPassesFromCache).
func (p *Pack) ServesFromCache() bool { return p.servesFromCache }

// fullPassesFromCache says whether the cached graph serves full passes on this device. Only on
// the CPU: the cached graph's full pass hands every block's K/V back, and on a GPU that is a
// copy to host memory (MAR-B, guided batch 8: about 750 MB a pass, 239 ms against 11 ms for
// transformer.onnx's pass on an H200), while a second copy of the weights costs the device
// little. Tests set it to reach the GPU's opening on the CPU.
var fullPassesFromCache = func(dev onnxrt.Device) bool { return !dev.CUDA }

// graphBytes is a graph file's size plus its external weights' (NAME.data), if any.
func graphBytes(fsys fs.FS, name string) (int64, error) {
	st, err := fs.Stat(fsys, name)
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if data, err := fs.Stat(fsys, name+".data"); err == nil {
		size += data.Size()
	}
	return size, nil
}

// Open builds a runnable model from a pack (ONNX Runtime must be initialised).
func (p *Pack) Open(opt onnxrt.SessionOptions) (*Model, error) {
	if err := CheckPrecisionProvider(p.Precision, opt.Device.Provider()); err != nil {
		return nil, fmt.Errorf("model pack %s: %w", p.Source, err)
	}
	var tok Tokenizer
	var err error
	if p.Manifest.Tokenizer.Kind != TokenizerVAEDecoder { // before the sessions, so a failure leaks none
		if tok, err = NewTokenizer(p.Manifest); err != nil {
			return nil, err
		}
	}
	// The transformer, the head and the decoder open side by side: opening a graph is mostly
	// copying its weights into fresh memory (read, initialisers, pre-packed copies), one
	// core's work per graph, and at MAR-B the three hold 985 MB. A failure closes what opened
	// and reports the first failing graph in this order.
	var (
		tr interface {
			Transformer
			Close() error
		}
		cached *CachedTransformer
		head   *ONNXHead
		dec    *ONNXDecoder
		errs   [3]error
		wg     sync.WaitGroup
	)
	wg.Add(2)
	go func() { defer wg.Done(); tr, cached, errs[0] = p.openTransformer(opt) }()
	go func() { defer wg.Done(); head, errs[1] = p.openHead(opt) }()
	if tok == nil {
		dec, errs[2] = newONNXDecoder(p.Decoder, p.DecoderFile, p.Manifest, opt, p.Source+"/"+p.Manifest.Tokenizer.Graph)
	}
	wg.Wait()
	// a graph that fails closes every session opened before it
	var opened []interface{ Close() error }
	closeOpened := func() {
		for _, c := range opened {
			c.Close()
		}
	}
	if tr != nil {
		opened = append(opened, tr)
	}
	if head != nil {
		opened = append(opened, head)
	}
	if dec != nil {
		opened = append(opened, dec)
	}
	for _, err := range errs {
		if err != nil {
			closeOpened()
			return nil, err
		}
	}
	if dec != nil {
		tok = dec
	}
	model := &Model{Manifest: p.Manifest, Transformer: NewOpeningMemo(tr, OpeningMemoBytes), Head: head, Tokenizer: tok}
	if p.Manifest.EarlyExit != nil {
		exit, err := NewONNXEarlyExit(p.ExitDraft, p.ExitRest, p.Manifest, opt, p.Source)
		if err != nil {
			closeOpened()
			return nil, err
		}
		model.Exit = exit
		opened = append(opened, exit)
	}
	if d := p.Manifest.DistilledHead; d != nil {
		dh, err := NewONNXDistilledHead(p.Distilled, p.Manifest, opt, p.Source+"/"+d.File)
		if err != nil {
			closeOpened()
			return nil, err
		}
		model.Distilled = dh
	}
	model.Cached = cached
	return model, nil
}

// openHead opens the head and, where sampling uses it (headLoopWanted), the fused head loop;
// elsewhere the loop opens on first use (ONNXHead.FusedLoop).
func (p *Pack) openHead(opt onnxrt.SessionOptions) (*ONNXHead, error) {
	head, err := newONNXHead(p.Head, p.HeadFile, p.Manifest, opt, p.Source+"/"+p.files.head)
	if err != nil {
		return nil, err
	}
	if p.headLoopErr != nil {
		head.Close()
		return nil, p.headLoopErr
	}
	if p.HeadLoop != nil || p.HeadLoopFile != "" {
		head.loop = &lazyLoop{open: func() (*HeadLoop, error) {
			return newHeadLoop(p.HeadLoop, p.HeadLoopFile, p.Manifest, opt, p.Source+"/"+p.files.headLoop)
		}}
		if head.useLoop = headLoopWanted(opt.Device); head.useLoop {
			if _, err = head.loop.get(); err != nil {
				head.Close()
				return nil, err
			}
		}
		if unrolledWanted(opt.Device) {
			if head.unrolled = p.unrolledLoops(opt); head.unrolled != nil {
				head.dispatch = &fusedLoops{rolled: head.loop, unrolled: head.unrolled}
			}
		}
	}
	return head, nil
}

// openTransformer opens the graph that serves transformer passes and the model's cached
// graph: one session when the pack serves from the cached graph, else transformer.onnx (at the
// pack's precision) and, if the precision has one, the cached graph beside it. Closing the
// transformer it returns closes both.
func (p *Pack) openTransformer(opt onnxrt.SessionOptions) (interface {
	Transformer
	Close() error
}, *CachedTransformer, error) {
	var ct *CachedTransformer
	if p.files.cached != "" {
		var err error
		if ct, err = newCachedTransformer(p.Cached, p.CachedFile, p.Manifest, opt, p.Source+"/"+p.files.cached); err != nil {
			return nil, nil, err
		}
	}
	data, file := p.Transformer, p.TransformerFile
	if p.ServesFromCache() {
		if fullPassesFromCache(opt.Device) {
			return FullPasses{ct}, ct, nil
		}
		var err error
		if data, file, err = p.plainTransformer(); err != nil {
			ct.Close()
			return nil, nil, err
		}
	}
	tr, err := newONNXTransformer(data, file, p.Manifest, opt, p.Source+"/"+p.files.transformer)
	if err == nil {
		if tr.picked, err = openPickedGraph(p.Picked, p.PickedFile, p.Manifest, opt, p.Source+"/"+p.files.picked); err != nil {
			tr.Close()
		}
	}
	if err != nil {
		if ct != nil {
			ct.Close()
		}
		return nil, nil, err
	}
	if ct == nil {
		return tr, nil, nil
	}
	return withCached{tr, ct}, ct, nil
}

// withCached is transformer.onnx's session with the cached graph's beside it, closed together.
type withCached struct {
	*ONNXTransformer
	cached *CachedTransformer
}

func (w withCached) Close() error { return errors.Join(w.ONNXTransformer.Close(), w.cached.Close()) }

// Validate checks a manifest built or edited in memory as ParseManifest checks one read.
func (m *Manifest) Validate() error { return m.validate() }

// closeModel releases the sessions of a model whose opening failed part way.
func closeModel(m *Model) {
	for _, g := range []any{m.Transformer, m.Head, m.Exit, m.Distilled, m.Tokenizer} {
		if c, ok := g.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}
