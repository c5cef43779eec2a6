"""WebSocket echo for bench/run http: gluon's examples/websocket_echo against Go
(gorilla/websocket) and Tokio (tokio-tungstenite) echo servers (bench/peers/go-ws, tokio-ws),
and the floor `limit`: bench/peers/ws-c, a runtime-free epoll C echo with no checks at all.

Server pinned to CPU 0, the load generator (bench/http/ws_load.cc, a gluon client, the same for
every server) on CPU 1: 100 connections, 512-byte binary messages, each connection either one
message in flight (ping-pong) or 16 (pipelined). The metric is messages per server CPU-second
(utime+stime of the server over the measured window), with messages/s. Every echo is checked
byte for byte, or the suite fails. Peers that cannot be built (no Go or cargo) are not run.
"""
import json
import os
import subprocess
import sys

import connrate  # bench/net/connrate.py: stopping servers
import http_suite

CONNS = 100
SIZE = 512
WORKLOADS = {"ws-echo-512": 1, "ws-echo-512-pipelined-16": 16}  # name -> messages in flight


def _load(build, port, pid, depth, dur):
    cmd = ["taskset", "-c", "1", os.path.join(build, "bench", "ws_load"), "--url",
           f"ws://127.0.0.1:{port}/echo", "--conns", str(CONNS), "--size", str(SIZE), "--depth", str(depth),
           "--duration", str(dur), "--warmup", "0.5" if dur < 2 else "1", "--cpu-pid", str(pid), "--json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=dur + 60)
    if r.returncode != 0:
        sys.exit(f"bench/run: ws_load failed (verification or connection error): {r.stderr.strip()}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(args, res, build, log, build_peer):
    quick = args.quick
    dur = 1 if quick else 5
    runs = args.runs or (1 if quick else 5)
    echo = os.path.join(build, "examples", "websocket_echo")
    impls = {"gluon": ([echo], {"GLUON_ENGINE": "io_uring"}),
             "gluon-epoll": ([echo], {"GLUON_ENGINE": "epoll"})}
    for peer in ("go-ws", "tokio-ws"):
        binary = build_peer(peer)
        if binary:
            impls[peer] = ([binary], {})
    floor = build_peer("ws-c")
    if floor:
        impls["limit"] = ([floor], {})  # not a peer in the ratio column
    workloads = dict(WORKLOADS)
    if quick:
        workloads = {"ws-echo-512": 1}
    if getattr(args, "only", None):
        workloads = {k: v for k, v in workloads.items() if args.only in k}
    for i in range(runs):
        for wname, depth in workloads.items():
            for name, (cmd, env) in impls.items():
                log(f"[http] run {i + 1}/{runs}: {wname} on {name}")
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    proc, port = http_suite._start(cmd + ["--port", "0"])
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
                try:
                    r = _load(build, port, proc.pid, depth, dur)
                finally:
                    connrate._stop(proc)
                res.add(wname, name, "msg_per_cpu_s", r["msg_per_server_cpu_s"], "higher")
                res.add(wname, name, "msg_per_s", r["msg_per_s"], "higher")
    names = list(impls)
    return "\n".join([f"WebSocket echo, {SIZE} B messages, {CONNS} connections: messages per server CPU-second "
                      "(ratio: gluon / the best peer; limit: the plain-C floor):", res.table("msg_per_cpu_s", names), "",
                      "messages per second:", res.table("msg_per_s", names)])
