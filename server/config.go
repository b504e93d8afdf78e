package server

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"marspec/mar"
	"marspec/onnxrt"
	"marspec/store"
)

// Config is every setting of the service, read in one place: each has a flag and a MARSPEC_*
// environment variable (the flag wins), a default and a description (listed by serve -h).
type Config struct {
	Addr         string
	DataDir      string
	Store        string // jobs and image records: sqlite:PATH or postgres://… (empty: SQLite in DataDir)
	Blobs        string // image bytes: file:DIR or s3://BUCKET?… (empty: files in DataDir)
	Target       string
	Draft        string
	ORTLib       string
	Device       string
	Threads      int
	Precision    string // of the packs' transformer and head graphs for requests that name none: fp32, int8 or fp16 (mar.ParsePrecision; fp16 on CUDA only)
	Precisions   string // what requests may name, comma-separated; "" = every precision the packs have graphs for
	ORTTuning    onnxrt.Tuning
	QueueSize    int
	MaxBatch     int
	Lanes        int // engines per group stepped side by side (scheduler/lanes.go)
	MaxImages    int
	MaxWait      time.Duration
	BodyLimit    int64
	Token        string
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	RetryAfter   time.Duration
	Drain        time.Duration // at shutdown, how long running jobs may go on finishing
	CrossBatch   bool          // merge concurrent requests into one batch (off: one request per batch, to measure)
	Lease        time.Duration // with a shared store, how long a replica owns a job without renewing

	// priorities, queue deadlines and webhooks (config_hosted.go, docs/api.md)
	PriorityAging   time.Duration // the waiting time one priority level is worth
	QueueTimeout    time.Duration // a request's queue_timeout when it gives none (0: none)
	MaxQueueTimeout time.Duration // the longest queue_timeout a request may ask
	WebhookSecret   string        // signs webhook calls; comma-separated while rotating (the first is current); empty: no webhooks
	WebhookHosts    string        // hosts a webhook may call (comma-separated; empty: any); private addresses only if listed as IPs
	WebhookAttempts int           // tries per webhook event before giving up
	WebhookTimeout  time.Duration // how long one try may take

	KeysFile string        // named API keys with their limits (keys.go); read by Check into APIKeys
	APIKeys  []APIKey      // the keys of KeysFile (tests set them directly)
	Retain   time.Duration // how long a finished job is kept by default, and at most (retention.go); 0: forever
}

// Bind registers the flags on fs; their defaults come from MARSPEC_* variables when set.
// It returns an error naming a variable whose value does not parse.
func (c *Config) Bind(fs *flag.FlagSet) error { return c.bind(fs, os.LookupEnv) }

// DefaultConfig is the configuration with every default and no environment (tests, loadtest).
func DefaultConfig() Config {
	var c Config
	_ = c.bind(flag.NewFlagSet("defaults", flag.ContinueOnError), func(string) (string, bool) { return "", false })
	return c
}

