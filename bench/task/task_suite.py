"""bench/run task (B9): C++20 tasks against gluon's fibers, the raw liburing floor and peers.

Every program prints "workload impl value metric" lines; they run alternately (A B C A B C ...),
each verifying its own work (a mismatch exits non-zero and fails the suite)."""
import os
import subprocess
import sys


def _programs(build, build_peer):
    progs = {"gluon": [os.path.join(build, "bench", "task_bench")],
             "liburing": [os.path.join(build, "bench", "uring_floor")]}
    for peer in ():  # peers join here as they are written (bench/peers/*/build.sh)
        path = build_peer(peer)
        if path:
            progs[peer] = [path]
    return progs


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
            for line in r.stdout.splitlines():
                w, impl, v, metric = line.split()
                res.add(w, impl, metric, float(v), "lower")
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
    return out
