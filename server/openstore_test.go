package server

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"marspec/api"
	"marspec/store"
	"marspec/store/storetest"
)

// A store that cannot be opened is one line naming the flag and what was tried, never the
// password.
func TestOpenStoreNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		store, blobs string
		want         string
	}{
		{"mysql://x", "", "--store mysql://x: unknown kind of store (allowed: sqlite:PATH or postgres://"},
		{"sqlite:", "", "--store sqlite:: unknown kind"},
		{"", "gs://bucket", "--blobs gs://bucket: unknown kind of image store (allowed: file:DIR or s3://"},
		{"postgres://u:hunter2@127.0.0.1:1/db", "", "--store postgres://u:xxxxx@127.0.0.1:1/db: "},
		{"", "s3://k:hunter2@b?endpoint=http://127.0.0.1:1", "--blobs s3://k:xxxxx@b?endpoint=http://127.0.0.1:1: bucket b at http://127.0.0.1:1"},
		{"", "s3://b?endpoint=http://127.0.0.1:1&sign=no", `--blobs s3://b?endpoint=http://127.0.0.1:1&sign=no: unknown parameter "sign"`},
	} {
		cfg := testConfig()
		cfg.DataDir, cfg.Store, cfg.Blobs = dir, c.store, c.blobs
		err := cfg.Check()
		if err == nil {
			var st *store.Store
			st, err = OpenStore(cfg)
			if err == nil {
				st.Close()
			}
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "\n") {
			t.Errorf("--store %q --blobs %q: %v; want one line starting %q", c.store, c.blobs, err, c.want)
		}
	}
}

// --store and --blobs mix freely with the embedded defaults: PostgreSQL with files in
// --data-dir, SQLite at a path of its own with S3.
func TestOpenStoreMixes(t *testing.T) {
	for name, c := range map[string]func(t *testing.T) (string, string){
		"postgres+files": func(t *testing.T) (string, string) { return storetest.Postgres(t), "" },
		"sqlite+s3": func(t *testing.T) (string, string) {
			return "sqlite:" + filepath.Join(t.TempDir(), "db", "m.db"), storetest.S3(t).URL("gallery")
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig()
			cfg.DataDir = t.TempDir()
			cfg.Store, cfg.Blobs = c(t)
			if err := cfg.Check(); err != nil {
				t.Fatal(err)
			}
			st, err := OpenStore(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ts := startWith(t, st, "", false, cfg)
			g, err := ts.client.Generate(t.Context(), api.GenerateRequest{Class: api.Classes{"2"}, N: 2, Mode: "draft"}, 15*time.Second)
			if err != nil || g.Status != api.StatusSucceeded {
				t.Fatalf("%+v %v", g, err)
			}
			if _, err := ts.client.Image(t.Context(), g.Images[1].URL); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A password never reaches a message, however it is written: with %, #, /, @ or ? in it the
// URL may not parse, or parse into other parts. Each case is given by flag and by variable,
// and the message of the failed start (Check, then OpenStore) is searched for it.
func TestStorePasswordsNeverPrinted(t *testing.T) {
	passwords := []string{"s3cr%zzt", "pa#ss99", "pa/ss99", "p@ss99", "pa?ss99", "pa:ss99", "p%40ss99", "hunter2"}
	type form struct{ flag, env, url string }
	var forms []form
	for _, pw := range passwords {
		forms = append(forms,
			form{"--store", "MARSPEC_STORE", "postgres://alice:" + pw + "@127.0.0.1:1/db?sslmode=disable"},
			form{"--store", "MARSPEC_STORE", "postgres://alice@127.0.0.1:1/db?sslmode=disable&password=" + pw},
			form{"--store", "MARSPEC_STORE", "mysql://alice:" + pw + "@127.0.0.1:1/db"},
			form{"--blobs", "MARSPEC_BLOBS", "s3://KEY:" + pw + "@bucket?endpoint=http://127.0.0.1:1"},
			form{"--blobs", "MARSPEC_BLOBS", "gs://KEY:" + pw + "@bucket"})
	}
	for _, f := range forms {
		secret := secretOf(t, f.url, passwords)
		for _, by := range []string{"flag", "variable"} {
			var cfg Config
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			vars := map[string]string{}
			args := []string{"--data-dir", t.TempDir()}
			if by == "flag" {
				args = append(args, f.flag, f.url)
			} else {
				vars[f.env] = f.url
			}
			if err := cfg.bind(fs, env(vars)); err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			err := cfg.Check()
			if err == nil {
				var st *store.Store
				if st, err = OpenStore(cfg); err == nil {
					st.Close()
				}
			}
			if err == nil {
				t.Fatalf("%s by %s opened", f.url, by)
			}
			if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), f.flag) {
				t.Errorf("%s by %s: the message shows the secret %q or omits the flag: %v", f.url, by, secret, err)
			}
		}
		if got := redact(f.url); strings.Contains(got, secret) {
			t.Errorf("redact(%q) = %q", f.url, got)
		}
	}
}

// secretOf is the one password of the list that u holds.
func secretOf(t *testing.T, u string, passwords []string) string {
	t.Helper()
	for _, pw := range passwords {
		if strings.Contains(u, ":"+pw+"@") || strings.HasSuffix(u, "="+pw) {
			return pw
		}
	}
	t.Fatalf("no password in %s", u)
	return ""
}