func (c *Config) bind(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	env := func(name, def string) string {
		if v, ok := lookup("MARSPEC_" + name); ok {
			return v
		}
		return def
	}
	s := func(p *string, flagName, envName, def, help string) {
		fs.StringVar(p, flagName, env(envName, def), help+" ($MARSPEC_"+envName+")")
	}
	n := func(p *int, flagName, envName string, def int, help string) {
		v := env(envName, strconv.Itoa(def))
		got, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("$MARSPEC_%s %q is not an integer", envName, v))
		}
		fs.IntVar(p, flagName, got, help+" ($MARSPEC_"+envName+")")
	}
	d := func(p *time.Duration, flagName, envName string, def time.Duration, help string) {
		v := env(envName, def.String())
		got, err := time.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("$MARSPEC_%s %q is not a duration (e.g. 30s)", envName, v))
		}
		fs.DurationVar(p, flagName, got, help+" ($MARSPEC_"+envName+")")
	}
	s(&c.Addr, "addr", "ADDR", "127.0.0.1:8080", "listen address")
	s(&c.DataDir, "data-dir", "DATA_DIR", "data", "folder for the database and the images")
	s(&c.Target, "target", "TARGET", "target", "target pack (embedded name or folder)")
	s(&c.Draft, "draft", "DRAFT", "draft", "draft pack (embedded name or folder); empty = no draft and spec modes")
	s(&c.ORTLib, "ort-lib", "ORT_LIB", "", "path of libonnxruntime.so (default: third_party/onnxruntime/libonnxruntime.so)")
	s(&c.Device, "device", "DEVICE", "cpu", "where models run: cpu, cuda (GPU 0) or cuda:N")
	n(&c.Threads, "threads", "THREADS", 0, "ONNX Runtime intra-op threads (0 = its default)")
	if err := c.ORTTuning.Set(env("ORT_TUNING", "")); err != nil {
		errs = append(errs, fmt.Errorf("$MARSPEC_ORT_TUNING: %v", err))
	}
	fs.Var(&c.ORTTuning, "ort-tuning", onnxrt.TuningHelp+" ($MARSPEC_ORT_TUNING)")
	s(&c.Precision, "precision", "PRECISION", mar.FP32, "transformer and head weights of requests that name none: "+mar.PrecisionNames()+" (int8: the packs' quantised graphs, scripts/packs/quantize_pack.py; fp16: their half-precision graphs, scripts/packs/half_pack.py, with --device cuda only)")
	s(&c.Precisions, "precisions", "PRECISIONS", "", "precisions a request may name, comma-separated (e.g. fp32 to refuse int8); empty = every one the packs have graphs for")
	n(&c.QueueSize, "queue", "QUEUE", 64, "jobs accepted and not finished; more get 503")
	n(&c.MaxBatch, "max-batch", "MAX_BATCH", 32, "images in flight on this server, all engine groups (packs, precisions, modes) together")
	n(&c.Lanes, "lanes", "LANES", 1, "engines a group of merged requests steps side by side, its images split between them (1: one engine; more was no faster on 2 cores)")
	n(&c.MaxImages, "max-images", "MAX_IMAGES", 256, "images per request")
	d(&c.MaxWait, "max-wait", "MAX_WAIT", time.Minute, "longest ?wait= a request may ask for")
	bodyEnv := env("BODY_LIMIT", "65536")
	body, err := strconv.ParseInt(bodyEnv, 10, 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("$MARSPEC_BODY_LIMIT %q is not an integer", bodyEnv))
	}
	fs.Int64Var(&c.BodyLimit, "body-limit", body, "largest request body in bytes, 413 beyond ($MARSPEC_BODY_LIMIT)")
	// a store URL may carry a password: -h shows the variables' names, never their values
	c.Store, _ = lookup("MARSPEC_STORE")
	fs.Var((*secret)(&c.Store), "store", "jobs and image records: sqlite:PATH or postgres://USER@HOST:PORT/DB (several replicas share one); default: SQLite in --data-dir ($MARSPEC_STORE)")
	c.Blobs, _ = lookup("MARSPEC_BLOBS")
	fs.Var((*secret)(&c.Blobs), "blobs", "image bytes: file:DIR or s3://BUCKET?endpoint=http://HOST:PORT&region=R (keys in the URL or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY); default: files in --data-dir ($MARSPEC_BLOBS)")
	c.Token, _ = lookup("MARSPEC_TOKEN")
	fs.Var((*secret)(&c.Token), "token", "if set, POST and DELETE need 'Authorization: Bearer TOKEN' ($MARSPEC_TOKEN)")
	d(&c.ReadTimeout, "read-timeout", "READ_TIMEOUT", 10*time.Second, "time to read a request")
	d(&c.WriteTimeout, "write-timeout", "WRITE_TIMEOUT", 90*time.Second, "time to write a response (event streams extend it)")
	d(&c.RetryAfter, "retry-after", "RETRY_AFTER", 5*time.Second, "Retry-After sent with 503 when the queue is full")
	b := func(p *bool, flagName, envName string, def bool, help string) {
		v := env(envName, strconv.FormatBool(def))
		got, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("$MARSPEC_%s %q is not a boolean (true or false)", envName, v))
		}
		fs.BoolVar(p, flagName, got, help+" ($MARSPEC_"+envName+")")
	}
	d(&c.Drain, "drain", "DRAIN", 10*time.Second, "at SIGINT/SIGTERM, time for running jobs to finish; the rest resume on the next start")
	b(&c.CrossBatch, "cross-batch", "CROSS_BATCH", true, "merge concurrent requests into one running batch (false: one request per batch)")
	s(&c.KeysFile, "keys", "KEYS", "", "JSON file of named API keys with their rate and in-flight limits (docs/api.md, \"Keys\"); empty: --token alone, or open")
	d(&c.Retain, "retain", "RETAIN", 0, "how long finished jobs and their images are kept, and the most a request's expires_in may ask (0: forever)")
	d(&c.Lease, "lease", "LEASE", 10*time.Second, "with a PostgreSQL --store, how long a replica owns a job without renewing it (renewed every third); a killed replica's jobs move after it")
	d(&c.PriorityAging, "priority-aging", "PRIORITY_AGING", store.DefaultPriorityAging, "the waiting time one priority level is worth: a job is queued as if it came priority x this earlier, so it is passed only by jobs arriving less than 20 x this after it")
	d(&c.QueueTimeout, "queue-timeout", "QUEUE_TIMEOUT", 0, "a job not started this long after it was accepted fails (queue_deadline_exceeded), unless its request sets queue_timeout; 0 = no deadline")
	d(&c.MaxQueueTimeout, "max-queue-timeout", "MAX_QUEUE_TIMEOUT", 24*time.Hour, "the longest queue_timeout a request may ask for")
	c.WebhookSecret, _ = lookup("MARSPEC_WEBHOOK_SECRET")
	fs.Var((*secret)(&c.WebhookSecret), "webhook-secret", "signs webhook calls (HMAC-SHA256; NEW,OLD while rotating: both signatures are sent); empty = requests with a webhook get 400 ($MARSPEC_WEBHOOK_SECRET)")
	s(&c.WebhookHosts, "webhook-hosts", "WEBHOOK_HOSTS", "", "hosts webhooks may call: HOST, *.DOMAIN, either with :PORT, comma-separated; empty = any host; either way a call connects only to public addresses and to IPs listed here")
	n(&c.WebhookAttempts, "webhook-attempts", "WEBHOOK_ATTEMPTS", 10, "tries per webhook event (backoff 1s doubling to 10m, jittered) before it is given up")
	d(&c.WebhookTimeout, "webhook-timeout", "WEBHOOK_TIMEOUT", 10*time.Second, "how long one webhook try may take; no 2xx by then is a failed try")
	return errors.Join(errs...)
}

