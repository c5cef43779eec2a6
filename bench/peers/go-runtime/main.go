// Go goroutine peer for the gluon runtime micro-benchmarks.
//
// Measures, with the Go scheduler (GOMAXPROCS=1 unless noted):
//
//	switch          ns per runtime.Gosched() between two ping-ponging goroutines
//	create_join     ns to start an empty goroutine and wait for it (WaitGroup)
//	chan_local      ns per message, ping-pong over two unbuffered chan int
//	chan_cross      same with GOMAXPROCS=2 (the scheduler decides placement: it keeps
//	                both goroutines on one thread most of the time)
//	chan_cross@threads  same with each goroutine locked to its own OS thread
//	                (runtime.LockOSThread), so every message really crosses threads
//	mutex_contended ns per Lock/Unlock, 4 goroutines, Gosched inside every
//	                16th critical section so the sync.Mutex is really contended
//
// Output: one "<workload> <ns_per_op>" line per workload on stdout.
// --quick runs roughly a fifth of the default iteration counts.
package main

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
)

// bench runs fn(n/10) as a warm-up, then times fn(n); fn returns the op count.
func bench(name string, procs, n int, fn func(n int) int) {
	runtime.GOMAXPROCS(procs)
	fn(n / 10)
	start := time.Now() // monotonic clock reading
	ops := fn(n)
	el := time.Since(start)
	fmt.Printf("%s %.1f\n", name, float64(el.Nanoseconds())/float64(ops))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go-runtime: "+format+"\n", args...)
	os.Exit(1)
}

func switchBench(n int) int {
	var wg sync.WaitGroup
	var yields [2]int
	for t := 0; t < 2; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			for i := 0; i < n; i++ {
				runtime.Gosched()
				yields[t]++
			}
		}(t)
	}
	wg.Wait()
	if yields[0]+yields[1] != 2*n {
		fail("switch: %d yields, want %d", yields[0]+yields[1], 2*n)
	}
	return 2 * n
}

func createJoin(n int) int {
	var wg sync.WaitGroup
	ran := 0
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { ran++; wg.Done() }()
		wg.Wait()
	}
	if ran != n {
		fail("create_join: %d ran, want %d", ran, n)
	}
	return n
}

func chanPingPong(n int) int { return pingPong(n, false) }

func chanPingPongThreads(n int) int { return pingPong(n, true) }

// pingPong sends n values to an echo goroutine and checks each reply; with locked, each side
// is locked to its own OS thread.
func pingPong(n int, locked bool) int {
	if locked {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	ping, pong := make(chan int), make(chan int)
	go func() {
		if locked {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		for v := range ping {
			pong <- v + 1
		}
		close(pong)
	}()
	for i := 0; i < n; i++ {
		ping <- i
		if v := <-pong; v != i+1 {
			fail("chan: got %d, want %d", v, i+1)
		}
	}
	close(ping)
	<-pong // wait for the echo goroutine to finish
	return 2 * n
}

func mutexContended(n int) int {
	const tasks = 4
	var mu sync.Mutex
	var wg sync.WaitGroup
	counter := 0
	for t := 0; t < tasks; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				mu.Lock()
				counter++
				if i%16 == 0 {
					runtime.Gosched()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if counter != tasks*n {
		fail("mutex_contended: counter %d, want %d", counter, tasks*n)
	}
	return tasks * n
}

func main() {
	scale := 5
	for _, a := range os.Args[1:] {
		if a == "--quick" {
			scale = 1
		} else {
			fail("unknown argument %q (only --quick)", a)
		}
	}
	bench("switch", 1, scale*700_000, switchBench)
	bench("create_join", 1, scale*300_000, createJoin)
	bench("chan_local", 1, scale*400_000, chanPingPong)
	bench("chan_cross", 2, scale*300_000, chanPingPong)
	bench("chan_cross@threads", 2, scale*20_000, chanPingPongThreads)
	bench("mutex_contended", 1, scale*700_000, mutexContended)
}
