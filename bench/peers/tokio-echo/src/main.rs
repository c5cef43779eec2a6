//! Tokio TCP echo server peer for the gluon network benchmark.
//!
//!     tokio-echo --port N      (N = 0 picks a free port)
//!
//! Idiomatic Tokio on one core: a `current_thread` runtime (the benchmark
//! pins the server to one CPU, so the work-stealing multi-thread scheduler
//! would only add cross-thread wakeups), one spawned task per connection,
//! each doing a `read` / `write_all` loop on its own 64 KiB buffer.
//! Listens on 127.0.0.1, sets TCP_NODELAY on accepted sockets, prints
//! "listening <port>" on stdout once ready and exits with status 0 on
//! SIGTERM / SIGINT.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

const BUF_SIZE: usize = 64 * 1024;

/// Echoes everything read from `stream` back to it until EOF or an error.
/// `write_all` retries short writes, so no byte is lost.
async fn serve(mut stream: TcpStream) {
    let mut buf = vec![0u8; BUF_SIZE].into_boxed_slice();
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn parse_port() -> Option<u16> {
    let mut args = std::env::args().skip(1);
    let mut port = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--port", Some(v)) => port = Some(v.parse().ok()?),
            _ => return None,
        }
    }
    port
}

// `flavor = "current_thread"`: a single-threaded runtime that runs every task
// on the main thread.  Only the I/O driver is compiled in (features rt, net,
// io-util, signal, macros; no timer), and signals are delivered through it.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(port) = parse_port() else {
        let prog = std::env::args().next().unwrap_or_else(|| "tokio-echo".into());
        eprintln!("usage: {prog} --port N   (0 = pick a free port)");
        return ExitCode::from(2);
    };

    let mut sigterm = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut sigint = signal(SignalKind::interrupt()).expect("SIGINT handler");

    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tokio-echo: listen: {e}");
            return ExitCode::from(1);
        }
    };
    let local = listener.local_addr().expect("local_addr");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening {}", local.port());
    let _ = out.flush();
    drop(out);

    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve(stream));
                }
                // Transient (e.g. ECONNABORTED, EMFILE): keep serving.
                Err(e) => eprintln!("tokio-echo: accept: {e}"),
            },
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
    }
    // Returning drops the runtime, which drops (and closes) every connection.
    ExitCode::SUCCESS
}
