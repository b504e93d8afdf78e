// Package api is the wire format of the marspec service (JSON over HTTP) and a typed Go client
// for it. It depends on the standard library only, so clients need none of the model runtime.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// GenerateRequest asks for images. Pointer fields are optional: nil means "the default",
// so an explicit 0 (temperature 0, cfg 0, max_resample_tries 0) is an error, not a default.
type GenerateRequest struct {
	Class  Classes `json:"class"`            // id, name, slug, "all", or a list of those
	N      int     `json:"n,omitempty"`      // images per class; default 1
	Seed   *uint64 `json:"seed,omitempty"`   // default: picked by the server, always returned
	Mode   string  `json:"mode,omitempty"`   // target, draft or spec (default spec)
	Preset string  `json:"preset,omitempty"` // fast, balanced or exact

	CFG            *float64 `json:"cfg,omitempty"`
	CFGSchedule    string   `json:"cfg_schedule,omitempty"`
	Temperature    *float64 `json:"temperature,omitempty"`
	NumIter        *int     `json:"num_iter,omitempty"`
	Steps          *int     `json:"steps,omitempty"`
	StepsLate      *int     `json:"steps_late,omitempty"` // diffusion steps of the last AR step (annealing); 0 = off
	FinalStepNoise *bool    `json:"final_step_noise,omitempty"`
	Sampler        string   `json:"sampler,omitempty"` // head sampler: ddpm (default), ddim, dpmpp-2m, dpmpp-2m-sde, distilled (the pack's few-step head)
	Eta            *float64 `json:"eta,omitempty"`     // ddim only: 0 (deterministic) to 1 (ddpm's law)
	// Precision of the transformer and head graphs: fp32, int8 (the pack's quantised graphs) or
	// fp16 (its half-precision graphs; a server on the CUDA provider only);
	// omitted: the server's --precision.
	Precision string `json:"precision,omitempty"`
	// Cache turns on caching across AR steps (docs/cache.md): omitted or null = off, {} = on
	// with the defaults. Target and draft modes, fp32, packs with a cached transformer graph.
	Cache *CacheRequest `json:"cache,omitempty"`

	// speculative decoding (mode spec)
	Gamma            Gamma    `json:"gamma,omitempty"`
	Prefill          *float64 `json:"prefill,omitempty"`
	Verify           string   `json:"verify,omitempty"`
	Acceptance       string   `json:"acceptance,omitempty"`
	Align            *bool    `json:"align,omitempty"`
	Schedule         string   `json:"schedule,omitempty"`
	MaxResampleTries *int     `json:"max_resample_tries,omitempty"`

	// Priority orders the queue: -10 (last) to 10 (first), default 0; a level is worth the
	// server's --priority-aging of waiting time, so a low one is never starved (docs/api.md).
	Priority *int `json:"priority,omitempty"`
	// QueueTimeout is how many seconds the job may wait to start; past it the job fails with
	// error_code queue_deadline_exceeded. Default: the server's --queue-timeout (0: none).
	QueueTimeout *float64 `json:"queue_timeout,omitempty"`
	// Webhook is an http(s) URL called, signed, on the job's events (docs/api.md, "Webhooks").
	Webhook string `json:"webhook,omitempty"`
	// WebhookEvents chooses the events called: started, succeeded, failed, cancelled (default all).
	WebhookEvents []string `json:"webhook_events,omitempty"`

	// ExpiresIn is how many seconds the job and its images are kept once it ends, then
	// deleted (at least 1; at most the server's --retain when it has one, which is also the
	// default; without --retain jobs are kept forever unless a request sets this).
	ExpiresIn *int64 `json:"expires_in,omitempty"`
}

// CacheRequest are the knobs of caching across AR steps; a nil field takes its default.
type CacheRequest struct {
	FullSteps    *int  `json:"full_steps,omitempty"`    // the first steps run a full pass (default 5)
	RefreshEvery *int  `json:"refresh_every,omitempty"` // then every k-th step does (default 9; 1 = every step, today's images)
	Recompute    *int  `json:"recompute,omitempty"`     // more decoder tokens a lazy step recomputes, stalest first (default L/16)
	CFGReuse     *bool `json:"cfg_reuse,omitempty"`     // lazy steps run the class half only, reusing the CFG difference (default true)
}

