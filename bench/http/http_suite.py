"""HTTP/1.1 (B4) for bench/run: gluon's HTTP server (examples/http_server) against nginx with one
worker, and the floor: a plain-C epoll responder that answers every request with a canned
response and does nothing else (bench/peers/http-c).

Server pinned to CPU 0, wrk -t1 on CPU 1; alternating runs; the metric is requests per server
CPU-second (utime+stime of the server process over the run), with requests/s and wrk's p50/p99.
Every run is verified: no socket errors, no non-2xx answers, and at least the body's bytes per
request read, or the suite fails. WebSocket echo is in ws_suite.py (`bench/run http --only ws`).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import connrate  # bench/net/connrate.py: nginx process handling
from procs import cpu_s as _cpu_s, start_listening as _start  # bench/procs.py
import idle  # bench/net/idle.py: memory per idle connection

BODY_SMALL = 13
FILE_4K = 4096
FILE_1M = 1 << 20
IDLE_CONNS = 10000

PIPELINE_LUA = """
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format(nil, wrk.path) end
  req = table.concat(r)
end
request = function() return req end
"""


class Nginx(connrate.Nginx):
    """nginx, one worker, serving the benchmark's directory and `return 200` for /hello."""

    def __init__(self, root, tls=None, h2=False):
        super().__init__(1)
        self.root = root
        self.tls = tls  # (certificate file, key file) for an HTTPS listener
        self.h2 = h2  # HTTP/2 on the listener (h2c by prior knowledge without TLS, ALPN with it)

    def _write_conf(self):
        d = self.dir
        lines = ["master_process off;", "worker_processes 1;", f"pid {d}/nginx.pid;",
                 f"error_log {d}/error.log warn;", "worker_rlimit_nofile 20000;"]
        if os.geteuid() == 0:
            lines.append("user root root;")
        lines += ["events { worker_connections 8192; }", "http {", "  access_log off;", "  sendfile on;",
                  "  tcp_nopush on;", "  open_file_cache max=1000 inactive=60s;",
                  "  keepalive_requests 10000000;", "  keepalive_timeout 60s;",
                  "  types { application/octet-stream bin; }"]
        lines += [f"  {t}_temp_path {d}/tmp_{t};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")]
        ssl = ""
        if self.tls:
            ssl = (f" ssl; ssl_certificate {self.tls[0]}; ssl_certificate_key {self.tls[1]};"
                   " ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:SSL:10m")
        if self.h2:
            ssl = " http2" + ssl
            lines += ["  http2_max_requests 10000000;", "  http2_max_concurrent_streams 128;"]
        lines += [f"  server {{ listen 127.0.0.1:{self.port} backlog=4096{ssl}; root {self.root};",
                  "    location = /hello { default_type text/plain; return 200 \"Hello, World!\"; } }", "}"]
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")


def _seconds(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)", v)
    if not m:
        return None
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[m.group(2)]
    return float(m.group(1)) * scale


def _size(v, unit):
    return float(v) * {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}[unit]


def _pipeline_latency(build, port, path, dur, pid, body):
    """p50/p99 of the pipelined workload: wrk's histogram is empty above its median at these rates,
    so they come from bench/http/pipeline_load.cc (16 requests per send, 100 connections, every
    answer parsed and checked), run on the load generator's CPU right after wrk."""
    cmd = ["taskset", "-c", "1", os.path.join(build, "bench", "pipeline_load"), "--addr", f"127.0.0.1:{port}",
           "--path", path, "--depth", "16", "--conns", "100", "--duration", str(min(dur, 3)), "--warmup", "0.5",
           "--expect-bytes", str(body), "--cpu-pid", str(pid), "--json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=dur + 60)
    if r.returncode != 0:
        sys.exit(f"bench/run: pipeline_load failed (verification error?):\n{r.stdout}")
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return {"p50": j["p50_us"] * 1e-6, "p99": j["p99_us"] * 1e-6}


def _wrk(port, path, dur, extra, script_dir, pid, min_bytes, scheme="http"):
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c100", f"-d{dur}s", "--latency"] + extra
    if extra == ["pipeline"]:
        cmd = cmd[:-1] + ["-s", os.path.join(script_dir, "pipeline.lua")]
    cmd.append(f"{scheme}://127.0.0.1:{port}{path}")
    c0 = _cpu_s(pid)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=dur + 60).stdout
    cpu = _cpu_s(pid) - c0
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+), ([\d.]+)(\w+) read", out)
    if not m:
        sys.exit(f"bench/run: wrk output not understood:\n{out}")
    reqs = int(m.group(1))
    secs = _seconds(m.group(2) + m.group(3))
    nbytes = _size(m.group(4), m.group(5))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    # wrk counts a server's close after a "Connection: close" answer as a read error.
    counted = errs.groups() if errs else ()
    if "Connection: close" in extra:
        counted = counted[0:1] + counted[2:]
    if bad or any(int(x) for x in counted) or reqs == 0:
        sys.exit(f"bench/run: verification failed (errors or non-2xx answers):\n{out}")
    if nbytes < reqs * min_bytes * 0.99:
        sys.exit(f"bench/run: verification failed: {nbytes:.0f} bytes read for {reqs} responses of >= {min_bytes}")
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    return {"rps": reqs / secs, "per_cpu": reqs / cpu if cpu > 0 else 0, "mbps": nbytes / secs / 1e6,
            "util": cpu / secs, "p50": _seconds(lat.get("50", "")), "p99": _seconds(lat.get("99", ""))}


