package server

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// Settings come from MARSPEC_* variables, a flag wins over its variable, and a variable that
// does not parse is an error naming it.
func TestConfigFromEnvironmentAndFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	if err := c.bind(fs, env(map[string]string{"MARSPEC_QUEUE": "7", "MARSPEC_ADDR": "127.0.0.1:9", "MARSPEC_DRAIN": "3s",
		"MARSPEC_CROSS_BATCH": "false", "MARSPEC_TOKEN": "hidden", "MARSPEC_ORT_TUNING": "spin=off"})); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--addr", "127.0.0.1:10"}); err != nil {
		t.Fatal(err)
	}
	if c.QueueSize != 7 || c.Addr != "127.0.0.1:10" || c.Drain != 3*time.Second || c.CrossBatch || c.Token != "hidden" || c.MaxBatch != 32 ||
		c.ORTTuning.String() != "spin=off" {
		t.Fatalf("%+v", c)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "hidden") || !strings.Contains(help.String(), "$MARSPEC_TOKEN") {
		t.Errorf("help shows the token or omits its variable:\n%s", help.String())
	}
	for name, val := range map[string]string{"MARSPEC_QUEUE": "many", "MARSPEC_MAX_WAIT": "soon", "MARSPEC_CROSS_BATCH": "maybe", "MARSPEC_ORT_TUNING": "spin=maybe"} {
		var bad Config
		err := bad.bind(flag.NewFlagSet("serve", flag.ContinueOnError), env(map[string]string{name: val}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: %v", name, val, err)
		}
	}
}

func TestConfigCheck(t *testing.T) {
	def := DefaultConfig()
	if err := def.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for flagName, edit := range map[string]func(*Config){
		"--queue":      func(c *Config) { c.QueueSize = 0 },
		"--max-batch":  func(c *Config) { c.MaxBatch = 5000 },
		"--max-images": func(c *Config) { c.MaxImages = -1 },
		"--body-limit": func(c *Config) { c.BodyLimit = 10 },
		"--drain":      func(c *Config) { c.Drain = -time.Second },
		"--max-wait":   func(c *Config) { c.MaxWait = time.Hour },
		"--data-dir":   func(c *Config) { c.DataDir = "" },
	} {
		c := DefaultConfig()
		edit(&c)
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), flagName) {
			t.Errorf("%s: %v", flagName, err)
		}
	}
}
