"""Reverse proxy for bench/run http: gluon's examples/reverse_proxy against nginx configured as the
same reverse proxy, both in front of one nginx upstream serving a 4 KiB file.

wrk -t1 -c100 -> proxy -> upstream. The proxy is pinned to CPU 0, alone; wrk and the upstream
(nginx, one worker) share CPU 1. Both proxies keep up to 128 idle keep-alive connections to the
upstream, speak HTTP/1.1 to it, set X-Forwarded-For/-Proto/-Host and pass the client's Host on.
The metric is requests per proxy CPU-second (utime+stime of the proxy process over the run), with
requests/s and the proxy's CPU utilisation, which shows when the other core (client and upstream)
was the limit. Runs alternate; every run is verified as in http_suite (no errors, no non-2xx, the
body's bytes for every response).
"""
import os
import subprocess

import connrate  # bench/net/connrate.py: stopping servers
import http_suite

WORKLOAD = "proxy-4k"
KEEPALIVE = 128


class Upstream(http_suite.Nginx):
    """The upstream: http_suite's nginx, moved to CPU 1 (with wrk) once started."""

    def start(self, binary):
        super().start(binary)
        subprocess.run(["taskset", "-p", "-c", "1", str(self.pids[0])], check=True, stdout=subprocess.DEVNULL)
        return self


class ProxyNginx(connrate.Nginx):
    """nginx as a reverse proxy, one worker on CPU 0, as an nginx user would configure it."""

    def __init__(self, upstream_port):
        super().__init__(1)
        self.upstream_port = upstream_port

    def _write_conf(self):
        d = self.dir
        lines = ["master_process off;", "worker_processes 1;", f"pid {d}/nginx.pid;",
                 f"error_log {d}/error.log warn;", "worker_rlimit_nofile 20000;"]
        if os.geteuid() == 0:
            lines.append("user root root;")
        lines += ["events { worker_connections 8192; }", "http {", "  access_log off;",
                  "  keepalive_requests 10000000;", "  keepalive_timeout 60s;"]
        lines += [f"  {t}_temp_path {d}/tmp_{t};" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")]
        lines += [f"  upstream up {{ server 127.0.0.1:{self.upstream_port}; keepalive {KEEPALIVE};",
                  "    keepalive_requests 10000000; keepalive_timeout 60s; }",
                  f"  server {{ listen 127.0.0.1:{self.port} backlog=4096;",
                  "    location / { proxy_pass http://up; proxy_http_version 1.1;",
                  "      proxy_set_header Connection \"\"; proxy_set_header Host $http_host;",
                  "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
                  "      proxy_set_header X-Forwarded-Proto $scheme;",
                  "      proxy_set_header X-Forwarded-Host $http_host; } }", "}"]
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")


def run(args, res, build, log, root, nginx_bin, work):
    """Adds the proxy rows to res and returns their tables; root holds 4k.bin."""
    quick = args.quick
    dur = 1 if quick else 5
    runs = args.runs or (1 if quick else 5)
    if not nginx_bin:
        log("[http] reverse proxy: not run (nginx is not installed: it is the upstream)")
        return ""
    proxy = os.path.join(build, "examples", "reverse_proxy")
    names = ["gluon", "gluon-epoll", "nginx"]
    up = Upstream(root).start(nginx_bin)
    try:
        for i in range(runs):
            for name in names:
                log(f"[http] run {i + 1}/{runs}: {WORKLOAD} on {name}")
                ngx = proc = None
                if name == "nginx":
                    ngx = ProxyNginx(up.port).start(nginx_bin)
                    port, pid = ngx.port, ngx.pids[0]
                else:
                    engine = "epoll" if name.endswith("epoll") else "io_uring"
                    proc, port = http_suite._start([proxy, "--upstream", f"127.0.0.1:{up.port}", "--engine", engine,
                                                    "--keepalive", str(KEEPALIVE), "--port", "0"])
                    pid = proc.pid
                try:
                    r = http_suite._wrk(port, "/4k.bin", dur, [], work, pid, http_suite.FILE_4K)
                finally:
                    if ngx:
                        ngx.cleanup()
                    else:
                        connrate._stop(proc)
                res.add(WORKLOAD, name, "req_per_proxy_cpu_s", r["per_cpu"], "higher")
                res.add(WORKLOAD, name, "proxy_req_per_s", r["rps"], "higher")
                res.add(WORKLOAD, name, "proxy_cpu_util", r["util"], "none")
    finally:
        up.cleanup()
    return "\n".join([
        "reverse proxy (wrk -> proxy -> nginx upstream, 4 KiB file, 100 connections): requests per proxy "
        "CPU-second (ratio: gluon / nginx as the same reverse proxy):", res.table("req_per_proxy_cpu_s", names), "",
        "requests per second:", res.table("proxy_req_per_s", names), "",
        "proxy CPU utilisation (1.0: its core was the limit):", res.table("proxy_cpu_util", names)])
