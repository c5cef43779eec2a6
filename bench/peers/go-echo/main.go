// Go TCP echo server peer for the gluon network benchmark.
//
//	go-echo --port N      (N = 0 picks a free port)
//
// Idiomatic Go: the net package's netpoller (epoll underneath) with one
// goroutine per connection doing a plain blocking-style Read/Write loop on a
// 64 KiB buffer.  Listens on 127.0.0.1, sets TCP_NODELAY on accepted
// sockets, prints "listening <port>" on stdout once ready and exits with
// status 0 on SIGTERM / SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

const bufSize = 64 * 1024

// serve echoes everything read from c back to it until EOF or an error.
// net.Conn.Write only returns early on an error (the runtime retries short
// writes internally), so no byte is lost.  A plain loop rather than
// io.CopyBuffer(c, c, buf): on Linux that becomes splice(2) socket -> pipe
// -> socket, which measured slower here (512-byte messages, messages per
// server CPU second: streaming/4 conns ~3.8M vs ~5.5M for this loop,
// ping-pong/1000 conns ~127k vs ~140k).
func serve(c *net.TCPConn) {
	defer c.Close()
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func main() {
	// The benchmark pins the server to one CPU, so a single P is all it can
	// use; more Ps would only add scheduler handoffs and idle spinning.  Go
	// derives the default from the CPU affinity mask anyway, but say it
	// explicitly so the configuration does not depend on how it is started.
	runtime.GOMAXPROCS(1)

	port := flag.Int("port", -1, "TCP port to listen on (0 = pick a free port)")
	flag.Parse()
	if *port < 0 || *port > 65535 || flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "usage: %s --port N   (0 = pick a free port)\n", os.Args[0])
		os.Exit(2)
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		os.Exit(0)
	}()

	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: *port})
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-echo: listen: %v\n", err)
		os.Exit(1)
	}
	// os.Stdout is unbuffered, so this line is flushed when Printf returns.
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)

	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			// Transient (e.g. EMFILE): back off briefly, keep serving.
			fmt.Fprintf(os.Stderr, "go-echo: accept: %v\n", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c.SetNoDelay(true) // Go's default for TCP, made explicit
		go serve(c)
	}
}
