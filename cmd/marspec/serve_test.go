package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"marspec/server"
)

// Bad settings stop serve before any model is opened, naming the flag or variable.
func TestServeRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--queue", "0"}, "", "--queue"},
		{[]string{"--max-batch", "x"}, "", "max-batch"},
		{[]string{"stray"}, "", "stray"},
		{[]string{"--device", "tpu", "--data-dir", "unused"}, "", "tpu"},
		{nil, "soon", "MARSPEC_DRAIN"},
	} {
		t.Setenv("MARSPEC_DRAIN", "1s")
		if c.env != "" {
			t.Setenv("MARSPEC_DRAIN", c.env)
		}
		err := runServe(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v (MARSPEC_DRAIN=%s): %v, want an error naming %s", c.args, c.env, err, c.want)
		}
	}
}

// A bad or taken --addr stops serve before the data folder or its database is made.
func TestServeChecksTheAddressBeforeTheDataFolder(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for addr, want := range map[string]string{
		":99999":              `--addr ":99999": port "99999" out of range`,
		"localhost":           `--addr "localhost": missing port`,
		taken.Addr().String(): "address already in use",
	} {
		data := filepath.Join(t.TempDir(), "data")
		err := runServe([]string{"--addr", addr, "--data-dir", data})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--addr %s: %v, want an error saying %q", addr, err, want)
		}
		if _, err := os.Stat(data); !os.IsNotExist(err) {
			t.Errorf("--addr %s: the data folder was made before the address was refused", addr)
		}
	}
}

// serve opens each embedded pack with its own settings, preparing what their default requests
// call (nothing on the CPU): the draft pack, whose default preset it cannot run alone, opens
// too.
func TestServeOpensTheEmbeddedPacks(t *testing.T) {
	lib, err := filepath.Abs("../../third_party/onnxruntime/libonnxruntime.so")
	if err != nil {
		t.Fatal(err)
	}
	models := ortModels(server.Config{ORTLib: lib, Device: "cpu", Threads: 1, MaxBatch: 32})
	for _, pack := range []string{"target", "draft"} {
		if _, err := models.Model(pack, ""); err != nil {
			t.Errorf("%s: %v", pack, err)
		}
	}
}
