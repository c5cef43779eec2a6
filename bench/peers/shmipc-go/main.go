// shmipc-peer: the shmipc-go side of gluon's IPC interop tests and benchmark (B6), written
// against the shmipc-go module's own API, and the same workloads over a plain Unix socket.
//
// Every message is framed as a little-endian u32 length and a payload; servers echo each one
// back on the same stream, clients check every reply (length and bytes).
//
//	shmipc-peer server -addr PATH [-uds] [-hot-restart-after D -epoch N] [-hang-after N]
//	shmipc-peer client -addr PATH [-uds] [-memfd] [-size N] [-count N] [-streams N] [-duration D]
//	                   [-reserve] [-buffer BYTES] [-prefix P] [-sessions N]
//
// The client prints one line: "ok rtts=N ns=TOTAL p50=NS p99=NS" (or "error: ..." and exit 1).
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	shmipc "github.com/cloudwego/shmipc-go"
)

func fail(format string, a ...any) {
	fmt.Printf("error: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: shmipc-peer server|client ...")
	}
	shmipc.SetLogLevel(4)
	switch os.Args[1] {
	case "server":
		server(os.Args[2:])
	case "client":
		client(os.Args[2:])
	default:
		fail("unknown mode %q", os.Args[1])
	}
}

// ---- server ----

type echo struct{ hangAfter int64 }

func (e *echo) OnNewStream(s *shmipc.Stream) { go e.serve(s) }
func (e *echo) OnShutdown(reason string)      {}

var served atomic.Int64

func (e *echo) serve(s *shmipc.Stream) {
	defer s.Close()
	r, w := s.BufferReader(), s.BufferWriter()
	for {
		hdr, err := r.ReadBytes(4)
		if err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(hdr))
		body, err := r.ReadBytes(n)
		if err != nil {
			return
		}
		if e.hangAfter > 0 && served.Add(1) > e.hangAfter {
			r.ReleasePreviousRead()
			select {} // never answers: the test kills this process here
		}
		var out [4]byte
		binary.LittleEndian.PutUint32(out[:], uint32(n))
		if _, err := w.WriteBytes(out[:]); err != nil {
			return
		}
		if _, err := w.WriteBytes(body); err != nil {
			return
		}
		r.ReleasePreviousRead()
		if err := s.Flush(false); err != nil {
			return
		}
	}
}

