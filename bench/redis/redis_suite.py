"""Redis for bench/run: GET and SET of 64-byte values over 50 connections, one command in flight
per connection, against one redis-server on CPU 0; the load generators on CPU 1.

Implementations: gluon's Redis client (bench/redis/redis_load.cc; io_uring, and epoll through
--engine), hiredis (bench/peers/hiredis-c: Debian's libhiredis, non-blocking contexts on one
epoll loop) and redis-benchmark (Redis's own load generator, -P 1). The floors, not peers:
`limit-liburing` (bench/redis/uring_floor.c: the same load on raw liburing, no runtime and no
client library) and `limit-liburing-multishot` (the same with one multishot receive per
connection on a provided-buffer ring). The metric is calls per
client CPU-second (the load generator's own CPU time over the measured window; redis-benchmark
over its whole run), with calls per second beside it. Every reply is checked by gluon's and the
hiredis generator (redis-benchmark checks nothing).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from procs import stop as _stop  # bench/procs.py

WORKLOADS = [("get-64B", "get"), ("set-64B", "set")]
CONNS = 50


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _start_redis(tmp, log):
    binary = shutil.which("redis-server")
    if not binary:
        return None, 0
    for _ in range(3):
        port = _free_port()
        p = subprocess.Popen(["taskset", "-c", "0", binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                              "--appendonly", "no", "--dir", tmp, "--logfile", os.path.join(tmp, "redis.log")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cli = shutil.which("redis-cli")
        for _ in range(200):
            r = subprocess.run([cli, "-p", str(port), "PING"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            if r.stdout.strip() == "PONG":
                return p, port
            if p.poll() is not None:
                break
            time.sleep(0.05)
        _stop(p)
    log("[redis] redis-server did not start")
    return None, 0


def run(args, res, build, log, build_peer):
    with tempfile.TemporaryDirectory(prefix="gluon-redis-bench-") as tmp:
        srv, port = _start_redis(tmp, log)
        if not srv:
            return "redis: not run (redis-server is not installed or did not start)"
        try:
            return _run(args, res, build, log, build_peer, port)
        finally:
            _stop(srv)


def _run(args, res, build, log, build_peer, port):
    gluon = os.path.join(build, "bench", "redis_load")
    floor = os.path.join(build, "bench", "redis_floor")
    impls = {"gluon": [gluon], "gluon-epoll": [gluon, "--engine", "epoll"],
             "limit-liburing": [floor], "limit-liburing-multishot": [floor, "--multishot"]}
    peer = build_peer("hiredis-c")
    if peer:
        impls["hiredis"] = [peer]
    else:
        log("[redis] hiredis: not run (libhiredis-dev missing)")
    bench = shutil.which("redis-benchmark")
    if bench:
        impls["redis-benchmark"] = None
    secs, warmup = (0.5, 0.2) if args.quick else (3.0, 1.0)
    runs = args.runs or (1 if args.quick else 5)
    for i in range(runs):
        for wname, op in WORKLOADS:
            if args.only and args.only not in wname:
                continue
            for name, cmd in impls.items():
                log(f"[redis] run {i + 1}/{runs}: {wname} on {name}")
                if cmd is None:
                    n = int(60000 if args.quick else 250000)
                    full = ["taskset", "-c", "1", bench, "-p", str(port), "-c", str(CONNS), "-n", str(n), "-d", "64",
                            "-t", op, "--csv"]
                    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                    out = p.stdout.read()
                    _, status, ru = os.wait4(p.pid, 0)
                    rows = [line.split(",") for line in out.strip().splitlines()[1:]]
                    if os.waitstatus_to_exitcode(status) != 0 or not rows:
                        sys.exit(f"bench/run: redis-benchmark failed on {wname}: {out!r}")
                    rps = float(rows[0][1].strip('"'))
                    cpu = ru.ru_utime + ru.ru_stime
                    res.add(wname, name, "calls_per_client_cpu_s", n / cpu, "higher")
                    res.add(wname, name, "calls_per_s", rps, "higher")
                    continue
                full = ["taskset", "-c", "1"] + cmd + ["--port", str(port), "--conns", str(CONNS), "--op", op,
                                                       "--size", "64", "--seconds", str(secs), "--warmup", str(warmup)]
                r = subprocess.run(full, stdout=subprocess.PIPE, text=True, timeout=120)
                last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
                if r.returncode != 0 or not last.startswith("{"):
                    sys.exit(f"bench/run: redis load {name} failed on {wname} (exit {r.returncode}): {last}")
                v = json.loads(last)
                res.add(wname, name, "calls_per_client_cpu_s", v["calls"] / v["cpu_s"], "higher")
                res.add(wname, name, "calls_per_s", v["calls_per_s"], "higher")
                time.sleep(0.1)
    names = list(impls.keys())
    return "\n".join(["calls per client CPU-second:", res.table("calls_per_client_cpu_s", names), "",
                      "calls per second:", res.table("calls_per_s", names)])
