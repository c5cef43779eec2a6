//! Tokio WebSocket echo server peer for the gluon WebSocket benchmark.
//!
//!     tokio-ws --port N      (N = 0 picks a free port)
//!
//! Idiomatic tokio-tungstenite on one core: a `current_thread` runtime (the
//! benchmark pins the server to one CPU), one task per connection that accepts
//! the upgrade and forwards its text and binary messages back to it, as
//! tokio-tungstenite's own echo-server example does (`forward` writes the
//! messages already received together and flushes when the reader would wait;
//! pings are answered by tungstenite). Listens on 127.0.0.1, sets TCP_NODELAY,
//! prints "listening <port>" once ready, exits 0 on SIGTERM / SIGINT.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;

use futures_util::{future, StreamExt, TryStreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};

async fn serve(stream: TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
    let (write, read) = ws.split();
    let _ = read
        .try_filter(|msg| future::ready(msg.is_text() || msg.is_binary()))
        .forward(write)
        .await;
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(port) = parse_port() else {
        eprintln!("usage: tokio-ws --port N   (0 = pick a free port)");
        return ExitCode::from(2);
    };
    let mut sigterm = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut sigint = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let listener = match TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tokio-ws: listen: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening {}", listener.local_addr().expect("local_addr").port());
    let _ = out.flush();
    drop(out);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve(stream));
                }
                Err(e) => eprintln!("tokio-ws: accept: {e}"),
            },
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
        }
    }
    ExitCode::SUCCESS
}