// Classes is a list of class ids or names; JSON may give one string, one number or a list.
type Classes []string

// UnmarshalJSON accepts "sneaker", 7, or ["sneaker", 3].
func (c *Classes) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			return err
		}
		out := make(Classes, 0, len(items))
		for _, it := range items {
			s, err := scalar(it)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		*c = out
		return nil
	}
	s, err := scalar(data)
	if err != nil {
		return err
	}
	*c = Classes{s}
	return nil
}

// scalar reads a JSON string or integer as a string.
func scalar(data json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		return s, nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		if _, err := strconv.Atoi(n.String()); err == nil {
			return n.String(), nil
		}
	}
	return "", fmt.Errorf("class %s is neither a name nor an integer id", data)
}

// Gamma is a draft length: a number or "auto". JSON may give 8 or "8" or "auto".
type Gamma string

// UnmarshalJSON accepts a JSON number or string.
func (g *Gamma) UnmarshalJSON(data []byte) error {
	s, err := scalar(data)
	if err != nil {
		return fmt.Errorf("gamma %s is neither an integer nor \"auto\"", data)
	}
	*g = Gamma(s)
	return nil
}

// Job states.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// Generation is a job: what was asked (resolved, with the seed used), where it stands, and
// its images.
type Generation struct {
	ID       string     `json:"id"`
	Status   string     `json:"status"`
	Error    string     `json:"error,omitempty"`
	Created  time.Time  `json:"created"`
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	Seconds  float64    `json:"seconds,omitempty"` // started to finished
	Settings Settings   `json:"settings"`
	Progress Progress   `json:"progress"`
	Alpha    *float64   `json:"alpha,omitempty"` // spec mode: accepted over verified drafts, all images
	Images   []Image    `json:"images"`
	Links    Links      `json:"links"`

	// ErrorCode is a failure a client can act on without parsing Error: queue_deadline_exceeded.
	ErrorCode string `json:"error_code,omitempty"`
	// Priority is the job's queue priority, as asked (default 0).
	Priority int `json:"priority"`
	// QueueDeadline is when the job fails unless it has started (its queue_timeout after created).
	QueueDeadline *time.Time `json:"queue_deadline,omitempty"`
	// Webhook is the job's callback and, in GET /v1/generations/{id}, its deliveries.
	Webhook *Webhook `json:"webhook,omitempty"`

	Key       string     `json:"key,omitempty"`        // the name of the API key that created the job (servers with --keys or --token)
	ExpiresIn int64      `json:"expires_in,omitempty"` // seconds the job is kept once it ends; omitted: kept forever
	ExpiresAt *time.Time `json:"expires_at,omitempty"` // when it is deleted with its images (set once it ends)
	// Replayed is true when the server answered with the job an earlier request made under the
	// same Idempotency-Key (header Idempotent-Replayed); the client sets it, it is not JSON.
	Replayed bool `json:"-"`
}

// Settings are a job's resolved parameters (defaults and preset filled in).
type Settings struct {
	Mode        string   `json:"mode"`
	Preset      string   `json:"preset,omitempty"`
	Target      string   `json:"target"`
	Draft       string   `json:"draft,omitempty"`
	Classes     []int    `json:"classes"` // one entry per image
	ClassNames  []string `json:"class_names"`
	Seed        uint64   `json:"seed"`
	CFG         float64  `json:"cfg"`
	CFGSchedule string   `json:"cfg_schedule"`
	Temperature float64  `json:"temperature"`
	NumIter     int      `json:"num_iter"`
	Steps       int      `json:"steps"`
	FinalNoise  bool     `json:"final_step_noise"`
	Sampler     string   `json:"sampler,omitempty"` // omitted for ddpm, the default
	Eta         float64  `json:"eta,omitempty"`
	Precision   string   `json:"precision,omitempty"` // of the transformer and head (int8, fp16); omitted for fp32, the default
	Cache       string   `json:"cache,omitempty"`     // caching across AR steps, its settings in one line; omitted when off
	Spec        *Spec    `json:"spec,omitempty"`
	Params      string   `json:"params"` // the text stamped into every PNG
}

