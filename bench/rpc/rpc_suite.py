"""RPC (B8) for bench/run: echo calls of 64 B and 4 KiB payloads, (a) one connection with 64
concurrent callers and (b) 100 connections with one caller each.

gRPC rows: gluon's gRPC server (io_uring, and epoll through GLUON_ENGINE), gRPC C++'s callback
server and grpc-go's server, all answering /gluon.bench.Bench/Echo with a
google.protobuf.BytesValue, all driven by the same load generator (grpc_bench client, gluon's
gRPC client), so the server is what is compared. Native rows: gluon's own RPC (rpc_bench), with
its own client, when that program is built.

Server on CPU 0, client on CPU 1; implementations alternate within each run. Metrics: calls per
server CPU-second, calls per second, p50 and p99 latency. Every reply is checked by the client,
which exits non-zero otherwise.
"""
import json
import os
import subprocess
import sys
import time

from procs import stop as _stop  # bench/procs.py

WORKLOADS = [  # name, payload bytes, connections, callers per connection
    ("echo-64B-1conn-64callers", 64, 1, 64),
    ("echo-4KiB-1conn-64callers", 4096, 1, 64),
    ("echo-64B-100conns", 64, 100, 1),
    ("echo-4KiB-100conns", 4096, 100, 1),
]
GRPC = ["gluon-grpc", "gluon-grpc-epoll", "grpc-c++", "grpc-go"]
NATIVE = ["gluon-rpc", "grpc-c++", "grpc-go"]


def run(args, res, build, log, build_peer):
    b = os.path.join(build, "bench")
    grpc_load = [os.path.join(b, "grpc_bench"), "client"]
    impls = {  # name -> (server command, environment additions, client command)
        "gluon-grpc": ([os.path.join(b, "grpc_bench"), "server"], {}, grpc_load),
        "gluon-grpc-epoll": ([os.path.join(b, "grpc_bench"), "server"], {"GLUON_ENGINE": "epoll"}, grpc_load),
        "grpc-c++": ([os.path.join(b, "grpc_cpp_server")], {}, grpc_load),
    }
    go = build_peer("grpc-go")
    if go:
        impls["grpc-go"] = ([go], {}, grpc_load)
    else:
        log("[rpc] grpc-go: not run (no Go toolchain or module)")
    native = os.path.join(b, "rpc_bench")
    if os.path.exists(native):
        impls["gluon-rpc"] = ([native, "server"], {}, [native, "client"])
    quick = args.quick
    secs, warmup = (0.5, 0.2) if quick else (3.0, 1.0)
    runs = args.runs or (1 if quick else 5)
    for i in range(runs):
        for wname, size, conns, callers in WORKLOADS:
            if args.only and args.only not in wname:
                continue
            if quick and conns > 1 and size > 64:
                continue
            for name, (scmd, env, ccmd) in impls.items():
                log(f"[rpc] run {i + 1}/{runs}: {wname} on {name}")
                srv = subprocess.Popen(["taskset", "-c", "0"] + scmd, stdout=subprocess.PIPE,
                                       env={**os.environ, **env}, text=True)
                try:
                    line = srv.stdout.readline().strip()
                    if not line.isdigit():
                        sys.exit(f"bench/run: rpc server {name} did not start: {line!r}")
                    cmd = ["taskset", "-c", "1"] + ccmd + [
                        "--port", line, "--conns", str(conns), "--callers", str(callers), "--payload", str(size),
                        "--seconds", str(secs), "--warmup", str(warmup), "--cpu-pid", str(srv.pid)]
                    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=120)
                finally:
                    _stop(srv)
                last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
                if out.returncode != 0 or not last.startswith("{"):
                    sys.exit(f"bench/run: rpc client against {name} failed on {wname} (exit {out.returncode}): {last}")
                v = json.loads(last)
                if v["errors"]:
                    sys.exit(f"bench/run: rpc {name} on {wname}: {v['errors']} failed calls")
                if v["calls_per_server_cpu_s"] > 0:
                    res.add(wname, name, "calls_per_server_cpu_s", v["calls_per_server_cpu_s"], "higher")
                res.add(wname, name, "calls_per_s", v["calls_per_s"], "higher")
                res.add(wname, name, "p50_us", v["p50_us"], "lower")
                res.add(wname, name, "p99_us", v["p99_us"], "lower")
                time.sleep(0.1)
    out = []
    for title, cols, head in (("gRPC", GRPC, "gluon-grpc"), ("native RPC", NATIVE, "gluon-rpc")):
        cols = [c for c in cols if c in impls]
        if head not in cols:
            continue
        out += [f"{title}: calls per server CPU-second:", res.table("calls_per_server_cpu_s", cols, head), "",
                f"{title}: calls per second:", res.table("calls_per_s", cols, head), "",
                f"{title}: p50 latency (us):", res.table("p50_us", cols, head), "",
                f"{title}: p99 latency (us):", res.table("p99_us", cols, head), ""]
    return "\n".join(out)
