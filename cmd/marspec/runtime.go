package main

import (
	"flag"
	"os"
	"path"

	"marspec/mar"
	"marspec/models"
)

// runtimeFlags are the flags every command that runs a model shares.
type runtimeFlags struct {
	ortLib   string
	provider string
	threads  int
}

func addRuntimeFlags(fs *flag.FlagSet) *runtimeFlags {
	rt := &runtimeFlags{}
	fs.StringVar(&rt.ortLib, "ort-lib", "", "path of libonnxruntime.so (default: $MARSPEC_ORT_LIB, then "+mar.DefaultORTLib+")")
	fs.StringVar(&rt.provider, "provider", "cpu", "ONNX Runtime execution provider: cpu or cuda")
	fs.IntVar(&rt.threads, "threads", 0, "ONNX Runtime intra-op threads (0 = its default)")
	return rt
}

// loadPack resolves a pack name: "target" and "draft" are the embedded packs, unless a folder
// of that name exists; anything else is a folder.
func loadPack(name string) (*mar.Pack, error) {
	if name == "target" || name == "draft" {
		if st, err := os.Stat(name); err != nil || !st.IsDir() {
			return mar.LoadPackFS(models.FS, name, path.Join("embedded", name))
		}
	}
	return mar.LoadPackDir(name)
}

func (rt *runtimeFlags) open(name string) (*mar.Model, error) {
	pack, err := loadPack(name)
	if err != nil {
		return nil, err
	}
	if err := mar.InitRuntime(rt.ortLib); err != nil {
		return nil, err
	}
	return pack.Open(mar.SessionOptions{Provider: mar.Provider(rt.provider), IntraOpThreads: rt.threads})
}