// Spec are the speculative settings of a spec-mode job.
type Spec struct {
	Gamma            string  `json:"gamma"`
	Prefill          float64 `json:"prefill"`
	Verify           string  `json:"verify"`
	Acceptance       string  `json:"acceptance"`
	Align            bool    `json:"align"`
	Schedule         string  `json:"schedule"`
	MaxResampleTries int     `json:"max_resample_tries"`
}

// Progress counts finished images and decoded tokens; while a job runs, the rate and the time
// left.
type Progress struct {
	ImagesDone  int     `json:"images_done"`
	ImagesTotal int     `json:"images_total"`
	TokensDone  int     `json:"tokens_done"`
	TokensTotal int     `json:"tokens_total"`
	Fraction    float64 `json:"fraction"`
	// TokensPerSecond is the tokens this run has decoded since the job started, per second
	// (images made before a restart left out); absent until one was decoded, and once the job
	// has ended.
	TokensPerSecond *float64 `json:"tokens_per_second,omitempty"`
	// SecondsLeft is the time this run has taken scaled by the work left against the work
	// done: an image's work is its AR steps (each about one transformer pass, while MAR's
	// schedule reveals a token or two in the first and many in the last), in spec mode its
	// tokens; absent with the rate.
	SecondsLeft *float64 `json:"seconds_left,omitempty"`
}

// Image is one finished image and its statistics.
type Image struct {
	ID        string      `json:"id"`
	Index     int         `json:"index"`
	Class     int         `json:"class"`
	ClassName string      `json:"class_name"`
	URL       string      `json:"url"`
	Seconds   float64     `json:"seconds"` // job start to this image
	Stats     *ImageStats `json:"stats,omitempty"`
}

// ImageStats are an image's speculative statistics (spec mode only).
type ImageStats struct {
	Alpha          float64 `json:"alpha"`
	Drafted        int     `json:"drafted"`
	Accepted       int     `json:"accepted"`
	Resampled      int     `json:"resampled"`
	Bonus          int     `json:"bonus"`
	Prefilled      int     `json:"prefilled"`
	Rounds         int     `json:"rounds"`
	GridHeight     int     `json:"grid_height"`
	GridWidth      int     `json:"grid_width"`
	AcceptedAtStep []int   `json:"accepted_at_step"`
	RejectedAtStep []int   `json:"rejected_at_step"`
	AcceptedAtPos  []int   `json:"accepted_at_pos"`
	RejectedAtPos  []int   `json:"rejected_at_pos"`
}

// Links are where to follow a job.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
	Grid   string `json:"grid"` // the finished images as one PNG, a row per class
}

// GenerationList is one page of jobs, newest first.
type GenerationList struct {
	Generations []Generation `json:"generations"`
	// Total is how many jobs match, counted for a page asked by offset; -1 for a page asked
	// with after (a cursor page never counts: its cost stays that of its own rows).
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
	// Next is the cursor of the following page (?after=NEXT); empty on the last page.
	Next string `json:"next,omitempty"`
}

// Event is one Server-Sent Event of a job: "progress", "image", or "done" (the final state).
type Event struct {
	Type       string      `json:"type"`
	Generation *Generation `json:"generation,omitempty"`
	Image      *Image      `json:"image,omitempty"`
	Progress   *Progress   `json:"progress,omitempty"`
}

