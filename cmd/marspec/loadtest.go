package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"marspec/generation"
	"marspec/loadtest"
	"marspec/server"
)

func runLoadtest(args []string) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	p := loadtest.Plan{Local: server.DefaultConfig()}
	m := &p.Mix
	servers := fs.String("server", "", "a running server to load, or replicas of one service comma-separated (requests go round-robin; loopback only); default: start one in this process on the embedded models")
	fs.StringVar(&p.Token, "token", os.Getenv("MARSPEC_TOKEN"), "API token of --server ($MARSPEC_TOKEN)")
	fs.IntVar(&m.Clients, "clients", 8, "concurrent clients, each with one request in flight (1 to 256)")
	fs.IntVar(&m.Requests, "requests", 40, "requests per pass (1 to 10000)")
	fs.DurationVar(&m.Duration, "duration", 5*time.Minute, "per pass, no new request after this (running ones finish)")
	images := fs.String("images", "2-4", "images per request: N or LO-HI (uniform)")
	numIter := fs.Int("num-iter", 0, "AR steps per image (target and draft modes; 0 = one token per step); unset: the service's default")
	fs.StringVar(&m.Mode, "mode", "", "target, draft or spec; unset: the service's default request (the default preset of its target pack)")
	fs.StringVar(&m.Preset, "preset", "", "a preset for every request, one of the target pack's (marspec models lists them); unset: the service's default")
	fs.StringVar(&m.Precision, "precision", "", "the requests' precision, fp32, int8 or fp16 (a CUDA server); unset: their preset's, else the server's default")
	fs.StringVar(&p.CrossBatch, "cross-batch", "both", "in-process server: on, off (one request per batch) or both, side by side")
	fs.Uint64Var(&m.Seed, "seed", 1, "seed of the request mix (classes, counts) and of the requests")
	fs.IntVar(&p.Local.MaxBatch, "max-batch", 32, "in-process server: images in flight, all engine groups together")
	fs.IntVar(&p.Local.Lanes, "lanes", 1, "in-process server: engines a group steps side by side")
	fs.IntVar(&p.Local.QueueSize, "queue", 64, "in-process server: queue bound")
	fs.StringVar(&p.Local.Target, "target", "target", "in-process server: target pack")
	fs.StringVar(&p.Local.Draft, "draft", "draft", "in-process server: draft pack (opened for mode spec only)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	fs.IntVar(&p.Rounds, "rounds", 1, "with --cross-batch both: rounds of one pass each, in the order on,off then off,on (drift cancels)")
	rt := addRuntimeFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := noArgs(fs); err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "num-iter" {
			m.NumIter = numIter
		}
	})
	if *servers != "" {
		p.Servers = strings.Split(*servers, ",")
	}
	var err error
	if m.MinImages, m.MaxImages, err = loadtest.ParseImages(*images); err != nil {
		return err
	}
	p.Local.ORTLib, p.Local.Device, p.Local.Threads, p.Local.ORTTuning = rt.ortLib, rt.device.String(), rt.threads, rt.tuning
	p.OpenModels = func(cfg server.Config) generation.Models { return ortModels(cfg) }
	if err := p.Check(); err != nil {
		return err
	}
	fmt.Printf("# marspec loadtest: %s/%s, %d CPUs, device %s; %d clients, %d requests of %d-%d images, %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), rt.device, m.Clients, m.Requests, m.MinImages, m.MaxImages, p.DescribeRequest())
	results, failed, err := p.Run()
	if err != nil {
		return err
	}
	loadtest.Print(os.Stdout, results)
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*jsonOut, append(data, '\n'), 0o644); err != nil {
			return err
		}
	}
	return failed
}
