#!/usr/bin/env python3
"""Checks gluon's metrics text (file argv[1]) with an independent parser (prometheus_client):
every family present with its type, and values that make sense. Expects at least argv[2]
2xx and argv[3] 4xx responses. Prints each problem; exit 1 if any."""
import sys

from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1]).read()
min_2xx, min_4xx = int(sys.argv[2]), int(sys.argv[3])
fams = {f.name: f for f in text_string_to_metric_families(text)}
problems = []

want = {
    "gluon_fibers_live": "gauge", "gluon_fibers_created": "counter", "gluon_run_queue_length": "gauge",
    "gluon_vcpu_busy_seconds": "counter", "gluon_vcpu_uptime_seconds": "counter",
    "gluon_engine_operations": "counter", "gluon_engine_errors": "counter",
    "gluon_received_bytes": "counter", "gluon_sent_bytes": "counter",
    "gluon_http_connections_open": "gauge", "gluon_http_connections": "counter",
    "gluon_http_responses": "counter",
}
for name, typ in want.items():
    if name not in fams:
        problems.append(f"missing family {name}")
    elif fams[name].type != typ:
        problems.append(f"{name} is a {fams[name].type}, not a {typ}")


def by_vcpu(name):
    return {s.labels["vcpu"]: s.value for s in fams[name].samples if s.name.endswith("_total") or fams[name].type == "gauge"}


if not problems:
    live, created = by_vcpu("gluon_fibers_live"), by_vcpu("gluon_fibers_created")
    busy, up = by_vcpu("gluon_vcpu_busy_seconds"), by_vcpu("gluon_vcpu_uptime_seconds")
    ops, errs = by_vcpu("gluon_engine_operations"), by_vcpu("gluon_engine_errors")
    rx, tx = by_vcpu("gluon_received_bytes"), by_vcpu("gluon_sent_bytes")
    if not live:
        problems.append("no vCPU listed")
    for v in live:
        if not 1 <= live[v] <= created[v]:
            problems.append(f"vCPU {v}: {live[v]} live fibers of {created[v]} created")
        if not 0 <= busy[v] <= up[v] or up[v] <= 0:
            problems.append(f"vCPU {v}: busy {busy[v]} s of {up[v]} s")
        if ops[v] <= 0 or not 0 <= errs[v] <= ops[v]:
            problems.append(f"vCPU {v}: {errs[v]} errors of {ops[v]} operations")
        if rx[v] <= 0 or tx[v] <= 0:
            problems.append(f"vCPU {v}: {rx[v]} bytes in, {tx[v]} out")
    for s in fams["gluon_run_queue_length"].samples:
        if s.value < 0:
            problems.append(f"negative run queue {s}")
    opened = [s.value for s in fams["gluon_http_connections"].samples if s.name == "gluon_http_connections_total"]
    is_open = fams["gluon_http_connections_open"].samples[0].value
    if not opened or not 1 <= is_open <= opened[0]:
        problems.append(f"{is_open} connections open of {opened}")
    classes = {s.labels["class"]: s.value for s in fams["gluon_http_responses"].samples if s.name.endswith("_total")}
    if set(classes) != {"1xx", "2xx", "3xx", "4xx", "5xx", "other"}:
        problems.append(f"status classes {sorted(classes)}")
    elif classes["2xx"] < min_2xx or classes["4xx"] < min_4xx:
        problems.append(f"responses {classes}, want >= {min_2xx} 2xx and >= {min_4xx} 4xx")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
