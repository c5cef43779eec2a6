"""IPC (B6) for bench/run: ping-pong on one session at 64 B .. 4 MiB, and 16 concurrent streams
of 4 KiB messages, for gluon over shared memory (gluon <-> gluon, shmipc's protocol), gluon over
a Unix socket, shmipc-go (Go client and server, the module's own API) and Go over a Unix socket.
The ping-pong rows also show the floor (bench/peers/ipc-c, not a peer): the same echo in plain C,
over shared memory with both sides spinning (`limit`) and over a Unix socket (`limit-uds`).

Server on CPU 0, client on CPU 1; the implementations alternate within each run. Metrics: round
trips per second, round trips per CPU-second of both processes (client and server), p50 and p99
latency. Every reply is checked (length and bytes) by the client, which exits non-zero otherwise.
"""
import os
import subprocess
import sys
import tempfile
import time

from procs import cpu_s as _cpu_s, stop as _stop  # bench/procs.py

WORKLOADS = [  # name, payload bytes, streams
    ("pingpong-64B", 64, 1),
    ("pingpong-4KiB", 4096, 1),
    ("pingpong-64KiB", 65536, 1),
    ("pingpong-1MiB", 1 << 20, 1),
    ("pingpong-4MiB", 4 << 20, 1),
    ("streams16-4KiB", 4096, 16),
]


def _client_cpu(cmd):
    """Runs cmd (already pinned) and returns (stdout, exit code, CPU seconds)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return out, p.returncode, ru.ru_utime + ru.ru_stime


def run(args, res, build, log, build_peer):
    gluon = os.path.join(build, "bench", "ipc_bench")
    peer = build_peer("shmipc-go")
    floor = build_peer("ipc-c")
    with tempfile.TemporaryDirectory(prefix="gluon-ipc-bench-") as tmp:
        return _run(args, res, log, gluon, peer, floor, os.path.join(tmp, "ipc.sock"))


def _run(args, res, log, gluon, peer, floor, sock):
    impls = {
        "gluon-shm": ([gluon, "server", "--addr", sock], [gluon, "client", "--addr", sock]),
        "gluon-uds": ([gluon, "server", "--uds", "--addr", sock], [gluon, "client", "--uds", "--addr", sock]),
    }
    if peer:
        impls["shmipc-go"] = ([peer, "server", "-addr", sock],
                              [peer, "client", "-addr", sock, "-memfd=true", "-buffer", str(64 << 20)])
        impls["go-uds"] = ([peer, "server", "-uds", "-addr", sock], [peer, "client", "-uds", "-addr", sock])
    else:
        log("[ipc] shmipc-go and go-uds: not run (no Go toolchain)")
    if floor:  # the floor of the ping-pong rows, not a peer: no runtime, no protocol
        impls["limit"] = ([floor, "server", "--addr", sock], [floor, "client", "--addr", sock])
        impls["limit-uds"] = ([floor, "server", "--uds", "--addr", sock], [floor, "client", "--uds", "--addr", sock])
    quick = args.quick
    dur = 0.5 if quick else 2.0
    runs = args.runs or (1 if quick else 5)
    for i in range(runs):
        for wname, size, streams in WORKLOADS:
            if args.only and args.only not in wname:
                continue
            for name, (scmd, ccmd) in impls.items():
                if name.startswith("limit") and streams > 1:
                    continue
                log(f"[ipc] run {i + 1}/{runs}: {wname} on {name}")
                go = name in ("shmipc-go", "go-uds")
                extra = (["-size", str(size), "-streams", str(streams), "-count", "0", "-duration", f"{dur}s"]
                         if go else ["--size", str(size), "--streams", str(streams), "--duration", str(dur)])
                srv = subprocess.Popen(["taskset", "-c", "0"] + scmd, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
                try:
                    line = srv.stdout.readline()
                    if not line.startswith("listening"):
                        sys.exit(f"bench/run: ipc server {name} did not start: {line!r}")
                    s0 = _cpu_s(srv.pid)
                    out, code, ccpu = _client_cpu(["taskset", "-c", "1"] + ccmd + extra)
                    s1 = _cpu_s(srv.pid)
                finally:
                    _stop(srv)
                last = out.strip().splitlines()[-1] if out.strip() else ""
                if code != 0 or not last.startswith("ok "):
                    sys.exit(f"bench/run: ipc client {name} failed on {wname} (exit {code}): {last}")
                v = {k: int(x) for k, x in (kv.split("=") for kv in last.split()[1:])}
                secs = v["ns"] / 1e9
                cpu = ccpu + (s1 - s0)
                res.add(wname, name, "ops_per_s", v["rtts"] / secs, "higher")
                if cpu > 0:
                    res.add(wname, name, "ops_per_cpu_s", v["rtts"] / cpu, "higher")
                res.add(wname, name, "p50_us", v["p50"] / 1e3, "lower")
                res.add(wname, name, "p99_us", v["p99"] / 1e3, "lower")
                time.sleep(0.1)
    names = list(impls.keys())
    return "\n".join(["round trips per second:", res.table("ops_per_s", names), "",
                      "round trips per CPU-second (client + server):", res.table("ops_per_cpu_s", names), "",
                      "p50 latency (us):", res.table("p50_us", names), "",
                      "p99 latency (us):", res.table("p99_us", names)])
