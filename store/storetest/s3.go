package storetest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// versitygw finds the versitygw binary on PATH or in GOPATH/bin (where `go install` puts it).
func versitygw() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		home, _ := os.UserHomeDir()
		gopath = filepath.Join(home, "go")
	}
	p := filepath.Join(gopath, "bin", "versitygw")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("versitygw is not on PATH nor in " + filepath.Dir(p) +
			" (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
	}
	return p, nil
}

// S3Server is a versitygw serving a temporary folder on a loopback port.
type S3Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Access   string
	Secret   string
	bin, dir string
	log      *os.File
	cmd      *exec.Cmd
}

// URL is the --blobs URL of bucket on this server, with the credentials in it.
func (s *S3Server) URL(bucket string) string {
	return fmt.Sprintf("s3://%s:%s@%s?endpoint=%s&region=us-east-1", s.Access, s.Secret, bucket, s.Endpoint)
}

// Stop kills the server (a test of an object store that goes away).
func (s *S3Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Start (re)starts the server on its port and folder and waits until it listens.
func (s *S3Server) Start(t testing.TB) {
	t.Helper()
	addr := s.Endpoint[len("http://"):]
	s.cmd = exec.Command(s.bin, "--access", s.Access, "--secret", s.Secret, "--port", addr, "posix", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", s.bin, err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(s.log.Name())
			t.Fatalf("versitygw did not listen on %s within 15 s: %s", addr, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// S3 starts a versitygw for the test, stopped when it ends. Without the binary the test is
// skipped, or fails under MARSPEC_REQUIRE_S3=1.
func S3(t testing.TB) *S3Server {
	t.Helper()
	bin, err := versitygw()
	if err != nil {
		unavailable(t, "MARSPEC_REQUIRE_S3", "no S3 server to test against", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out, err := os.CreateTemp(t.TempDir(), "versitygw-*.log")
	if err != nil {
		t.Fatal(err)
	}
	s := &S3Server{Endpoint: "http://" + addr, Access: "marspectest", Secret: "marspectestsecret", bin: bin, dir: t.TempDir(), log: out}
	t.Cleanup(s.Stop)
	s.Start(t)
	return s
}
