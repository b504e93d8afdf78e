package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"marspec/api"
	"marspec/generation"
	"marspec/mar"
	"marspec/remote"
	"marspec/server"
	"marspec/web"
)

// Plan is one load test: the mix, the service it loads (Servers, replicas of one service, or
// an in-process server started per pass on Local's settings) and the passes it makes.
type Plan struct {
	Mix     Mix
	Servers []string // empty: start a server in this process for each pass
	Token   string
	// CrossBatch is the in-process server's cross-request batching: on, off or both (side
	// by side, Rounds rounds of one pass each, in the order on,off then off,on so drift cancels).
	CrossBatch string
	Rounds     int
	// Local is the in-process server's configuration; its Draft opens for modes that need it.
	Local      server.Config
	OpenModels func(server.Config) generation.Models

	mode, preset string // what the requests run, resolved against the target pack
}

// Check says what is out of range, then resolves the requests' mode and preset against the
// target pack (the in-process one, or what the first of Servers reports it runs).
func (p *Plan) Check() error {
	m := p.Mix
	switch {
	case m.Clients < 1 || m.Clients > 256:
		return fmt.Errorf("--clients %d out of range (allowed: 1 to 256)", m.Clients)
	case m.Requests < 1 || m.Requests > 10000:
		return fmt.Errorf("--requests %d out of range (allowed: 1 to 10000)", m.Requests)
	case m.Duration <= 0 || m.Duration > 24*time.Hour:
		return fmt.Errorf("--duration %s out of range (allowed: above 0, at most 24h)", m.Duration)
	case p.CrossBatch != "on" && p.CrossBatch != "off" && p.CrossBatch != "both":
		return fmt.Errorf("--cross-batch %q unknown (allowed: on, off, both)", p.CrossBatch)
	case p.Rounds < 1 || p.Rounds > 20 || (p.Rounds > 1 && p.CrossBatch != "both"):
		return fmt.Errorf("--rounds %d: 1 to 20, and above 1 only with --cross-batch both", p.Rounds)
	case len(p.Servers) > 0 && p.CrossBatch != "both":
		return fmt.Errorf("--cross-batch applies to the in-process server; start --server with --cross-batch=%v instead", p.CrossBatch == "on")
	}
	for _, s := range p.Servers {
		if err := LoopbackOnly(s); err != nil {
			return err
		}
	}
	var err error
	if p.mode, p.preset, err = p.resolve(); err != nil {
		return err
	}
	if err := generation.CheckNumbers(m.Request().GenerateRequest); err != nil {
		return err
	}
	return nil
}

func (p *Plan) resolve() (mode, preset string, err error) {
	var set *mar.Settings
	pack := p.Local.Target
	if len(p.Servers) > 0 {
		if set, pack, err = remote.Settings(context.Background(), p.Servers[0], p.Token); err != nil {
			return "", "", err
		}
	} else {
		pk, err := generation.LoadPack(p.Local.Target)
		if err != nil {
			return "", "", err
		}
		set = generation.PackSettings(pk.Manifest)
	}
	mode, preset, _, err = generation.ResolveMode(p.Mix.Request(), set, pack)
	return mode, preset, err
}

// DescribeRequest says what the requests run (after Check), for a report's header.
func (p *Plan) DescribeRequest() string { return p.Mix.Describe(p.mode, p.preset) }

// Passes names the passes in the order they run.
func (p *Plan) Passes() []string {
	if len(p.Servers) > 0 {
		return []string{"server's setting"}
	}
	if p.CrossBatch != "both" {
		return []string{p.CrossBatch}
	}
	var passes []string
	for r := range p.Rounds {
		if r%2 == 0 {
			passes = append(passes, "on", "off")
		} else {
			passes = append(passes, "off", "on")
		}
	}
	return passes
}

// Run makes every pass. err stops the run (no results worth printing); failedVerdict is the
// first pass whose exactly-once check failed, reported after all the results.
func (p *Plan) Run() (results []Result, failedVerdict, err error) {
	var models generation.Models // shared by the passes: packs open once
	for _, batching := range p.Passes() {
		res, err := p.pass(batching, &models)
		if err != nil && res.Verdict == "" {
			return nil, nil, fmt.Errorf("pass with cross-request batching %s: %w", batching, err)
		}
		if err != nil && failedVerdict == nil {
			failedVerdict = fmt.Errorf("pass with cross-request batching %s: %w", batching, err)
		}
		results = append(results, res)
	}
	return results, failedVerdict, nil
}

// pass runs the mix once against Servers, or against a server started here with
// cross-request batching on or off.
func (p *Plan) pass(batching string, models *generation.Models) (Result, error) {
	res := Result{Batching: batching}
	bases, token := p.Servers, p.Token
	if len(bases) == 0 {
		base, stop, err := p.startLocal(batching == "on", models)
		if err != nil {
			return res, err
		}
		defer stop()
		bases, token = []string{base}, ""
	}
	var cs []*api.Client
	for _, base := range bases {
		c, err := api.NewClient(base, token, nil)
		if err != nil {
			return res, err
		}
		cs = append(cs, c)
	}
	res, err := Drive(cs, p.Mix, batching)
	var gone *ReplicaError
	if errors.As(err, &gone) { // the replica that failed, not all of them
		return res, remote.ExplainUnreachable(gone.Base, gone.Err)
	}
	return res, err
}

// startLocal starts the in-process server on a loopback port with a store in a temporary
// folder; stop shuts it down and removes the folder.
func (p *Plan) startLocal(crossBatch bool, models *generation.Models) (base string, stop func(), err error) {
	cfg := p.Local
	cfg.Addr, cfg.CrossBatch, cfg.Drain = "127.0.0.1:0", crossBatch, 0
	if p.mode != generation.ModeSpec && p.mode != generation.ModeDraft {
		cfg.Draft = ""
	}
	dir, err := os.MkdirTemp("", "marspec-loadtest-")
	if err != nil {
		return "", nil, err
	}
	cleanup := []func(){func() { os.RemoveAll(dir) }}
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	cfg.DataDir = dir
	if *models == nil {
		*models = p.OpenModels(cfg)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, st, err := server.Open(cfg, *models, web.FS, quiet)
	if err != nil {
		undo()
		return "", nil, err
	}
	cleanup = append(cleanup, func() { st.Close() })
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		undo()
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeUntilDone(ctx, ln, quiet) }()
	cleanup = append(cleanup, func() { cancel(); <-done })
	return "http://" + ln.Addr().String(), undo, nil
}
