//! Tokio peer for the gluon runtime micro-benchmarks.
//!
//! Every single-core row runs on a `current_thread` runtime built without the
//! I/O and timer drivers (none of the workloads needs them):
//!   switch          ns per `yield_now().await`, two tasks yielding to each other
//!   create_join     ns to `spawn` an empty task and await its JoinHandle
//!   chan_local      ns per message, ping-pong over two `mpsc::channel(1)`
//!   chan_cross      same, but the two tasks live on two `current_thread`
//!                   runtimes on two OS threads (a multi_thread runtime would
//!                   let the scheduler pull both tasks onto one worker via its
//!                   LIFO slot, so this is the way to pin one task per thread)
//!   mutex_contended ns per lock/unlock of a `tokio::sync::Mutex`, 4 tasks,
//!                   `yield_now().await` inside every 16th critical section
//!
//! Output: one "<workload> <ns_per_op>" line per workload on stdout.
//! `--quick` runs roughly a fifth of the default iteration counts.

use std::sync::Arc;
use std::time::Instant;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::{mpsc, Mutex};
use tokio::task::yield_now;

fn rt() -> Runtime {
    Builder::new_current_thread()
        .build()
        .expect("build runtime")
}

fn fail(msg: String) -> ! {
    eprintln!("tokio-runtime: {msg}");
    std::process::exit(1);
}

/// Runs `f(n / 10)` as a warm-up, then times `f(n)`; `f` returns the op count.
fn bench(name: &str, n: u64, f: impl Fn(u64) -> u64) {
    f(n / 10);
    let start = Instant::now(); // monotonic clock
    let ops = f(n);
    let ns = start.elapsed().as_nanos() as f64;
    println!("{name} {:.1}", ns / ops as f64);
}

fn switch(rt: &Runtime, n: u64) -> u64 {
    rt.block_on(async {
        let yielder = || {
            tokio::spawn(async move {
                let mut yields = 0;
                for _ in 0..n {
                    yield_now().await;
                    yields += 1;
                }
                yields
            })
        };
        let (a, b) = (yielder(), yielder());
        let total = a.await.unwrap() + b.await.unwrap();
        if total != 2 * n {
            fail(format!("switch: {total} yields, want {}", 2 * n));
        }
    });
    2 * n
}

fn create_join(rt: &Runtime, n: u64) -> u64 {
    rt.block_on(async {
        let mut ran = 0;
        for _ in 0..n {
            ran += tokio::spawn(async { 1 }).await.unwrap();
        }
        if ran != n {
            fail(format!("create_join: {ran} ran, want {n}"));
        }
    });
    n
}

type Pipe = (mpsc::Sender<u64>, mpsc::Receiver<u64>);

/// Sends 0..n and checks each echoed value; returns the message count.
async fn pinger((tx, mut rx): Pipe, n: u64) -> u64 {
    for i in 0..n {
        tx.send(i).await.unwrap();
        let v = rx.recv().await.unwrap();
        if v != i + 1 {
            fail(format!("chan: got {v}, want {}", i + 1));
        }
    }
    2 * n
}

/// Echoes every value back incremented until the ping side hangs up.
async fn echo((tx, mut rx): Pipe) {
    while let Some(v) = rx.recv().await {
        tx.send(v + 1).await.unwrap();
    }
}

/// Two rendezvous-like channels: (pinger's end, echo's end).
fn pipes() -> (Pipe, Pipe) {
    let (ping_tx, ping_rx) = mpsc::channel(1);
    let (pong_tx, pong_rx) = mpsc::channel(1);
    ((ping_tx, pong_rx), (pong_tx, ping_rx))
}

fn chan_local(rt: &Runtime, n: u64) -> u64 {
    let (p, e) = pipes();
    rt.block_on(async {
        let echo = tokio::spawn(echo(e));
        let ops = pinger(p, n).await;
        echo.await.unwrap();
        ops
    })
}

fn chan_cross(n: u64) -> u64 {
    let (p, e) = pipes();
    let echo = std::thread::spawn(move || rt().block_on(echo(e)));
    let ops = rt().block_on(pinger(p, n));
    echo.join().unwrap();
    ops
}

fn mutex_contended(rt: &Runtime, n: u64) -> u64 {
    const TASKS: u64 = 4;
    let counter = Arc::new(Mutex::new(0u64));
    rt.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let counter = counter.clone();
                tokio::spawn(async move {
                    for i in 0..n {
                        let mut c = counter.lock().await;
                        *c += 1;
                        if i % 16 == 0 {
                            yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let total = *counter.try_lock().unwrap();
    if total != TASKS * n {
        fail(format!(
            "mutex_contended: counter {total}, want {}",
            TASKS * n
        ));
    }
    TASKS * n
}

fn main() {
    let mut scale = 5;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => scale = 1,
            _ => fail(format!("unknown argument {a:?} (only --quick)")),
        }
    }
    let rt = rt();
    bench("switch", scale * 1_000_000, |n| switch(&rt, n));
    bench("create_join", scale * 400_000, |n| create_join(&rt, n));
    bench("chan_local", scale * 400_000, |n| chan_local(&rt, n));
    bench("chan_cross", scale * 3_000, chan_cross);
    bench("mutex_contended", scale * 200_000, |n| {
        mutex_contended(&rt, n)
    });
}
