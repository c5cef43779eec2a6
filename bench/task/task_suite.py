"""bench/run task (B9): C++20 tasks against gluon's fibers, the raw liburing floor and peers.

Every program prints "workload impl value metric" lines; they run alternately (A B C A B C ...),
each verifying its own work (a mismatch exits non-zero and fails the suite)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "net"))
import idle  # noqa: E402  (bench/net/idle.py)
from procs import start_listening, stop  # noqa: E402  (bench/procs.py, on bench/run's path)


# tokio-runtime (bench/peers, B1) measures the same workloads under its own names, one figure
# per line ("workload value"): its switch is a yield through the scheduler, as Tokio has no
# direct transfer.
TOKIO_ROWS = {"switch": "yield", "create_join": "spawn_join", "chan_local": "chan_pingpong",
              "chan_cross": "cross_vcpu"}


def _add_peer(out, build_peer, peer, name=None, args=(), uring=None):
    """Builds peer and adds it to out as name (default: peer), with args; and its io_uring build,
    the binary `uring` next to it, where the peer's build made one."""
    path = build_peer(peer)
    if not path:
        return
    out[name or peer] = [path, *args]
    if uring and os.path.exists(os.path.join(os.path.dirname(path), uring)):
        out[uring] = [os.path.join(os.path.dirname(path), uring)]


def _programs(build, build_peer):
    progs = {"gluon": [os.path.join(build, "bench", "task_bench")],
             "liburing": [os.path.join(build, "bench", "uring_floor")],
             "liburing-wake": [os.path.join(build, "bench", "wake_floor")]}
    _add_peer(progs, build_peer, "asio-task", uring="asio-task-uring")
    for peer in ("tokio-runtime", "monoio-task", "compio-task"):
        _add_peer(progs, build_peer, peer)
    return progs


def _cells(name, stdout):
    for line in stdout.splitlines():
        parts = line.split()
        if name == "tokio-runtime":
            if parts[0] in TOKIO_ROWS:
                yield TOKIO_ROWS[parts[0]], "tokio", float(parts[1]), "ns_per_op"
            continue
        w, impl, v, metric = parts
        yield w, impl, float(v), metric


def _echo_servers(build, build_peer):
    servers = {"gluon-task": [os.path.join(build, "examples", "task_echo_server")],
               "gluon-fiber": [os.path.join(build, "examples", "echo_server")]}
    _add_peer(servers, build_peer, "epoll-c")
    _add_peer(servers, build_peer, "asio-echo", uring="asio-echo-uring")  # Asio's C++20 awaitables
    for peer in ("monoio-task", "compio-task"):  # their echo mode: a task per connection
        _add_peer(servers, build_peer, peer, name=peer.replace("-task", "-echo"), args=["echo"])
    return servers


def run_echo(args, res, build, log, build_peer):
    """Echo ping-pong, 1000 connections, 512 B, per server CPU-second (B3's client), and the
    memory of idle connections; the server on CPU 0, the client on CPU 1."""
    client = os.path.join(build, "bench", "echo_client")
    servers = _echo_servers(build, build_peer)
    runs = args.runs or (1 if args.quick else 5)
    dur = "2" if args.quick else "5"
    for i in range(runs):
        for name, cmd in servers.items():
            log(f"[task] run {i + 1}/{runs}: echo-pingpong-512B-1000c on {name}")
            srv, port = start_listening(cmd + ["--port", "0"])
            try:
                r = subprocess.run(["taskset", "-c", "1", client, "--port", str(port), "--conns", "1000",
                                    "--size", "512", "--mode", "pingpong", "--duration", dur, "--warmup",
                                    "0.5" if args.quick else "1", "--json", "--cpu-pid", str(srv.pid)],
                                   stdout=subprocess.PIPE, text=True, timeout=300)
            finally:
                stop(srv)
            if r.returncode != 0:
                sys.exit(f"bench/run: echo_client failed against {name} (exit {r.returncode})")
            j = json.loads(r.stdout.strip().splitlines()[-1])
            res.add("echo-pingpong-512B-1000c", name, "ops_per_s", j["msgs_per_s"], "higher")
            if j.get("msgs_per_cpu_s"):
                res.add("echo-pingpong-512B-1000c", name, "ops_per_cpu_s", j["msgs_per_cpu_s"], "higher")
            if j.get("server_util") is not None:
                res.add("echo-pingpong-512B-1000c", name, "cpu_util", j["server_util"], "none")
    n_idle = 1000 if args.quick else 10000
    for name, cmd in servers.items():
        log(f"[task] memory of {n_idle} idle connections on {name}")
        srv, port = start_listening(cmd + ["--port", "0"])
        try:
            kib, _ = idle.measure(srv.pid, port, n_idle)
            res.add(f"idle-{n_idle}-conns", name, "rss_kib_per_conn", kib, "lower")
        except (RuntimeError, OSError) as e:
            log(f"[task] {name}: idle connections failed: {e}")
        finally:
            stop(srv)
    names = list(servers)
    return ("echo ping-pong, round trips per server CPU-second:\n\n" + res.table("ops_per_cpu_s", names) +
            "\n\nserver CPU utilisation:\n\n" + res.table("cpu_util", names) +
            "\n\nresident KiB per idle connection:\n\n" + res.table("rss_kib_per_conn", names))


def run(args, res, build, log, build_peer):
    progs = _programs(build, build_peer)
    runs = args.runs or (1 if args.quick else 5)
    for i in range(runs):
        for name, cmd in progs.items():
            log(f"[task] run {i + 1}/{runs}: {name}")
            r = subprocess.run(cmd + (["--quick"] if args.quick else []), stdout=subprocess.PIPE, text=True,
                               timeout=600)
            if r.returncode != 0:
                sys.exit(f"bench/run: {name} failed (exit {r.returncode}): verification error?")
            for w, impl, v, metric in _cells(name, r.stdout):
                res.add(w, impl, metric, v, "lower")
    impls = list(dict.fromkeys(k[1] for k in res.cells))
    gluon = [i for i in impls if i.startswith("gluon")]
    out = res.table("ns_per_op", gluon + [i for i in impls if not i.startswith("gluon")])
    # The nop rows' target is the overhead over the floor, in ns per op.
    rows = {(r["workload"], r["impl"]): r["value"] for r in res.rows()}
    lines = []
    for w in ("nop_b1", "nop_b32"):
        floor = rows.get((w, "liburing"))
        if floor is None:
            continue
        for i in gluon:
            if (w, i) in rows:
                lines.append(f"| {w} | {i} | {rows[(w, i)] - floor:+.1f} |")
    if lines:
        out += "\n\noverhead over raw liburing (ns per op):\n\n| workload | impl | overhead |\n|---|---|---|\n"
        out += "\n".join(lines)
    return out + "\n\n" + run_echo(args, res, build, log, build_peer)
