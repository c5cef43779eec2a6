// A pipelining load generator that measures latency: N connections, each writing `depth` GET
// requests in one send and reading their `depth` answers before it sends again (what wrk does
// with a pipelining Lua script). wrk's latency histogram is empty above its median at these
// rates, so the pipelined workload's p50/p99 come from here. A request's latency runs from the
// send of its batch to the arrival of its answer's last byte. Every answer is parsed with gluon's
// strict response parser and checked (status 200, Content-Length framing, the expected body size
// if given); a run with a bad answer fails.
//
//   pipeline_load --addr 127.0.0.1:PORT --path /hello [--depth 16] [--conns 100]
//                 [--duration 5] [--warmup 1] [--expect-bytes N] [--cpu-pid PID] [--json]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../net/load_support.h"
#include "gluon/http/parser.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

struct options {
    std::string addr, path = "/";
    int depth = 16, conns = 100, cpu_pid = 0;
    gluon::duration duration = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
    long expect_bytes = -1;
    bool json = false;
};

struct conn_stats {
    uint64_t requests = 0;
    std::vector<uint32_t> lat_ns;
    std::string error;
};

// One connection's loop: send a batch, read its answers, record their latencies while measuring.
void drive(const options& o, const net::address& to, const std::string& batch, const std::atomic<bool>& measuring,
           const std::atomic<bool>& stop, conn_stats& st) {
    auto s = net::stream::connect(to);
    if (!s) {
        st.error = "connect: " + s.error().message();
        return;
    }
    std::vector<char> buf(64 * 1024);
    size_t off = 0, have = 0;  // unread answers are buf[off, have)
    http::header fields[32];
    http::limits lim{.max_head_bytes = 8192, .max_headers = 32};
    while (!stop) {
        const int64_t sent = mono_now_ns();
        if (auto w = s->write_all(batch.data(), batch.size()); !w) {
            st.error = "send: " + w.error().message();
            return;
        }
        for (int answered = 0; answered < o.depth;) {
            http::response_head h;
            h.headers = fields;
            size_t scanned = 0;
            auto p = http::parse_response({buf.data() + off, have - off}, h, lim, scanned);
            if (p.state == http::parse_result::complete && h.body == http::framing::length &&
                p.consumed + h.content_length <= have - off) {
                if (h.status != 200 || (o.expect_bytes >= 0 && h.content_length != uint64_t(o.expect_bytes))) {
                    st.error = "answer: status " + std::to_string(h.status) + ", " +
                               std::to_string(h.content_length) + " bytes";
                    return;
                }
                off += p.consumed + h.content_length;
                ++answered;
                if (measuring) {
                    ++st.requests;
                    st.lat_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(mono_now_ns() - sent, UINT32_MAX)));
                }
                continue;
            }
            if (p.state == http::parse_result::invalid ||
                (p.state == http::parse_result::complete && h.body != http::framing::length)) {
                st.error = std::string("answer not understood: ") +
                           (p.state == http::parse_result::invalid ? p.why : "not Content-Length framed");
                return;
            }
            std::memmove(buf.data(), buf.data() + off, have - off);
            have -= off;
            off = 0;
            if (have == buf.size()) buf.resize(buf.size() * 2);
            auto n = s->read_some(buf.data() + have, buf.size() - have);
            if (!n || *n == 0) {
                st.error = n ? "the server closed the connection" : "recv: " + n.error().message();
                return;
            }
            have += *n;
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    cli::parser p("usage: pipeline_load --addr IP:PORT [--path P] [--depth N] [--conns N] [--duration S] "
                  "[--warmup S] [--expect-bytes N] [--cpu-pid PID] [--json]");
    p.option("--addr", o.addr).option("--path", o.path).option("--depth", o.depth).option("--conns", o.conns);
    p.option("--duration", o.duration).option("--warmup", o.warmup).option("--expect-bytes", o.expect_bytes);
    p.option("--cpu-pid", o.cpu_pid).flag("--json", o.json);
    if (!p.parse(argc, argv)) return p.usage();
    auto to = net::address::parse(o.addr);
    if (!to || o.depth < 1 || o.conns < 1 || o.duration <= gluon::duration::zero()) return p.usage();
    bench_net::raise_fd_limit(o.conns);

    std::string batch;
    for (int i = 0; i < o.depth; ++i) batch += "GET " + o.path + " HTTP/1.1\r\nHost: " + o.addr + "\r\n\r\n";

    std::atomic<bool> measuring{false}, stop{false};
    std::vector<conn_stats> stats(static_cast<size_t>(o.conns));
    double wall = 0, server_cpu = 0;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        std::vector<fiber> workers;
        for (auto& st : stats)
            workers.push_back(GLUON_TRY(spawn([&] { drive(o, *to, batch, measuring, stop, st); })));
        (void)this_fiber::sleep_for(o.warmup);
        const double c0 = o.cpu_pid ? bench_net::process_cpu_s(o.cpu_pid) : 0;
        const int64_t t0 = mono_now_ns();
        measuring = true;
        (void)this_fiber::sleep_for(o.duration);
        measuring = false;
        wall = double(mono_now_ns() - t0) / 1e9;
        server_cpu = o.cpu_pid ? bench_net::process_cpu_s(o.cpu_pid) - c0 : 0;
        stop = true;
        for (auto& w : workers) (void)w.join();
        return {};
    });
    if (!r) bench_net::fail("%s", r.error().message().c_str());
    uint64_t requests = 0;
    std::vector<uint32_t> all;
    for (auto& st : stats) {
        if (!st.error.empty()) bench_net::fail("%s", st.error.c_str());
        requests += st.requests;
        all.insert(all.end(), st.lat_ns.begin(), st.lat_ns.end());
    }
    if (all.empty()) bench_net::fail("no answers while measuring");
    std::sort(all.begin(), all.end());
    auto pct = [&](double q) { return all[size_t(double(all.size() - 1) * q)] / 1000.0; };
    const double rps = double(requests) / wall, per_cpu = server_cpu > 0 ? double(requests) / server_cpu : 0;
    if (o.json)
        std::printf("{\"requests\": %llu, \"wall_s\": %.3f, \"server_cpu_s\": %.3f, \"req_per_s\": %.1f, "
                    "\"req_per_server_cpu_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
                    (unsigned long long)requests, wall, server_cpu, rps, per_cpu, pct(0.5), pct(0.99), pct(1.0));
    else
        std::printf("%llu requests in %.2fs: %.0f/s, %.0f per server CPU-second, p50 %.1f us, p99 %.1f us\n",
                    (unsigned long long)requests, wall, rps, per_cpu, pct(0.5), pct(0.99));
    return 0;
}