// Check rejects settings that cannot work, naming the flag.
func (c *Config) Check() error {
	if err := checkAddr(c.Addr); err != nil {
		return err
	}
	switch {
	case c.QueueSize < 1 || c.QueueSize > 100000:
		return fmt.Errorf("--queue %d out of range (allowed: 1 to 100000)", c.QueueSize)
	case c.MaxBatch < 1 || c.MaxBatch > 1024:
		return fmt.Errorf("--max-batch %d out of range (allowed: 1 to 1024)", c.MaxBatch)
	case c.Lanes < 0 || c.Lanes > 64:
		return fmt.Errorf("--lanes %d out of range (allowed: 1 to 64)", c.Lanes)
	case c.MaxImages < 1 || c.MaxImages > 10000:
		return fmt.Errorf("--max-images %d out of range (allowed: 1 to 10000)", c.MaxImages)
	case c.BodyLimit < 1024 || c.BodyLimit > 64<<20:
		return fmt.Errorf("--body-limit %d out of range (allowed: 1024 to %d bytes)", c.BodyLimit, 64<<20)
	case c.MaxWait < 0 || c.Drain < 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.RetryAfter <= 0:
		return errors.New("--max-wait and --drain must not be negative; --read-timeout, --write-timeout and --retry-after must be positive")
	case c.MaxWait >= c.WriteTimeout:
		return fmt.Errorf("--max-wait %s must be below --write-timeout %s (the answer must still be written)", c.MaxWait, c.WriteTimeout)
	case c.Lease < 300*time.Millisecond || c.Lease > time.Hour:
		return fmt.Errorf("--lease %s out of range (allowed: 300ms to 1h)", c.Lease)
	case c.DataDir == "":
		return errors.New("--data-dir must not be empty")
	case c.Retain < 0 || c.Retain > maxRetain:
		return fmt.Errorf("--retain %s out of range (allowed: 0, forever, up to %s)", c.Retain, maxRetain)
	}
	if err := c.loadKeys(); err != nil {
		return err
	}
	if err := c.checkHosted(); err != nil {
		return err
	}
	return checkStoreURLs(c)
}

// secret is a flag whose value -h never prints (its default may come from the environment).
type secret string

func (s *secret) String() string     { return "" }
func (s *secret) Set(v string) error { *s = secret(v); return nil }

// checkAddr refuses an --addr that cannot be listened on for its form alone (the port is
// tried when serving starts, before the data folder is touched).
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v (allowed: HOST:PORT or :PORT, e.g. 127.0.0.1:8080)", addr, strings.TrimPrefix(err.Error(), "address "+addr+": "))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--addr %q: port %q out of range (allowed: 0 to 65535; 0 picks a free one)", addr, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("--addr %q: host %q is not a host name or IP address", addr, host)
	}
	return nil
}
