"""bench/run httpfs: the HTTP filesystem and the cache filesystem in front of it, read by
gluon-fs-fio from nginx, against gluon-fio on the page cache; and fio through gluon's FUSE export
of a local directory against fio on the directory itself (the floor).

Workloads (see bench/README.md):
  randread-4k-qd16, read-1m-qd4   gluon-fs-fio through: the HTTP fs alone (every read a Range
                                  request), the cache cold, warm in memory, warm on disk only
                                  (memory dropped, 64 KiB blocks, 16 MiB of memory); and
                                  gluon-fio (io_uring) and gluon-fs-fio over the local fs, both
                                  on the page cache.
  fuse-randread-4k-16j, fuse-read-1m-16j   fio (psync, 16 jobs) on a FUSE passthrough mount
                                  (direct_io: every read reaches the server) served by gluon and
                                  by libfuse's own single-threaded loop (bench/peers/libfuse-c),
                                  and on the directory itself (the floor).
nginx and the FUSE server run on CPU 0, the readers on CPU 1. CPU is the reader's (wait4) and
the server's (/proc/PID/stat) over each run.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "http"))
import http_suite  # noqa: E402  (bench/http/http_suite.py: nginx)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import cpu_s as proc_cpu_s  # noqa: E402


def _child_cpu():
    t = os.times()
    return t.children_user + t.children_system


def _run(cmd, timeout=600):
    p = subprocess.run(["taskset", "-c", "1"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def _gluon_cells(quick):
    # (workload, rw, bs, iodepth)
    if quick:
        return [("randread-4k-qd16", "randread", "4k", 16), ("read-1m-qd4", "read", "1m", 4)]
    return [("randread-4k-qd16", "randread", "4k", 16), ("randread-4k-qd1", "randread", "4k", 1),
            ("read-1m-qd4", "read", "1m", 4)]


def _gluon_impls(build, data, url, size, runtime, rw, bs, qd, work):
    fsfio = os.path.join(build, "bench", "gluon-fs-fio")
    gfio = os.path.join(build, "bench", "gluon-fio")
    base = [f"--filename={data}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}", f"--size={size}",
            f"--runtime={runtime}", "--json"]
    mib = int(size[:-1]) if size.endswith("m") else 1024
    return [
        ("gluon-fio page cache", [gfio, "--engine=io_uring", "--no-lat"] + base, False),
        ("local fs page cache", [fsfio, "--via=local"] + base, False),
        ("http fs", [fsfio, "--via=http", f"--url={url}"] + base, True),
        ("cache cold", [fsfio, "--via=cache", f"--url={url}", f"--cache-mib={mib + 64}", "--once"] + base, True),
        ("cache warm memory", [fsfio, "--via=cache", f"--url={url}", f"--cache-mib={mib + 64}", "--warm"] + base, True),
        ("cache warm disk", [fsfio, "--via=cache", f"--url={url}", "--cache-mib=16", "--block-kib=64",
                             f"--disk-cache={work}/disk-cache", "--warm", "--drop-memory", "--read-ahead=0"] + base, True),
    ]


def _fio_cmd(directory, rw, bs, size, runtime):
    return ["fio", "--name=fs", f"--directory={directory}", "--filename=data.dat", f"--rw={rw}", f"--bs={bs}",
            "--ioengine=psync", "--numjobs=16", "--group_reporting", f"--size={size}", f"--runtime={runtime}",
            "--time_based", "--norandommap", "--randrepeat=0", "--invalidate=0", "--gtod_reduce=1",
            "--output-format=json"]


def _parse_fio(out):
    j = json.loads(out[out.index("{"):])
    job = j["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio reported error {job['error']}")
    r = job["read"]
    return r["total_ios"], r["iops"], r["bw"] / 1024.0


def _mount(cmd, log, what):
    """Starts a FUSE server pinned to CPU 0 and waits for its "mounted" line; None if it fails."""
    srv = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    if not line.startswith("mounted"):
        srv.kill()
        log(f"[httpfs] {what}: not run (mount failed: {srv.stderr.read().strip()[-200:]})")
        return None
    return srv


def _unmount(srv, mnt):
    """Unmounting ends either server's loop (gluon's also unmounts on SIGINT; libfuse's loop
    does not always wake for it)."""
    subprocess.run(["umount", mnt], stderr=subprocess.DEVNULL)
    try:
        srv.wait(timeout=20)
    except subprocess.TimeoutExpired:
        srv.kill()
        subprocess.run(["umount", "-l", mnt], stderr=subprocess.DEVNULL)
        srv.wait()
    os.rmdir(mnt)


def _fuse(args, res, build, log, runs, runtime, size, www, build_peer):
    if shutil.which("fio") is None:
        log("[httpfs] fio: not run (not installed)")
        return []
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        log("[httpfs] FUSE: not run (no usable /dev/fuse)")
        return []
    servers = []  # (name, process, mountpoint)
    peer = build_peer("libfuse-c") if build_peer else None
    for name, cmd in (("fio on gluon FUSE", [os.path.join(build, "bench", "fuse-passthrough")]),
                      ("fio on libfuse's loop", [peer] if peer else None)):
        if not cmd:
            log(f"[httpfs] {name}: not run (peer not built)")
            continue
        mnt = tempfile.mkdtemp(prefix="gluon-httpfs-mnt-")
        srv = _mount(cmd + [www, mnt], log, name)
        if srv:
            servers.append((name, srv, mnt))
        else:
            os.rmdir(mnt)
    if not servers:
        return []
    names = []
    try:
        cells = [("fuse-randread-4k-16j", "randread", "4k"), ("fuse-read-1m-16j", "read", "1m")]
        for i in range(runs):
            for w, rw, bs in cells:
                if getattr(args, "only", None) and args.only not in w:
                    continue
                for name, d, pid in [(n, m, p.pid) for n, p, m in servers] + [("fio on the directory", www, None)]:
                    if name not in names:
                        names.append(name)
                    log(f"[httpfs] run {i + 1}/{runs}: {w} {name}")
                    s0 = proc_cpu_s(pid) if pid else 0
                    c0 = _child_cpu()
                    rc, out, err = _run(_fio_cmd(d, rw, bs, size, runtime))
                    cpu = _child_cpu() - c0
                    scpu = proc_cpu_s(pid) - s0 if pid else 0
                    if rc != 0:
                        sys.exit(f"bench/run: {name} failed on {w}: {err.strip()[-300:]}")
                    ios, iops, mib = _parse_fio(out)
                    if ios <= 0:
                        sys.exit(f"bench/run: {name} did no I/O on {w}")
                    res.add(w, name, "iops", iops, "higher")
                    res.add(w, name, "mb_per_s", mib * 1.048576, "higher")
                    res.add(w, name, "cpu_us_per_io", (cpu + scpu) * 1e6 / ios, "lower")
                    res.add(w, name, "iops_per_cpu_s", ios / (cpu + scpu) if cpu + scpu > 0 else 0, "higher")
    finally:
        for _, srv, mnt in servers:
            _unmount(srv, mnt)
    return names


def run(args, res, build, log, build_peer=None):
    quick = args.quick
    runs = args.runs or (1 if quick else 5)
    runtime = "1" if quick else "3"
    size = "32m" if quick else "256m"
    work = os.path.join(os.path.dirname(build), "bench-httpfs")
    www = os.path.join(work, "www")
    os.makedirs(www, exist_ok=True)
    data = os.path.join(www, "data.dat")
    fsfio = os.path.join(build, "bench", "gluon-fs-fio")
    log(f"[httpfs] laying out {data} ({size})")
    if subprocess.run([fsfio, "--via=local", f"--filename={data}", "--rw=read", "--bs=1m", f"--size={size}",
                       "--runtime=0.01"], stdout=subprocess.DEVNULL).returncode != 0:
        sys.exit("bench/run: laying out the httpfs file failed")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    ngx = http_suite.Nginx(www).start(nginx_bin)
    url = f"http://127.0.0.1:{ngx.port}/data.dat"
    names = []
    try:
        for i in range(runs):
            for w, rw, bs, qd in _gluon_cells(quick):
                if getattr(args, "only", None) and args.only not in w:
                    continue
                subprocess.run(["cat", data], stdout=subprocess.DEVNULL)  # into the page cache
                for name, cmd, served in _gluon_impls(build, data, url, size, runtime, rw, bs, qd, work):
                    if name not in names:
                        names.append(name)
                    log(f"[httpfs] run {i + 1}/{runs}: {w} {name}")
                    s0 = proc_cpu_s(ngx.proc.pid)
                    c0 = _child_cpu()
                    rc, out, err = _run(cmd)
                    cpu = _child_cpu() - c0
                    scpu = proc_cpu_s(ngx.proc.pid) - s0 if served else 0
                    if rc != 0:
                        sys.exit(f"bench/run: {name} failed on {w} (exit {rc}): {err.strip()[-300:]}")
                    j = json.loads(out.strip().splitlines()[-1])
                    if j["ios"] <= 0:
                        sys.exit(f"bench/run: {name} did no I/O on {w}")
                    res.add(w, name, "iops", j["iops"], "higher")
                    res.add(w, name, "mb_per_s", j["mib_s"] * 1.048576, "higher")
                    res.add(w, name, "cpu_us_per_io", cpu * 1e6 / j["ios"], "lower")
                    res.add(w, name, "iops_per_cpu_s", j["ios"] / cpu if cpu > 0 else 0, "higher")
                    res.add(w, name, "server_cpu_us_per_io", scpu * 1e6 / j["ios"], "lower")
    finally:
        ngx.stop()
    fres = res.__class__(res.suite)  # the FUSE rows in tables of their own
    fuse_names = _fuse(args, fres, build, log, runs, runtime, size, www, build_peer)
    rows = {(r["workload"], r["impl"], r["metric"]): r["value"] for r in list(res.rows()) + list(fres.rows())}
    ratios = []
    for w, a, b in [(w, "cache warm memory", "gluon-fio page cache") for w, *_ in _gluon_cells(quick)] + \
                   [(w, "fio on gluon FUSE", b) for w in ("fuse-randread-4k-16j", "fuse-read-1m-16j")
                    for b in ("fio on libfuse's loop", "fio on the directory")]:
        cells = []
        for m in ("iops", "iops_per_cpu_s"):
            if (w, a, m) in rows and (w, b, m) in rows and rows[(w, b, m)] > 0:
                cells.append(f"{rows[(w, a, m)] / rows[(w, b, m)]:.2f}x")
        if len(cells) == 2:
            ratios.append(f"| {w} | {a} / {b} | {cells[0]} | {cells[1]} |")
    out = ["IOPS (reads through gluon's filesystems; nginx serves the HTTP ones):",
           res.table("iops", names, headline_impl="cache warm memory"), "",
           "Reader CPU microseconds per read:", res.table("cpu_us_per_io", names, headline_impl="cache warm memory"), "",
           "nginx CPU microseconds per read:", res.table("server_cpu_us_per_io", names, headline_impl="cache warm memory")]
    if fuse_names:
        out += ["", "FUSE passthrough, fio 16 jobs (IOPS):", fres.table("iops", fuse_names, headline_impl="fio on gluon FUSE"),
                "", "CPU microseconds per read (fio + the FUSE server):",
                fres.table("cpu_us_per_io", fuse_names, headline_impl="fio on gluon FUSE")]
    res.cells.update(fres.cells)  # for --json
    res.better.update(fres.better)
    if ratios:
        out += ["", "Ratios:", "| workload | ratio | IOPS | IOPS per CPU-second |", "|---|---|---|---|"] + ratios
    return "\n".join(out)