def _h2load(port, path, dur, pid, min_bytes, scheme):
    """h2load, 100 connections of 10 concurrent streams, on CPU 1; verified like _wrk."""
    cmd = ["taskset", "-c", "1", "h2load", "-t1", "-c100", "-m10", "-D", str(dur),
           f"{scheme}://127.0.0.1:{port}{path}"]
    c0 = _cpu_s(pid)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=dur + 60).stdout
    cpu = _cpu_s(pid) - c0
    m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out)
    traffic = re.search(r"traffic: [\d.]+\w+ \((\d+)\) total.*\((\d+)\) data", out)
    t = re.search(r"finished in ([\d.]+\w+),", out)
    if not (m and codes and traffic and t) or int(m.group(3)) or int(m.group(4)) or int(codes.group(4)) or \
            int(codes.group(3)) or int(m.group(2)) == 0 or not re.search(r"Application protocol: h2c?\n", out):
        sys.exit(f"bench/run: h2load verification failed:\n{out}")
    reqs = int(m.group(2))
    if int(traffic.group(2)) < reqs * min_bytes * 0.99:
        sys.exit(f"bench/run: verification failed: {traffic.group(2)} body bytes for {reqs} responses of >= {min_bytes}")
    secs = _seconds(t.group(1))
    return {"rps": reqs / secs, "per_cpu": reqs / cpu if cpu > 0 else 0,
            "mbps": int(traffic.group(2)) / secs / 1e6, "p50": None, "p99": None}  # h2load gives no percentiles


def _children_cpu_s():
    import resource
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _clients(build, root, nginx_bin, runs, dur, res, log):
    """gluon's HTTP client (bench/http/http_load.cc) and wrk against the same nginx, alternating;
    both measured by their own CPU time (the children's rusage), warm-up included for both."""
    ngx = Nginx(root).start(nginx_bin)
    url = f"http://127.0.0.1:{ngx.port}/4k.bin"
    try:
        for i in range(runs):
            for name in ("gluon", "wrk"):
                log(f"[http] run {i + 1}/{runs}: client on {name}")
                c0 = _children_cpu_s()
                if name == "wrk":
                    out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c100", f"-d{dur}s", url],
                                         stdout=subprocess.PIPE, text=True, timeout=dur + 60).stdout
                    m = re.search(r"(\d+) requests in", out)
                    if not m or "Non-2xx" in out or "Socket errors" in out:
                        sys.exit(f"bench/run: wrk against nginx failed:\n{out}")
                    reqs = int(m.group(1))
                else:
                    r = subprocess.run(["taskset", "-c", "1", os.path.join(build, "bench", "http_load"), "--url", url,
                                        "--conns", "100", "--duration", str(dur), "--warmup", "0",
                                        "--expect-bytes", str(FILE_4K), "--json"],
                                       stdout=subprocess.PIPE, text=True, timeout=dur + 60)
                    if r.returncode != 0:
                        sys.exit("bench/run: http_load failed (verification error?)")
                    reqs = json.loads(r.stdout.strip().splitlines()[-1])["requests"]
                cpu = _children_cpu_s() - c0
                res.add("client-4k", name, "req_per_client_cpu_s", reqs / cpu, "higher")
    finally:
        ngx.cleanup()


