package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/loadtest"
	"marspec/mar"
	"marspec/remote"
	"marspec/server"
	"marspec/web"
)

// loadFlags are the settings of `marspec loadtest`.
type loadFlags struct {
	server, token   string
	clients, reqs   int
	duration        time.Duration
	minImg, maxImg  int
	numIter         *int // nil: the request leaves it to the service
	mode, preset    string
	runMode         string // the mode and preset the requests run with, resolved against the target pack (check)
	runPreset       string
	crossBatch      string
	seed            uint64
	maxBatch, queue int
	target, draft   string
	jsonOut         string
	rounds          int
	rt              *runtimeFlags
}

func runLoadtest(args []string) (err error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	var f loadFlags
	fs.StringVar(&f.server, "server", "", "a running server to load, or replicas of one service comma-separated (requests go round-robin; loopback only); default: start one in this process on the embedded models")
	fs.StringVar(&f.token, "token", os.Getenv("MARSPEC_TOKEN"), "API token of --server ($MARSPEC_TOKEN)")
	fs.IntVar(&f.clients, "clients", 8, "concurrent clients, each with one request in flight (1 to 256)")
	fs.IntVar(&f.reqs, "requests", 40, "requests per pass (1 to 10000)")
	fs.DurationVar(&f.duration, "duration", 5*time.Minute, "per pass, no new request after this (running ones finish)")
	images := fs.String("images", "2-4", "images per request: N or LO-HI (uniform)")
	numIter := fs.Int("num-iter", 0, "AR steps per image (target and draft modes; 0 = one token per step); unset: the service's default")
	fs.StringVar(&f.mode, "mode", "", "target, draft or spec; unset: the service's default request (the default preset of its target pack)")
	fs.StringVar(&f.preset, "preset", "", "a preset for every request, one of the target pack's (marspec models lists them); unset: the service's default")
	fs.StringVar(&f.crossBatch, "cross-batch", "both", "in-process server: on, off (one request per batch) or both, side by side")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the request mix (classes, counts) and of the requests")
	fs.IntVar(&f.maxBatch, "max-batch", 32, "in-process server: images in flight per engine group")
	fs.IntVar(&f.queue, "queue", 64, "in-process server: queue bound")
	fs.StringVar(&f.target, "target", "target", "in-process server: target pack")
	fs.StringVar(&f.draft, "draft", "draft", "in-process server: draft pack (opened for mode spec only)")
	fs.StringVar(&f.jsonOut, "json", "", "also write the results as JSON to this file")
	fs.IntVar(&f.rounds, "rounds", 1, "with --cross-batch both: rounds of one pass each, in the order on,off then off,on (drift cancels)")
	f.rt = addRuntimeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "num-iter" {
			f.numIter = numIter
		}
	})
	if err := f.check(*images); err != nil {
		return err
	}
	passes := []string{f.crossBatch}
	if f.crossBatch == "both" {
		passes = nil
		for r := range f.rounds {
			if r%2 == 0 {
				passes = append(passes, "on", "off")
			} else {
				passes = append(passes, "off", "on")
			}
		}
	}
	if f.server != "" {
		passes = []string{"server's setting"}
	}
	fmt.Printf("# marspec loadtest: %s/%s, %d CPUs, device %s; %d clients, %d requests of %d-%d images, %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), f.rt.device, f.clients, f.reqs, f.minImg, f.maxImg, f.describeRequest())
	var results []loadtest.Result
	var models generation.Models // shared by the passes: packs open once
	var failed error             // a verdict that failed: the results are printed first
	for _, batching := range passes {
		res, err := f.pass(batching, &models)
		if err != nil && res.Verdict == "" {
			return fmt.Errorf("pass with cross-request batching %s: %w", batching, err)
		}
		if err != nil && failed == nil {
			failed = fmt.Errorf("pass with cross-request batching %s: %w", batching, err)
		}
		results = append(results, res)
	}
	loadtest.Print(os.Stdout, results)
	defer func() {
		if failed != nil && err == nil {
			err = failed
		}
	}()
	if f.jsonOut != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(f.jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (f *loadFlags) check(images string) error {
	var err error
	if f.minImg, f.maxImg, err = loadtest.ParseImages(images); err != nil {
		return err
	}
	switch {
	case f.clients < 1 || f.clients > 256:
		return fmt.Errorf("--clients %d out of range (allowed: 1 to 256)", f.clients)
	case f.reqs < 1 || f.reqs > 10000:
		return fmt.Errorf("--requests %d out of range (allowed: 1 to 10000)", f.reqs)
	case f.duration <= 0 || f.duration > 24*time.Hour:
		return fmt.Errorf("--duration %s out of range (allowed: above 0, at most 24h)", f.duration)
	case f.crossBatch != "on" && f.crossBatch != "off" && f.crossBatch != "both":
		return fmt.Errorf("--cross-batch %q unknown (allowed: on, off, both)", f.crossBatch)
	case f.rounds < 1 || f.rounds > 20 || (f.rounds > 1 && f.crossBatch != "both"):
		return fmt.Errorf("--rounds %d: 1 to 20, and above 1 only with --cross-batch both", f.rounds)
	case f.server != "" && f.crossBatch != "both":
		return fmt.Errorf("--cross-batch applies to the in-process server; start --server with --cross-batch=%v instead", f.crossBatch == "on")
	}
	if f.runMode, f.runPreset, err = f.resolve(); err != nil {
		return err
	}
	if err := generation.CheckNumbers(f.mix().Request().GenerateRequest); err != nil {
		return err
	}
	for _, s := range f.servers() {
		if err := loadtest.LoopbackOnly(s); err != nil {
			return err
		}
	}
	return nil
}

// servers are the --server addresses (replicas of one service share its store and queue).
func (f *loadFlags) servers() []string {
	if f.server == "" {
		return nil
	}
	return strings.Split(f.server, ",")
}

// resolve resolves the requests' mode and preset against the target pack's settings: the
// in-process server's --target, or what --server reports it runs.
func (f *loadFlags) resolve() (mode, preset string, err error) {
	var set *mar.Settings
	pack := f.target
	if bases := f.servers(); len(bases) > 0 {
		if set, pack, err = remote.Settings(context.Background(), bases[0], f.token); err != nil {
			return "", "", err
		}
	} else {
		p, err := generation.LoadPack(f.target)
		if err != nil {
			return "", "", err
		}
		set = generation.PackSettings(p.Manifest)
	}
	mode, preset, _, err = generation.ResolveMode(f.mix().Request(), set, pack)
	return mode, preset, err
}

// describeRequest says what the requests run, for the report's header.
func (f *loadFlags) describeRequest() string { return f.mix().Describe(f.runMode, f.runPreset) }

// pass runs the request mix once against a server: --server, or one started here with
// cross-request batching on or off.
func (f *loadFlags) pass(batching string, models *generation.Models) (loadtest.Result, error) {
	res := loadtest.Result{Batching: batching}
	bases, token := f.servers(), f.token
	if len(bases) == 0 {
		cfg := server.DefaultConfig()
		cfg.Addr, cfg.MaxBatch, cfg.QueueSize, cfg.CrossBatch = "127.0.0.1:0", f.maxBatch, f.queue, batching == "on"
		cfg.Target, cfg.Draft, cfg.Drain = f.target, "", 0
		if mode := f.runMode; mode == generation.ModeSpec || mode == generation.ModeDraft {
			cfg.Draft = f.draft
		}
		cfg.ORTLib, cfg.Device, cfg.Threads, cfg.ORTTuning = f.rt.ortLib, f.rt.device.String(), f.rt.threads, f.rt.tuning
		dir, err := os.MkdirTemp("", "marspec-loadtest-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		cfg.DataDir = dir
		if *models == nil {
			*models = ortModels(cfg)
		}
		srv, st, err := server.Open(cfg, *models, web.FS, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			return res, err
		}
		defer st.Close()
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return res, err
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.ServeUntilDone(ctx, ln, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
		defer func() { stop(); <-done }()
		bases, token = []string{"http://" + ln.Addr().String()}, ""
	}
	var cs []*api.Client
	for _, base := range bases {
		c, err := api.NewClient(base, token, nil)
		if err != nil {
			return res, err
		}
		cs = append(cs, c)
	}
	res, err := loadtest.Drive(cs, f.mix(), batching)
	var gone *loadtest.ReplicaError
	if errors.As(err, &gone) { // the replica that failed, not all of them
		return res, remote.ExplainUnreachable(gone.Base, gone.Err)
	}
	return res, err
}

// mix is the requests the flags ask for.
func (f *loadFlags) mix() loadtest.Mix {
	return loadtest.Mix{Clients: f.clients, Requests: f.reqs, Duration: f.duration, MinImages: f.minImg, MaxImages: f.maxImg,
		Seed: f.seed, Mode: f.mode, Preset: f.preset, NumIter: f.numIter}
}
