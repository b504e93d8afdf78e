// Command latencyproxy forwards TCP connections to a server and holds every byte for a fixed
// delay in each direction: a store on another machine (PostgreSQL, S3) for measurements on
// one. Bytes keep their order and a connection's throughput is not limited; only when they
// arrive changes. scripts/ops/cluster.sh starts two with CLUSTER_STORE_DELAY.
//
//	latencyproxy -listen 127.0.0.1:55433 -to 127.0.0.1:55432 -delay 1ms
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"time"
)

func main() {
	listen := flag.String("listen", "", "address to accept connections on (host:port)")
	to := flag.String("to", "", "address of the server the connections go to (host:port)")
	delay := flag.Duration("delay", time.Millisecond, "time each byte is held, in each direction (0 to 1s)")
	flag.Parse()
	if *listen == "" || *to == "" || *delay < 0 || *delay > time.Second {
		fmt.Fprintln(os.Stderr, "latencyproxy: -listen and -to are required, and -delay is 0 to 1s")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("latencyproxy: %v", err)
	}
	log.Printf("latencyproxy: %s -> %s, %v each way", ln.Addr(), *to, *delay)
	serve(ln, *to, *delay)
}

// serve accepts connections until ln closes, each forwarded to its own connection to to.
func serve(ln net.Listener, to string, delay time.Duration) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			s, err := net.Dial("tcp", to)
			if err != nil {
				log.Printf("latencyproxy: %v", err)
				c.Close()
				return
			}
			go forward(s, c, delay)
			forward(c, s, delay)
		}()
	}
}

// chunk is bytes read and when they may be written.
type chunk struct {
	data []byte
	due  time.Time
}

// forward copies src to dst, each read held until delay after it was read; at src's end (or
// dst's failure) it closes both, which ends the other direction too.
func forward(dst, src net.Conn, delay time.Duration) {
	held := make(chan chunk, 1024)
	go func() {
		defer close(held)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				held <- chunk{data: buf[:n], due: time.Now().Add(delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range held {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	for range held { // let the reader end
	}
}
