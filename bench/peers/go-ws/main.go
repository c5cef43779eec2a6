// Go WebSocket echo server peer for the gluon WebSocket benchmark.
//
//	go-ws --port N      (N = 0 picks a free port)
//
// Idiomatic Go: net/http with gorilla/websocket's Upgrader, one goroutine per
// connection running the ReadMessage/WriteMessage loop of gorilla's own echo
// example. Any path upgrades. Listens on 127.0.0.1, prints "listening <port>"
// on stdout once ready and exits with status 0 on SIGTERM / SIGINT.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		mt, msg, err := c.ReadMessage()
		if err != nil {
			return
		}
		if err := c.WriteMessage(mt, msg); err != nil {
			return
		}
	}
}

func main() {
	// The benchmark pins the server to one CPU: one P, as for the other Go peers.
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
		fmt.Fprintf(os.Stderr, "go-ws: listen: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	if err := http.Serve(ln, http.HandlerFunc(echo)); err != nil {
		fmt.Fprintf(os.Stderr, "go-ws: %v\n", err)
		os.Exit(1)
	}
}