def run(args, res, build, log, build_peer, demo=False):
    import proxy_suite  # bench/http/proxy_suite.py (imports this module)
    import ws_suite  # bench/http/ws_suite.py (imports this module)
    if getattr(args, "only", None) and args.only.startswith("ws"):
        return ws_suite.run(args, res, build, log, build_peer)
    if not shutil.which("wrk"):
        sys.exit("bench/run: wrk is not installed (scripts/deps.sh bench)")
    quick = args.quick
    dur = 1 if quick else 3 if demo else 5
    runs = args.runs or (1 if quick else 3 if demo else 5)
    work = tempfile.mkdtemp(prefix="gluon-http-bench-")
    root = os.path.join(work, "www")
    os.makedirs(root)
    for name, size in (("4k.bin", FILE_4K), ("1m.bin", FILE_1M)):
        with open(os.path.join(root, name), "wb") as f:
            f.write(os.urandom(size))
        # Dated an hour back, as served files are: gluon's memory cache keeps no file written in
        # the 2 s before its read (its mtime could still change without showing it), and these
        # are measured at once.
        old = time.time() - 3600
        os.utime(os.path.join(root, name), (old, old))
    with open(os.path.join(work, "pipeline.lua"), "w") as f:
        f.write(PIPELINE_LUA)

    server = os.path.join(build, "examples", "http_server")
    impls = {"gluon": [server, "--root", root, "--engine", "io_uring"],
             "gluon-epoll": [server, "--root", root, "--engine", "epoll"]}
    nginx_bin = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if nginx_bin:
        impls["nginx"] = None
    else:
        log("[http] nginx: not run (not installed)")
    floor = build_peer("http-c")
    floors = {"limit": floor}
    for name, binary in (("limit-uring", "http_floor"), ("limit-tls", "https_floor")):
        path = os.path.join(build, "bench", binary)
        floors[name] = path if os.access(path, os.X_OK) else None
    # The same certificate and key for every HTTPS server.
    cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # workload -> (path, wrk extra args, bytes of body per response, floors' canned body or None, TLS);
    # "h2" in the extra args: HTTP/2 through h2load instead of wrk.
    workloads = {
        "static-4k": ("/4k.bin", [], FILE_4K, FILE_4K, False),
        "hello-13b": ("/hello", [], BODY_SMALL, BODY_SMALL, False),
        "pipelined-16": ("/hello", ["pipeline"], BODY_SMALL, BODY_SMALL, False),
        "conn-close": ("/hello", ["-H", "Connection: close"], BODY_SMALL, BODY_SMALL, False),
        "file-1m": ("/1m.bin", [], FILE_1M, None, False),
        "https-4k": ("/4k.bin", [], FILE_4K, FILE_4K, True),
        "h2c-4k": ("/4k.bin", ["h2"], FILE_4K, None, False),
        "h2-tls-4k": ("/4k.bin", ["h2"], FILE_4K, None, True),
    }
    if not shutil.which("h2load"):
        log("[http] HTTP/2 rows: not run (h2load not installed: scripts/deps.sh bench)")
        workloads = {k: v for k, v in workloads.items() if "h2" not in v[1]}
    if quick or demo:
        keep = ("static-4k", "pipelined-16", "h2c-4k") if quick else ("static-4k", "hello-13b", "pipelined-16", "h2c-4k")
        workloads = {k: v for k, v in workloads.items() if k in keep}
    # The floors (not peers in the ratio column): the plain-C responders.
    if getattr(args, "only", None):
        workloads = {k: v for k, v in workloads.items() if args.only in k}
    proxied = not demo and (not getattr(args, "only", None) or args.only in proxy_suite.WORKLOAD)
    # A floor runs where its canned answer stands for the workload (limit-tls: the TLS ones only).
    applies = lambda n, canned, tls: canned is not None and tls == (n == "limit-tls")
    names = list(impls) + [n for n, path in floors.items()
                           if path and any(applies(n, w[3], w[4]) for w in workloads.values())]
    try:
        for i in range(runs):
            for wname, (path, extra, body, canned, tls) in workloads.items():
                for name in names:
                    if name in floors and not applies(name, canned, tls):
                        continue
                    log(f"[http] run {i + 1}/{runs}: {wname} on {name}")
                    ngx = None
                    if name == "nginx":
                        ngx = Nginx(root, (cert, key) if tls else None, h2="h2" in extra).start(nginx_bin)
                        port, pid = ngx.port, ngx.pids[0]
                        proc = None
                    else:
                        cmd = [floors[name], "--body", str(canned)] if name in floors else impls[name]
                        if tls:
                            cmd = cmd + ["--cert", cert, "--key", key]
                        proc, port = _start(cmd + ["--port", "0"])
                        pid = proc.pid
                    try:
                        if "h2" in extra:
                            r = _h2load(port, path, dur, pid, body, "https" if tls else "http")
                        else:
                            r = _wrk(port, path, dur, extra, work, pid, body, "https" if tls else "http")
                        if extra == ["pipeline"]:
                            r.update(_pipeline_latency(build, port, path, dur, pid, body))
                    finally:
                        if ngx:
                            ngx.cleanup()
                        else:
                            connrate._stop(proc)
                    res.add(wname, name, "req_per_cpu_s", r["per_cpu"], "higher")
                    res.add(wname, name, "req_per_s", r["rps"], "higher")
                    res.add(wname, name, "mb_per_s", r["mbps"], "higher")
                    if r["p50"] and r["p99"]:
                        res.add(wname, name, "p50_us", r["p50"] * 1e6, "lower")
                        res.add(wname, name, "p99_us", r["p99"] * 1e6, "lower")
        proxy_table = proxy_suite.run(args, res, build, log, root, nginx_bin, work) if proxied else ""
        if nginx_bin and not demo and (not getattr(args, "only", None) or args.only in "client"):
            _clients(build, root, nginx_bin, runs, dur, res, log)
        if not quick and not demo and (not getattr(args, "only", None) or args.only in "idle"):
            for name in [n for n in names if n not in floors]:
                log(f"[http] idle keep-alive connections on {name}")
                ngx = None
                if name == "nginx":
                    ngx = Nginx(root).start(nginx_bin)
                    port, pid, proc = ngx.port, ngx.pids[0], None
                else:
                    proc, port = _start(impls[name] + ["--port", "0"])
                    pid = proc.pid
                try:
                    # Measured once the connections have been idle for 2 s: a gluon connection
                    # gives its buffers back after 1 s (server_options::release_buffers_after).
                    kib, _ = idle.measure(pid, port, IDLE_CONNS, b"GET /hello HTTP/1.1\r\nHost: b\r\n\r\n",
                                          b"Hello, World!", settle_s=2.0)
                finally:
                    if ngx:
                        ngx.cleanup()
                    else:
                        connrate._stop(proc)
                res.add(f"idle-{IDLE_CONNS // 1000}k", name, "kib_per_conn", kib, "lower")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if demo:  # the short form: the headline, the rate and the tail
        return "\n".join(["requests per server CPU-second (the headline; ratio: gluon / nginx; limit: a "
                          "runtime-free C responder on epoll, limit-uring: on io_uring):", res.table("req_per_cpu_s", names), "",
                          "requests per second:", res.table("req_per_s", names), "",
                          "latency p99 (us):", res.table("p99_us", names)])
    out = ["requests per server CPU-second (the headline; ratio: gluon / nginx; limit, limit-uring, limit-tls: the plain-C responders on epoll, io_uring and OpenSSL):",
           res.table("req_per_cpu_s", names), "", "requests per second:", res.table("req_per_s", names), "",
           "MB/s read by the client:", res.table("mb_per_s", names), "",
           "latency p50 (us):", res.table("p50_us", names), "", "latency p99 (us):", res.table("p99_us", names)]
    if proxy_table:
        out += ["", proxy_table]
    if any(k[2] == "req_per_client_cpu_s" for k in res.cells):
        out += ["", "the client as a load generator against nginx (4 KiB file, 100 connections, one "
                "core): requests per client CPU-second (ratio: gluon's http_load / wrk):",
                res.table("req_per_client_cpu_s", ["gluon", "wrk"])]
    if not quick and not demo:
        out += ["", f"server memory per idle keep-alive connection ({IDLE_CONNS} held, KiB):",
                res.table("kib_per_conn", [n for n in names if n not in floors])]
    if not demo and not getattr(args, "only", None):
        out += ["", ws_suite.run(args, res, build, log, build_peer)]
    return "\n".join(out)
