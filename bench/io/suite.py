"""bench/run io: gluon-fio against fio on identical parameters, alternating, on one core.

Workloads (see bench/README.md):
  disk    4 KiB random reads, O_DIRECT, queue depth 1..128, on a file on the disk
  seq     64 KiB sequential reads, O_DIRECT, depth 1..32, on the same file
  cache   4 KiB random reads of a page-cached file (the engine, not the disk, is the limit)
  shm     the same on /dev/shm (tmpfs)
CPU is the whole process's (every thread, including io_uring's kernel workers) from wait4, so
engines that push work to helper threads are charged for it. Disk runs check /proc/diskstats:
the bytes must really have come from the device.
"""
import json
import os
import shutil
import subprocess
import sys



def disk_sectors_read(path):
    st = os.stat(path)
    maj, mnr = os.major(st.st_dev), os.minor(st.st_dev)
    with open("/proc/diskstats") as f:
        for line in f:
            p = line.split()
            if int(p[0]) == maj and int(p[1]) == mnr:
                return int(p[5])
    return None  # e.g. a partition-less virtual device: not checkable


def run_measured(cmd):
    """Runs cmd pinned to CPU 0; returns (exit code, stdout, stderr). Its CPU time shows up in
    child_cpu() once it has been reaped, as communicate() does."""
    p = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=900)
    return p.returncode, out, err


def child_cpu():
    ru = os.times()
    return ru.children_user + ru.children_system


def gluon_cmd(fio_bin, f, rw, bs, qd, direct, engine, size, runtime, extra):
    return [fio_bin, f"--filename={f}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
            f"--direct={1 if direct else 0}", f"--engine={engine}", f"--size={size}",
            f"--runtime={runtime}", "--json"] + extra


def fio_cmd(f, rw, bs, qd, direct, engine, size, runtime, extra):
    return ["fio", "--name=bench", f"--filename={f}", f"--rw={rw}", f"--bs={bs}", f"--iodepth={qd}",
            f"--direct={1 if direct else 0}", f"--ioengine={engine}", f"--size={size}",
            f"--runtime={runtime}", "--time_based", "--norandommap", "--randrepeat=0",
            "--invalidate=0", "--output-format=json"] + extra


def parse_gluon(out):
    j = json.loads(out.strip().splitlines()[-1])
    return j["ios"], j["iops"], j["mib_s"]


def parse_fio(out, rw):
    j = json.loads(out[out.index("{"):])
    job = j["jobs"][0]
    if job.get("error"):
        raise RuntimeError(f"fio reported error {job['error']}")
    side = job["write" if "write" in rw else "read"]
    return side["total_ios"], side["iops"], side["bw"] / 1024.0


