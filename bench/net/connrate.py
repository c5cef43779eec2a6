"""Connection rate (B7) for bench/run: short HTTP/1.0 connections against gluon servers
(bench/net/connrate_server.cc) and nginx, at 1 and 2 vCPUs. At 2 vCPUs nginx runs three ways
(B10): as shipped (one listening socket shared by its 2 workers, accept_mutex off), with
`reuseport` in its config, and as shipped under libgluon_preload.so's listener mode
(`gluon-preload-nginx`). Their workers answer with their pid, so the client reports locality:
the share of connections served by the worker on the CPU that handled the SYN.

1 vCPU: server on CPU 0, one client on CPU 1. 2 vCPUs: server on CPUs 0-1 and one client
pinned to each CPU (each keeps its own connections in flight): on loopback a connection is
received on the CPU that sent it, so the CPU-steered sharded server serves each client's
connections on that client's core. Server and clients share the machine there.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from procs import stop as _stop  # bench/procs.py

INFLIGHT = 256  # connections under way per client process


def _can_connect(port):
    import socket
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Nginx:
    """nginx answering `return 200` from a private temporary prefix (pids: processes to measure)."""

    def __init__(self, workers, variant="stock", preload=None):
        self.workers = workers
        self.variant = variant  # stock, reuseport, or preload (stock config, listener mode)
        self.preload = preload  # libgluon_preload.so for the preload variant
        self.dir = tempfile.mkdtemp(prefix="gluon-connrate-nginx-")
        self.proc = None
        self.port = 0
        self.pids = []

    def start(self, binary):
        import socket
        for _ in range(3):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
            self._write_conf()
            cpus = ",".join(str(i) for i in range(self.workers))
            env = dict(os.environ)
            if self.variant == "preload":
                env.update(LD_PRELOAD=self.preload, GLUON_PRELOAD="listen")
            self.proc = subprocess.Popen(["taskset", "-c", cpus, binary, "-p", self.dir + "/", "-c",
                                          self.dir + "/nginx.conf", "-e", self.dir + "/error.log",
                                          "-g", "daemon off;"], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env)
            give_up = time.time() + 10
            while time.time() < give_up and self.proc.poll() is None and not _can_connect(self.port):
                time.sleep(0.01)
            if self.proc.poll() is None and _can_connect(self.port):
                break
            self.stop()
        else:
            raise RuntimeError(f"nginx did not start; see {self.dir}/error.log")
        if self.workers == 1:
            self.pids = [self.proc.pid]  # master_process off: one process serves
        else:
            give_up = time.time() + 10
            while time.time() < give_up:
                kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], stdout=subprocess.PIPE,
                                      text=True).stdout.split()
                if len(kids) >= self.workers:
                    self.pids = [int(k) for k in kids]
                    break
                time.sleep(0.01)
            else:
                raise RuntimeError("nginx workers did not start")
        return self

    def pid_cpu(self):
        """PID:CPU of each worker (each is pinned to one CPU by worker_cpu_affinity)."""
        out = []
        for pid in self.pids:
            with open(f"/proc/{pid}/status") as f:
                cpus = next(l.split()[1] for l in f if l.startswith("Cpus_allowed_list:"))
            out.append(f"{pid}:{cpus}")
        return ",".join(out)

    def _write_conf(self):
        d = self.dir
        multi = self.workers > 1
        lines = [f"master_process {'on' if multi else 'off'};", f"worker_processes {self.workers};",
                 f"pid {d}/nginx.pid;", f"error_log {d}/error.log warn;", "worker_rlimit_nofile 20000;"]
        if multi:
            lines.append("worker_cpu_affinity " + " ".join(
                "".join("1" if b == w else "0" for b in reversed(range(self.workers)))
                for w in range(self.workers)) + ";")
        if os.geteuid() == 0:
            lines.append("user root root;")  # else the workers would drop to nobody
        # accept_mutex off is nginx's default since 1.11.3: said here, as the issue's rows say it.
        lines += ["events { worker_connections 8192; accept_mutex off; }", "http {", "  access_log off;",
                  "  keepalive_timeout 0;", "  default_type text/plain;"]
        lines += [f"  {t}_temp_path {d}/tmp_{t};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")]
        listen = f"{self.port} backlog=4096" + (" reuseport" if self.variant == "reuseport" else "")
        body = "$pid\\n" if multi else "ok\\n"  # the client checks it (and with pids, locality)
        lines += [f"  server {{ listen {listen}; location / {{ return 200 \"{body}\"; }} }}", "}"]
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # QUIT: graceful; TERM would do too. A single-process nginx exits on either.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def _start_gluon(build, vcpus, args):
    cpus = ",".join(str(i) for i in range(vcpus))
    cmd = ["taskset", "-c", cpus, os.path.join(build, "bench", "connrate_server"), "--port", "0",
           "--vcpus", str(vcpus)] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if not line.startswith("listening"):
        p.kill()
        sys.exit(f"bench/run: connrate_server {args} did not start: {line!r}")
    return p, int(line.split()[1]), [p.pid]


def _run_clients(build, vcpus, port, pids, dur, warmup, pid_cpu=None):
    """Returns (connections/s summed over the clients, server CPU-s per connection or None, util,
    locality or None)."""
    client = os.path.join(build, "bench", "connrate_client")
    cpus = [1] if vcpus == 1 else list(range(vcpus))
    procs = []
    for i, cpu in enumerate(cpus):
        cmd = ["taskset", "-c", str(cpu), client, "--port", str(port), "--inflight", str(INFLIGHT),
               "--duration", str(dur), "--warmup", str(warmup), "--json"]
        if i == 0:  # one client measures the server over (nearly) the common interval
            cmd += ["--cpu-pid", ",".join(str(p) for p in pids)]
        if pid_cpu:
            cmd += ["--pid-cpu", pid_cpu]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120 + dur)
        if p.returncode != 0:
            sys.exit(f"bench/run: connrate_client failed (exit {p.returncode}): verification error?")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    rate = sum(o["conns_per_s"] for o in outs)
    local = None
    if pid_cpu:
        total = sum(o["conns"] for o in outs)
        local = sum(o["conns"] * o["local_share"] for o in outs) / total if total else None
    first = outs[0]
    if not first.get("server_cpu_s"):
        return rate, None, None, local
    conns = rate * first["wall_s"]
    return rate, first["server_cpu_s"] / conns, first["server_util"], local


def run(args, res, build, log):
    quick = args.quick
    dur, warmup = (0.5, 0.2) if quick else (5, 1)
    runs = args.runs or (1 if quick else 5)
    nginx_bin = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None)
    impls = {  # name -> extra server arguments (None: nginx)
        "gluon-sharded": ["--mode", "sharded", "--engine", "io_uring"],
        "gluon-shared": ["--mode", "shared", "--engine", "io_uring"],
        "gluon-sharded-epoll": ["--mode", "sharded", "--engine", "epoll"],
    }
    if quick:
        impls = {k: v for k, v in impls.items() if k in ("gluon-sharded", "gluon-shared")}
    preload = os.path.join(build, "src", "libgluon_preload.so")
    if nginx_bin:
        impls["nginx"] = "stock"
        impls["nginx-reuseport"] = "reuseport"
        if os.path.exists(preload):
            impls["gluon-preload-nginx"] = "preload"
        else:
            log("[connrate] gluon-preload-nginx: not run (no libgluon_preload.so in this build)")
    else:
        log("[connrate] nginx: not run (not installed)")
    workloads = [(1, "connrate-1vcpu"), (2, "connrate-2vcpu")]
    for i in range(runs):
        for vcpus, wname in workloads:
            for name, extra in impls.items():
                nginx_variant = extra if isinstance(extra, str) else None
                if vcpus == 1 and nginx_variant not in (None, "stock"):
                    continue  # one worker: the three ways are the same program
                log(f"[connrate] run {i + 1}/{runs}: {wname} on {name}")
                ngx = None
                pid_cpu = None
                if nginx_variant:
                    ngx = Nginx(vcpus, nginx_variant, preload).start(nginx_bin)
                    port, pids = ngx.port, ngx.pids
                    pid_cpu = ngx.pid_cpu() if vcpus > 1 else None
                else:
                    srv, port, pids = _start_gluon(build, vcpus, extra)
                try:
                    rate, cpu_per_conn, util, local = _run_clients(build, vcpus, port, pids, dur, warmup, pid_cpu)
                finally:
                    if ngx:
                        ngx.cleanup()
                    else:
                        _stop(srv)
                res.add(wname, name, "conns_per_s", rate, "higher")
                if local is not None:
                    res.add(wname, name, "local_share", local, "higher")
                if cpu_per_conn:
                    res.add(wname, name, "server_us_per_conn", cpu_per_conn * 1e6, "lower")
                    res.add(wname, name, "cpu_util", util, "none")
    names = list(impls.keys())
    out = ["connections per second (the headline; 1 vCPU: client-bound, see server CPU utilisation):",
           res.table("conns_per_s", names), "",
           "server CPU microseconds per connection (utime+stime of the server's processes):",
           res.table("server_us_per_conn", names), "", "server CPU utilisation:",
           res.table("cpu_util", names), "",
           "locality (share of connections served on the CPU that took the SYN; nginx rows at 2 vCPUs):",
           res.table("local_share", [n for n in names if n.startswith(("nginx", "gluon-preload"))]), "",
           "scaling 1 -> 2 vCPUs (median connections/s):"]
    med = {(r["workload"], r["impl"]): r["value"] for r in res.rows() if r["metric"] == "conns_per_s"}
    for n in names:
        a, b = med.get(("connrate-1vcpu", n)), med.get(("connrate-2vcpu", n))
        if a and b:
            out.append(f"  {n}: {b / a:.2f}x")
    cpu = {(r["workload"], r["impl"]): r["value"] for r in res.rows() if r["metric"] == "server_us_per_conn"}
    base = cpu.get(("connrate-2vcpu", "gluon-preload-nginx"))
    if base:
        out.append("connections per server CPU-second at 2 vCPUs, gluon-preload-nginx against:")
        for n in ("nginx", "nginx-reuseport"):
            if cpu.get(("connrate-2vcpu", n)):
                out.append(f"  {n}: {cpu[('connrate-2vcpu', n)] / base:.3f}x")
    return "\n".join(out)
