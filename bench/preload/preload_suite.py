"""bench/run preload: the plain C thread-per-connection echo server (tests/preload/echo_threads.c)
as it is and under libgluon_preload.so's fiber mode, at 100, 1,000 and 10,000 connections.

Server pinned to CPU 0 (one vCPU under the preload), bench/net's echo_client (ping-pong, 64 B)
on CPU 1. Reports messages per server CPU-second, messages/s, peak RSS and OS thread count of
the server (sampled from /proc while the load runs), and the kernel memory the server's
threads cost beyond RSS: the growth of /proc/meminfo's KernelStack (each OS thread's kernel
stack), SUnreclaim (task structs and the other unreclaimable slab, sockets included, which
both variants have alike) and PageTables over the idle machine's, sampled alike. mem_kib =
RSS + the three.
echo_client checks every echoed byte.
"""

import json
import os
import resource
import subprocess
import sys
import threading

from procs import stop as _stop  # bench/procs.py

CONNS = [100, 1000, 10000]
SIZE = 64


def _status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "Threads"):
                    out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def _meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("KernelStack", "SUnreclaim", "PageTables"):
                out[k] = int(v.split()[0])
    return out


def _raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run(args, res, build, log):
    server = os.path.join(build, "tests", "echo_threads")
    client = os.path.join(build, "bench", "echo_client")
    lib = os.path.join(build, "src", "libgluon_preload.so")
    for p in (server, client, lib):
        if not os.path.exists(p):
            sys.exit(f"bench/run: {p} is missing (build the release preset)")
    impls = {
        "threads": {},
        "gluon-preload-fibers": {"LD_PRELOAD": lib, "GLUON_PRELOAD": "fibers", "GLUON_VCPUS": "1"},
    }
    quick = args.quick
    conns_list = [100] if quick else CONNS
    secs, warmup = (0.5, 0.2) if quick else (3.0, 1.0)
    runs = args.runs or (1 if quick else 5)
    for i in range(runs):
        for conns in conns_list:
            wname = f"echo-pingpong-{SIZE}B-{conns}c"
            for name, env in impls.items():
                log(f"[preload] run {i + 1}/{runs}: {wname} on {name}")
                base = _meminfo()
                srv = subprocess.Popen(["taskset", "-c", "0", server], stdout=subprocess.PIPE, text=True,
                                       env={**os.environ, **env}, preexec_fn=_raise_nofile)
                peak = {"VmRSS": 0, "Threads": 0, "KernelStack": 0, "SUnreclaim": 0, "PageTables": 0}
                done = threading.Event()

                def sample():
                    while not done.wait(0.1):
                        for k, v in list(_status(srv.pid).items()) + list(_meminfo().items()):
                            peak[k] = max(peak[k], v)
                try:
                    line = srv.stdout.readline().split()
                    if len(line) != 2 or line[0] != "port":
                        sys.exit(f"bench/run: echo_threads under {name} did not start: {line!r}")
                    t = threading.Thread(target=sample)
                    t.start()
                    cmd = ["taskset", "-c", "1", client, "--port", line[1], "--conns", str(conns), "--size",
                           str(SIZE), "--mode", "pingpong", "--duration", str(secs), "--warmup", str(warmup),
                           "--cpu-pid", str(srv.pid), "--json"]
                    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         timeout=300, preexec_fn=_raise_nofile)
                    done.set()
                    t.join()
                finally:
                    done.set()
                    _stop(srv)
                last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
                if out.returncode != 0 or not last.startswith("{"):
                    sys.exit(f"bench/run: echo_client against {name} failed on {wname} "
                             f"(exit {out.returncode}): {last} {out.stderr[-500:]}")
                v = json.loads(last)
                res.add(wname, name, "ops_per_cpu_s", v["msgs_per_cpu_s"] or 0, "higher")
                res.add(wname, name, "ops_per_s", v["msgs_per_s"], "higher")
                res.add(wname, name, "cpu_util", v["server_util"] or 0, "none")
                if "p99_us" in v:
                    res.add(wname, name, "p99_us", v["p99_us"], "lower")
                res.add(wname, name, "rss_kib", peak["VmRSS"], "lower")
                res.add(wname, name, "threads", peak["Threads"], "lower")
                kstack = max(0, peak["KernelStack"] - base["KernelStack"])
                slab = max(0, peak["SUnreclaim"] - base["SUnreclaim"])
                ptes = max(0, peak["PageTables"] - base["PageTables"])
                res.add(wname, name, "kstack_kib", kstack, "lower")
                res.add(wname, name, "slab_kib", slab, "lower")
                res.add(wname, name, "pagetables_kib", ptes, "lower")
                res.add(wname, name, "mem_kib", peak["VmRSS"] + kstack + slab + ptes, "lower")
    cols = list(impls)
    out = []
    for metric, title in [("ops_per_cpu_s", "messages per server CPU-second"), ("ops_per_s", "messages/s"),
                          ("cpu_util", "server CPU utilisation"), ("p99_us", "p99 round trip (us)"),
                          ("rss_kib", "server peak RSS (KiB)"),
                          ("threads", "server OS threads"), ("kstack_kib", "kernel stacks grown (KiB)"),
                          ("slab_kib", "unreclaimable slab grown (KiB)"),
                          ("pagetables_kib", "page tables grown (KiB)"),
                          ("mem_kib", "memory: RSS + kernel stacks + slab + page tables (KiB)")]:
        out += [f"threaded echo server, {title}:", res.table(metric, cols), ""]
    return "\n".join(out)
