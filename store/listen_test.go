package store

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"marspec/store/storetest"
)

// blackhole is a TCP proxy that, while dropping is set, swallows everything both ways
// without closing anything: a connection cut without a word (a dropped route).
type blackhole struct {
	addr     string
	dropping atomic.Bool
}

func newBlackhole(t *testing.T, target string) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	b := &blackhole{addr: ln.Addr().String()}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				dst.Close()
				return
			}
			if !b.dropping.Load() {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return b
}

// A listening connection that goes silent is found by its idle ping and replaced: the
// replica hears notifications again once the route is back.
func TestListenReplacesASilentConnection(t *testing.T) {
	oldIdle, oldPing := listenIdle, listenPing
	listenIdle, listenPing = 200*time.Millisecond, 300*time.Millisecond
	defer func() { listenIdle, listenPing = oldIdle, oldPing }()
	dsn := storetest.Postgres(t)
	direct, err := OpenPostgres(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	bh := newBlackhole(t, "127.0.0.1:5432")
	if !strings.Contains(dsn, "@127.0.0.1:5432/") {
		t.Skipf("the test proxies 127.0.0.1:5432; the database is at %s", dsn)
	}
	viaProxy, err := OpenPostgres(strings.Replace(dsn, "127.0.0.1:5432", bh.addr, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	states, got := make(chan error, 16), make(chan string, 16)
	go viaProxy.Listen(ctx, func(m string) { got <- m }, func(err error) { states <- err })
	if err := <-states; err != nil {
		t.Fatal(err)
	}
	bh.dropping.Store(true)
	select {
	case err := <-states:
		if err == nil {
			t.Fatal("connected while the route was down")
		}
		t.Logf("silent connection found: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a silent listening connection went unnoticed for 5 s")
	}
	bh.dropping.Store(false)
	deadline := time.After(10 * time.Second)
	for up := false; !up; {
		select {
		case err := <-states:
			up = err == nil
		case <-deadline:
			t.Fatal("not listening again 10 s after the route came back")
		}
	}
	if err := direct.Notify("after"); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "after" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification after reconnecting")
	}
}
