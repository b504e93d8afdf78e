package main

import (
	"flag"

	"marspec/generation"
	"marspec/mar"
	"marspec/onnxrt"
)

// runtimeFlags are the flags every command that runs a model shares.
type runtimeFlags struct {
	ortLib   string
	device   onnxrt.Device
	provider string // the device's provider, cpu or cuda: what the auto schedule keys on
	threads  int
	tuning   onnxrt.Tuning
	// precision of the transformer and head graphs (mar.FP32, mar.Int8, mar.FP16); checked
	// where packs are read, so a pack without the graphs is named (fp16: on CUDA only)
	precision string
}

// deviceFlag parses --device (and its older name --provider) when the flags are read, so a
// bad value stops the command with the flag named and what is allowed.
type deviceFlag struct{ rt *runtimeFlags }

func (f deviceFlag) String() string {
	if f.rt == nil {
		return onnxrt.CPU.String()
	}
	return f.rt.device.String()
}

func (f deviceFlag) Set(s string) error {
	d, err := onnxrt.ParseDevice(s)
	if err != nil {
		return err
	}
	f.rt.device, f.rt.provider = d, d.Provider()
	return nil
}

func addRuntimeFlags(fs *flag.FlagSet) *runtimeFlags {
	rt := &runtimeFlags{device: onnxrt.CPU, provider: onnxrt.CPU.Provider()}
	fs.StringVar(&rt.ortLib, "ort-lib", "", "path of libonnxruntime.so (default: $MARSPEC_ORT_LIB, then "+
		onnxrt.DefaultGPULib+" for cuda, then "+onnxrt.DefaultLib+")")
	fs.Var(deviceFlag{rt}, "device", onnxrt.DeviceHelp)
	fs.Var(deviceFlag{rt}, "provider", "same as --device (older name)")
	fs.IntVar(&rt.threads, "threads", 0, "ONNX Runtime intra-op threads (0 = its default)")
	fs.Var(&rt.tuning, "ort-tuning", onnxrt.TuningHelp)
	rt.precision = mar.FP32
	return rt
}

// addPrecisionFlag adds --precision to the commands that run model packs (not fid, whose
// evaluator has no reduced precision).
func (rt *runtimeFlags) addPrecisionFlag(fs *flag.FlagSet) {
	fs.StringVar(&rt.precision, "precision", mar.FP32, "transformer and head weights: "+mar.PrecisionNames()+
		" (int8: the pack's quantised graphs, scripts/packs/quantize_pack.py; fp16: its half-precision graphs, scripts/packs/half_pack.py, with --device cuda only)")
}

// pinnedPrecision is --precision as a scoring run's settings record it: "" for fp32, so runs
// made before the flag existed resume unchanged.
func (rt *runtimeFlags) pinnedPrecision() (string, error) {
	p, err := mar.ParsePrecision(rt.precision)
	if err != nil || p == mar.FP32 {
		return "", err
	}
	return p, nil
}

// sessionOptions loads ONNX Runtime for the device (starting the CUDA provider once, so a
// missing library is reported before any work) and returns the options every graph opens with.
func (rt *runtimeFlags) sessionOptions() (onnxrt.SessionOptions, error) {
	if err := onnxrt.Prepare(rt.ortLib, rt.device); err != nil {
		return onnxrt.SessionOptions{}, err
	}
	return onnxrt.SessionOptions{Device: rt.device, IntraOpThreads: rt.threads, Tuning: rt.tuning}, nil
}

// open loads a pack (generation.LoadPackAt: embedded name or folder, at --precision) and opens its graphs.
func (rt *runtimeFlags) open(name string) (*mar.Model, error) { return rt.openAt(name, rt.precision) }

// openAt is open at precision instead of --precision (a run configuration's precision=).
func (rt *runtimeFlags) openAt(name, precision string) (*mar.Model, error) {
	if err := mar.CheckPrecisionProvider(precision, rt.provider); err != nil { // before the pack is read
		return nil, err
	}
	pack, err := generation.LoadPackAt(name, precision)
	if err != nil {
		return nil, err
	}
	opt, err := rt.sessionOptions()
	if err != nil {
		return nil, err
	}
	return pack.Open(opt)
}