// Model is one model pack the server runs.
type Model struct {
	Role     string   `json:"role"` // target or draft
	Name     string   `json:"name"`
	Classes  []string `json:"classes"`
	SeqLen   int      `json:"seq_len"`
	Steps    int      `json:"sampling_steps"`
	Image    [3]int   `json:"image"` // height, width, channels
	Presets  []string `json:"presets,omitempty"`
	MaxImage int      `json:"max_images_per_request,omitempty"`
	// Samplers are the head samplers this pack runs: the training-free ones, and distilled
	// when it carries a distilled head, with the step counts that head was trained for.
	Samplers       []string `json:"samplers,omitempty"`
	DistilledSteps []int    `json:"distilled_steps,omitempty"`
	// Defaults are what this pack samples with where a request and its preset set nothing.
	Defaults *Defaults `json:"defaults,omitempty"`
	// Precisions are those a request's precision may name on this pack: the graphs it has,
	// less any the server's --precisions leaves out.
	Precisions []string `json:"precisions,omitempty"`
}

// Defaults are a pack's default sampling settings, resolved (docs/model-pack.md, "Settings").
type Defaults struct {
	NumIter     int      `json:"num_iter"` // AR steps
	Steps       int      `json:"steps"`    // diffusion steps
	Sampler     string   `json:"sampler"`
	Eta         *float64 `json:"eta,omitempty"` // ddim only
	CFG         float64  `json:"cfg"`
	CFGSchedule string   `json:"cfg_schedule"`
	Temperature float64  `json:"temperature"`
	// Provenance says where the values come from: "published: ...", "measured: ...",
	// "chosen: ...", or "derived: ..." for a pack whose manifest has no settings.
	Provenance string `json:"provenance"`
}

// PresetInfo is one preset of the running pack.
type PresetInfo struct {
	Mode       string `json:"mode"`
	About      string `json:"about"`
	Provenance string `json:"provenance"`
	// Evaluation marks the preset that reproduces the pack's published evaluation.
	Evaluation bool `json:"evaluation,omitempty"`
}

// Models lists the packs and the presets of the running pack (the target's, or the draft's
// when only a draft is served): presets belong to a pack and come from its manifest.
type Models struct {
	Models  []Model  `json:"models"`
	Presets []string `json:"presets"`
	// PresetsOf names the pack the presets are from.
	PresetsOf string `json:"presets_of,omitempty"`
	// PresetInfo gives each preset's mode, what it runs and where it comes from.
	PresetInfo map[string]PresetInfo `json:"preset_info,omitempty"`
	Modes      []string              `json:"modes"`
	// DefaultPreset is what a request naming neither preset nor mode runs with ("" = spec).
	DefaultPreset string `json:"default_preset,omitempty"`
	// DefaultPrecision is what a request naming no precision runs at (the server's --precision).
	DefaultPrecision string `json:"default_precision,omitempty"`
	// PresetAbout says what each preset runs and what it measured (docs/FRONTIER.md).
	PresetAbout map[string]string `json:"preset_about,omitempty"`
}

// ErrorBody is every error response: a message and, for bad input, the field at fault.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Limit string `json:"limit,omitempty"` // a 429's limit: "rate" or "max_in_flight"
}

// Limits of a named API key (429 beyond them).
const (
	LimitRate        = "rate"          // requests per second to POST and DELETE, with a burst
	LimitMaxInFlight = "max_in_flight" // the key's jobs queued or running at once, over all replicas
)

// Key is an API key as GET /v1/keys shows it: its name and limits, never its secret.
type Key struct {
	Name        string  `json:"name"`
	Admin       bool    `json:"admin,omitempty"`         // reads, cancels and deletes every key's jobs
	Rate        float64 `json:"rate,omitempty"`          // requests per second to POST and DELETE; omitted: no limit
	Burst       int     `json:"burst,omitempty"`         // requests above the rate at once
	MaxInFlight int     `json:"max_in_flight,omitempty"` // jobs queued or running at once; omitted: no limit
	MaxPriority int     `json:"max_priority"`            // the highest priority its requests may ask (above it: 400)
}

// Keys is GET /v1/keys: the key a request was made with (You, "" without one) and the keys it
// may see (every key for an admin, itself otherwise).
type Keys struct {
	You  string `json:"you"`
	Keys []Key  `json:"keys"`
}
