//! B9 peer: the task rows on monoio's io_uring runtime (one thread). Prints
//! "workload monoio value ns_per_op". `--quick` runs a fifth of the work. Each workload checks
//! its result and exits 1 on a mismatch. monoio has no nop operation and no channel of its
//! own: those rows are not run, nor await_call (an awaited async fn is inlined into its
//! caller's state machine: there is no call to measure). `monoio-task echo --port N` serves
//! TCP echo instead (see echo()).
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

fn fail(msg: String) -> ! {
    eprintln!("monoio-task: {msg}");
    std::process::exit(1);
}

fn bench(name: &str, n: u64, f: impl Fn(u64) -> u64) {
    f(n / 10);
    let t0 = Instant::now();
    let ops = f(n);
    let ns = t0.elapsed().as_nanos() as f64;
    println!("{name} monoio {:.2} ns_per_op", ns / ops as f64);
}

/// Gives the other ready tasks a turn (wakes itself and returns Pending once).
struct YieldNow(bool);
impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

fn runtime() -> monoio::Runtime<monoio::IoUringDriver> {
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .build()
        .unwrap_or_else(|e| fail(format!("runtime: {e}")))
}

fn yield_pingpong(n: u64) -> u64 {
    runtime().block_on(async move {
        let player = move || {
            monoio::spawn(async move {
                for _ in 0..n {
                    YieldNow(false).await;
                }
                n
            })
        };
        let (a, b) = (player(), player());
        let total = a.await + b.await;
        if total != 2 * n {
            fail(format!("yield: {total} turns, want {}", 2 * n));
        }
        2 * n
    })
}

async fn empty(i: u64) -> u64 {
    i
}

fn spawn_join(n: u64) -> u64 {
    runtime().block_on(async move {
        let mut sum = 0;
        for i in 0..n {
            sum += monoio::spawn(empty(i)).await;
        }
        if sum != n * (n - 1) / 2 {
            fail("spawn_join: sum mismatch".into());
        }
        n
    })
}

/// `monoio-task echo --port N`: B3's echo server on the same runtime (a task per connection,
/// owned buffers), for the task suite's echo and idle-connection rows. Prints "listening PORT".
fn echo(port: u16) {
    use monoio::buf::IoBuf;
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    runtime().block_on(async move {
        let listener = monoio::net::TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| fail(format!("bind: {e}")));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        println!("listening {port}");
        use std::io::Write;
        let _ = std::io::stdout().flush();
        loop {
            let (mut stream, _) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => fail(format!("accept: {e}")),
            };
            let _ = stream.set_nodelay(true);
            monoio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let (res, b) = stream.read(buf).await;
                    buf = b;
                    let n = match res {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    let (res, b) = stream.write_all(buf.slice(0..n)).await;
                    buf = b.into_inner();
                    if res.is_err() {
                        return;
                    }
                }
            });
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("echo") {
        let port = match args.get(1..) {
            Some([flag, p]) if flag == "--port" => p.parse().unwrap_or_else(|_| fail(format!("bad port {p:?}"))),
            _ => fail("usage: monoio-task echo --port N".into()),
        };
        return echo(port);
    }
    let mut scale = 5;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--quick" => scale = 1,
            _ => fail(format!("unknown argument {a:?} (only --quick)")),
        }
    }
    bench("yield", 4_000_000 * scale, yield_pingpong);
    bench("spawn_join", 1_000_000 * scale, spawn_join);
}
