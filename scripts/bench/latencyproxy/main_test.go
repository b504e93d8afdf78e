package main

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// An echo server behind the proxy gets every byte back in order, and a round trip takes at
// least the delay twice (once each way) and not many times more.
func TestForwardsInOrderWithTheDelay(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }() //nolint:errcheck
		}
	}()
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const delay = 20 * time.Millisecond
	go serve(proxy, echo.Addr().String(), delay)

	c, err := net.Dial("tcp", proxy.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB: several reads each way
	start := time.Now()
	go c.Write(msg) //nolint:errcheck
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !bytes.Equal(got, msg) {
		t.Fatal("the bytes came back changed or out of order")
	}
	if took < 2*delay || took > 2*time.Second {
		t.Fatalf("a round trip took %v; want at least %v (the delay each way) and well under 2 s", took, 2*delay)
	}
}