func server(args []string) {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	addr := fs.String("addr", "", "unix socket path")
	uds := fs.Bool("uds", false, "plain Unix socket echo instead of shmipc")
	hotAfter := fs.Duration("hot-restart-after", 0, "start a second listener and hand over after this long")
	epoch := fs.Uint64("epoch", 1, "hot restart epoch")
	hangAfter := fs.Int64("hang-after", 0, "stop answering after this many messages")
	fs.Parse(args)
	if *uds {
		udsServer(*addr)
		return
	}
	conf := shmipc.NewDefaultListenerConfig(*addr, "unix")
	ln, err := shmipc.NewListener(&echo{*hangAfter}, conf)
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Println("listening")
	if *hotAfter == 0 {
		ln.Run()
		return
	}
	go ln.Run()
	time.Sleep(*hotAfter)
	// The new server takes the path over (NewListener unlinks the socket file), then the old
	// one asks its clients to move.
	ln2, err := shmipc.NewListener(&echo{*hangAfter}, shmipc.NewDefaultListenerConfig(*addr, "unix"))
	if err != nil {
		fail("second listener: %v", err)
	}
	ln2.SetUnlinkOnClose(false)
	go ln2.Run()
	if err := ln.HotRestart(*epoch); err != nil {
		fail("hot restart: %v", err)
	}
	for !ln.IsHotRestartDone() {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("hot restart done")
	ln.SetUnlinkOnClose(false)
	ln.Close()
	select {}
}

func udsServer(addr string) {
	os.Remove(addr)
	ln, err := net.Listen("unix", addr)
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Println("listening")
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func(c net.Conn) {
			defer c.Close()
			var hdr [4]byte
			var buf []byte
			for {
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				n := int(binary.LittleEndian.Uint32(hdr[:]))
				if cap(buf) < 4+n {
					buf = make([]byte, 4+n)
				}
				buf = buf[:4+n]
				copy(buf, hdr[:])
				if _, err := io.ReadFull(c, buf[4:]); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}(c)
	}
}

// ---- client ----

type clientFlags struct {
	addr             string
	uds, memfd, resv bool
	size, count      int
	streams          int
	sessions         int
	duration         time.Duration
	buffer           uint
	prefix           string
}

func payload(n int, seed int) []byte {
	b := make([]byte, 4+n)
	binary.LittleEndian.PutUint32(b, uint32(n))
	for i := 0; i < n; i++ {
		b[4+i] = byte(i*31 + seed)
	}
	return b
}

func client(args []string) {
	var f clientFlags
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	fs.StringVar(&f.addr, "addr", "", "unix socket path")
	fs.BoolVar(&f.uds, "uds", false, "plain Unix socket instead of shmipc")
	fs.BoolVar(&f.memfd, "memfd", true, "memfd (protocol v3) instead of /dev/shm files (v2)")
	fs.BoolVar(&f.resv, "reserve", false, "write with Reserve (falls back above the largest slice)")
	fs.IntVar(&f.size, "size", 64, "payload bytes")
	fs.IntVar(&f.count, "count", 100, "round trips per stream (0: use -duration)")
	fs.IntVar(&f.streams, "streams", 1, "concurrent streams")
	fs.IntVar(&f.sessions, "sessions", 1, "sessions")
	fs.DurationVar(&f.duration, "duration", 0, "run for this long instead of -count")
	fs.UintVar(&f.buffer, "buffer", 32<<20, "shared memory bytes")
	fs.StringVar(&f.prefix, "prefix", "/dev/shm/shmipc-peer", "shared memory path prefix")
	fs.Parse(args)

	var do func(id int, msg []byte, reply []byte) error
	var finish func()
	if f.uds {
		conns := make([]net.Conn, f.streams)
		for i := range conns {
			c, err := net.Dial("unix", f.addr)
			if err != nil {
				fail("dial: %v", err)
			}
			conns[i] = c
		}
		do = func(id int, msg, reply []byte) error {
			c := conns[id]
			if _, err := c.Write(msg); err != nil {
				return err
			}
			_, err := io.ReadFull(c, reply)
			return err
		}
		finish = func() {
			for _, c := range conns {
				c.Close()
			}
		}
	} else {
		conf := shmipc.DefaultSessionManagerConfig()
		conf.Network, conf.Address = "unix", f.addr
		conf.SessionNum = f.sessions
		conf.ShareMemoryBufferCap = uint32(f.buffer)
		conf.ShareMemoryPathPrefix = f.prefix
		conf.InitializeTimeout = 10 * time.Second
		if f.memfd {
			conf.MemMapType = shmipc.MemMapTypeMemFd
		}
		sm, err := shmipc.NewSessionManager(conf)
		if err != nil {
			fail("session manager: %v", err)
		}
		do = func(id int, msg, reply []byte) error { return shmipcRoundTrip(sm, f.resv, msg, reply) }
		finish = func() { sm.Close() }
	}

	var mu sync.Mutex
	var lat []int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	deadline := start.Add(f.duration)
	for i := 0; i < f.streams; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			msg := payload(f.size, id)
			reply := make([]byte, len(msg))
			local := make([]int64, 0, 1024)
			for k := 0; f.duration > 0 || k < f.count; k++ {
				if f.duration > 0 && time.Now().After(deadline) {
					break
				}
				t0 := time.Now()
				if err := do(id, msg, reply); err != nil {
					firstErr.CompareAndSwap(nil, err)
					break
				}
				local = append(local, time.Since(t0).Nanoseconds())
				if string(reply) != string(msg) {
					firstErr.CompareAndSwap(nil, errors.New("reply differs from request"))
					break
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	total := time.Since(start)
	finish()
	if e := firstErr.Load(); e != nil {
		fail("%v", e)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(float64(len(lat)-1)*q)]
	}
	fmt.Printf("ok rtts=%d ns=%d p50=%d p99=%d\n", len(lat), total.Nanoseconds(), p(0.5), p(0.99))
}

// One request and its reply on a pooled stream, as shmipc-go's users write it.
func shmipcRoundTrip(sm *shmipc.SessionManager, reserve bool, msg, reply []byte) error {
	s, err := sm.GetStream()
	if err != nil {
		return err
	}
	w := s.BufferWriter()
	if reserve {
		b, err := w.Reserve(len(msg))
		if err != nil {
			s.Close()
			return err
		}
		copy(b, msg)
	} else if _, err := w.WriteBytes(msg); err != nil {
		s.Close()
		return err
	}
	if err := s.Flush(false); err != nil {
		s.Close()
		return err
	}
	r := s.BufferReader()
	got, err := r.ReadBytes(len(reply))
	if err != nil {
		s.Close()
		return err
	}
	copy(reply, got)
	s.ReleaseReadAndReuse()
	sm.PutBack(s)
	return nil
}
