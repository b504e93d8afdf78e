package main

import (
	"flag"

	"marspec/generation"
)

// addSpecFlags registers the speculative decoding flags of generate into s.
func addSpecFlags(fs *flag.FlagSet, s *generation.SpecSettings) {
	fs.StringVar(&s.Gamma, "gamma", "8", "draft tokens per round: a number, or auto (chosen per round from measured alpha and cost)")
	fs.Float64Var(&s.Prefill, "prefill", 0.05, "fraction of tokens the target generates alone first")
	fs.StringVar(&s.Verify, "verify", "prefix", "prefix (the paper's Algorithm 1) or group (one target pass per round, tokens judged independently)")
	fs.StringVar(&s.Acceptance, "acceptance", "paper", "paper (with Sigma) or exact (Sigma = 1, lossless)")
	fs.StringVar(&s.Align, "align", "on", "share noise between draft and target: on or off")
	fs.StringVar(&s.Schedule, "schedule", "auto", "prefix rounds: batched (one target pass over gamma+1 contexts), lazy (depth by depth, same images, fewer rows), or auto (lazy on cpu, batched on cuda and with --draft self or exit; exit runs batched only)")
	fs.IntVar(&s.MaxTries, "max-resample-tries", 1000, "bound on acceptance-rejection tries per rejected token")
	fs.StringVar(&s.Rejection, "rejection", "residual", "a rejected draft becomes: residual (a draw from the modified distribution, lossless with exact) or target (the target's own draw: free, lossy, TV bias per token at most alpha)")
	fs.Float64Var(&s.ExitMaxError, "exit-max-error", 0, "with --draft exit: stop a round's drafting at the first position whose predicted RMS error of the exit exceeds this (0 = no bound, gamma drafts)")
	fs.Float64Var(&s.Tolerance, "tolerance", 0, "acceptance tolerance lambda in nats: accept with min(1, e^lambda r); 0 = off, > 0 lossy (see docs/speculative.md)")
}