def run_io(args, res, build, log):
    fio_bin = os.path.join(build, "bench", "gluon-fio")
    have_fio = shutil.which("fio") is not None
    if not have_fio:
        log("peer fio: not run (fio is not installed: scripts/deps.sh bench)")
    quick = args.quick
    runs = args.runs or (1 if quick else 5)
    runtime = "1" if quick else "4"
    disk_dir = os.path.join(os.path.dirname(build), "bench-io")
    os.makedirs(disk_dir, exist_ok=True)
    disk_file = os.path.join(disk_dir, "disk.dat")
    cache_file = os.path.join(disk_dir, "cache.dat")
    shm_file = "/dev/shm/gluon-bench-io.dat"

    cells = []  # (workload, file, rw, bs, qd, direct, size, disk?)
    if quick:
        cells.append(("cache-randread-4k-qd16", cache_file, "randread", "4k", 16, False, "64m", False))
    else:
        for qd in (1, 4, 16, 64, 128):
            cells.append((f"disk-randread-4k-qd{qd}", disk_file, "randread", "4k", qd, True, "2g", True))
        for qd in (1, 4, 16, 32):
            cells.append((f"disk-read-64k-qd{qd}", disk_file, "read", "64k", qd, True, "2g", True))
        for qd in (1, 16, 128):
            cells.append((f"cache-randread-4k-qd{qd}", cache_file, "randread", "4k", qd, False, "1g", False))
            cells.append((f"shm-randread-4k-qd{qd}", shm_file, "randread", "4k", qd, False, "1g", False))

    if getattr(args, "only", None):
        cells = [c for c in cells if args.only in c[0]]
    # Each implementation: (name, build command or None if not applicable to the cell).
    def impls(cell):
        w, f, rw, bs, qd, direct, size, disk = cell
        out = []
        lat = [] if disk else ["--no-lat"]
        # On the disk, registered buffers and files for both (fio gets fixedbufs and
        # registerfiles below). Registration pins a buffer's pages at once, which decides how
        # physically contiguous they are, and on this VM's virtio disk that decides how many
        # large requests fit in flight (README, io). In the page cache and on tmpfs gluon reads
        # inline with preadv2, which takes no registered buffer.
        fixed = ["--fixedbufs", "--registerfiles"] if disk else []
        out.append(("gluon-io_uring", gluon_cmd(fio_bin, f, rw, bs, qd, direct, "io_uring", size, runtime,
                                                lat + fixed)))
        if not disk:
            out.append(("gluon-psync_inline",
                        gluon_cmd(fio_bin, f, rw, bs, qd, direct, "psync_inline", size, runtime, lat)))
        if have_fio:
            # fio with its best batching options for each engine; no latency clock in the
            # engine-bound (page cache, tmpfs) cells, where it would be a visible cost.
            batch = [f"--iodepth_batch_submit={qd}", "--iodepth_batch_complete_min=1",
                     f"--iodepth_batch_complete_max={qd}"]
            fast = [] if disk else ["--gtod_reduce=1"]
            out.append(("fio-io_uring", fio_cmd(f, rw, bs, qd, direct, "io_uring", size, runtime,
                                                batch + fast + ["--fixedbufs=1", "--registerfiles=1"])))
            out.append(("fio-libaio", fio_cmd(f, rw, bs, qd, direct, "libaio", size, runtime, batch + fast)))
            if qd == 1:
                out.append(("fio-psync", fio_cmd(f, rw, bs, 1, direct, "psync", size, runtime, fast)))
        return out

    # Lay the files out once (gluon-fio stamps every block; fio reads them too).
    laid = set()
    for c in cells:
        if c[1] in laid:
            continue
        laid.add(c[1])
        log(f"[io] laying out {c[1]} ({c[6]})")
        r = subprocess.run(gluon_cmd(fio_bin, c[1], "read", "1m", 1, False, "psync_inline", c[6], "0.01", []),
                           stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            sys.exit(f"bench/run: laying out {c[1]} failed")

    names = []
    for i in range(runs):
        for cell in cells:
            w, f, rw, bs, qd, direct, size, disk = cell
            if not disk and f != shm_file:
                subprocess.run(["cat", f], stdout=subprocess.DEVNULL)  # into the page cache
            for name, cmd in impls(cell):
                if name not in names:
                    names.append(name)
                log(f"[io] run {i + 1}/{runs}: {w} {name}")
                sec0 = disk_sectors_read(f) if disk else None
                cpu0 = child_cpu()
                rc, out, err = run_measured(cmd)
                cpu = child_cpu() - cpu0
                if rc != 0:
                    sys.exit(f"bench/run: {name} failed on {w} (exit {rc}): {err.strip()[-300:]}")
                ios, iops, mib = (parse_fio(out, rw) if name.startswith("fio") else parse_gluon(out))
                if ios <= 0:
                    sys.exit(f"bench/run: {name} did no I/O on {w}")
                if sec0 is not None and "write" not in rw:
                    got = (disk_sectors_read(f) - sec0) * 512
                    want = ios * (4096 if bs == "4k" else 65536)
                    if got < 0.9 * want:
                        sys.exit(f"bench/run: {name} on {w}: only {got} of {want} bytes came from the device")
                res.add(w, name, "iops", iops, "higher")
                res.add(w, name, "mb_per_s", mib * 1.048576, "higher")
                res.add(w, name, "cpu_us_per_io", cpu * 1e6 / ios, "lower")
                res.add(w, name, "iops_per_cpu_s", ios / cpu if cpu > 0 else 0, "higher")
    out = ["IOPS:", res.table("iops", names), "",
           "IOPS per CPU-second of the whole process (the headline for cache and shm):",
           res.table("iops_per_cpu_s", names), "",
           "CPU microseconds per I/O:", res.table("cpu_us_per_io", names)]
    if not quick:
        out += ["", "MB/s:", res.table("mb_per_s", names)]
    return "\n".join(out)
