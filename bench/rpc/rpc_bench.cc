// The gluon side of the RPC benchmark (B8), native RPC: an echo server and a load generator.
//
//   rpc_bench server [--port P]
//       echo server on 127.0.0.1 (port 0: any); prints its port as the first line of stdout,
//       serves until SIGTERM or SIGINT. One vCPU.
//   rpc_bench client --port P --conns C --callers N --payload BYTES --seconds S [--warmup S]
//                    [--cpu-pid PID]
//       C connections with N caller fibers each, every call an echo of BYTES patterned bytes
//       whose reply is compared byte for byte (received in place into the caller's buffer).
//       Prints one JSON line, as grpc_bench does: calls completed in the measured window
//       (after the warm-up), errors, the window, the server's CPU time over it (with
//       --cpu-pid, from /proc/PID/stat), calls per second and per server CPU-second, p50 and
//       p99 in us. Exits non-zero on any mismatch or failed call. One vCPU.
#include "../net/load_support.h"
#include "gluon/net/server.h"
#include "gluon/runtime/cli.h"
#include "gluon/rpc/rpc.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <signal.h>
#include <optional>
#include <string>
#include <vector>

using namespace gluon;
using namespace std::chrono_literals;

namespace {

struct echo_payload {
    rpc::bytes data;
    GLUON_RPC_FIELDS(data)
};
constexpr rpc::method<echo_payload, echo_payload> echo{1, 1, "echo"};

struct config {
    std::string mode;
    unsigned port = 0, conns = 1, callers = 1;
    int cpu_pid = 0;
    size_t payload = 64;
    duration seconds = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
};

constexpr const char* k_usage =
    "usage: rpc_bench server [--port P]\n"
    "       rpc_bench client --port P --conns C --callers N --payload BYTES --seconds S "
    "[--warmup S] [--cpu-pid PID]";

/// The configuration, or nullopt when the command line is wrong (the usage has been printed).
std::optional<config> parse(int argc, char** argv) {
    config c;
    cli::parser p(k_usage);
    p.option("--port", c.port).option("--conns", c.conns).option("--callers", c.callers);
    p.option("--payload", c.payload).option("--seconds", c.seconds).option("--warmup", c.warmup);
    p.option("--cpu-pid", c.cpu_pid);
    const std::string mode = argc > 1 ? argv[1] : "";
    const bool ok = p.parse(argc, argv, 2) && c.conns > 0 && c.callers > 0 && c.seconds > duration::zero();
    if (!ok || (mode != "server" && (mode != "client" || c.port == 0))) {
        p.usage();
        return std::nullopt;
    }
    c.mode = mode;
    return c;
}

result<void> serve(const config& c) {
    rpc::server srv;
    GLUON_TRY(srv.add_service(1, "bench"));
    GLUON_TRY(srv.add(
        echo, [](rpc::call_context&, const echo_payload& in, echo_payload& out) -> result<void> {
            out.data = rpc::bytes::view(in.data.data(), in.data.size()); // sent from the request
            return {};
        }));
    auto addr = GLUON_TRY(net::address::parse("127.0.0.1:" + std::to_string(c.port)));
    auto s = GLUON_TRY(net::server::start(addr, srv.handler()));
    std::printf("%u\n", unsigned(s->local_address().port()));
    std::fflush(stdout);
    (void)GLUON_TRY(wait_for_signals({SIGTERM, SIGINT}));
    s->stop(0s);
    return {};
}

struct caller_state {
    std::vector<uint32_t> lat_ns; // measured window only
    uint64_t calls = 0, errors = 0, mismatches = 0;
};

struct window {
    bool measuring = false, stop = false;
};

void caller(rpc::client& cl, const config& c, unsigned seed, const window& w, caller_state& st) {
    std::vector<uint8_t> out(c.payload), in(c.payload);
    for (size_t i = 0; i < c.payload; ++i)
        out[i] = uint8_t(i * 131 + seed * 17 + (i >> 8));
    echo_payload req, resp;
    req.data = rpc::bytes::view(out.data(), out.size());
    while (!w.stop) {
        std::memset(in.data(), 0, std::min<size_t>(in.size(), 64)); // a stale reply cannot pass
        resp.data.receive_into(in.data(), in.size());
        int64_t t0 = mono_now_ns();
        auto r = cl.call(echo, req, resp, {.timeout = 10s});
        int64_t t1 = mono_now_ns();
        if (!r) {
            if (st.errors++ == 0)
                std::fprintf(stderr, "rpc_bench client: %s\n", r.error().message().c_str());
            if (r.error() == rpc::errc::connection_closed) return;
            continue;
        }
        if (resp.data.size() != c.payload || resp.data.data() != in.data() ||
            std::memcmp(in.data(), out.data(), c.payload) != 0) {
            ++st.mismatches;
            continue;
        }
        if (w.measuring) {
            ++st.calls;
            st.lat_ns.push_back(uint32_t(std::min<int64_t>(t1 - t0, UINT32_MAX)));
        }
    }
}

result<int> load(const config& c) {
    auto addr = GLUON_TRY(net::address::parse("127.0.0.1:" + std::to_string(c.port)));
    std::vector<rpc::client> conns;
    for (unsigned i = 0; i < c.conns; ++i)
        conns.push_back(GLUON_TRY(rpc::client::connect(addr, {}, 5s)));
    std::vector<caller_state> st(size_t(c.conns) * c.callers);
    for (auto& s : st)
        s.lat_ns.reserve(size_t(std::chrono::duration<double>(c.seconds).count() * 1e6 / double(st.size())) + 1024);
    window w;
    std::vector<fiber> fs;
    for (unsigned i = 0; i < c.conns; ++i)
        for (unsigned k = 0; k < c.callers; ++k) {
            size_t idx = size_t(i) * c.callers + k;
            fs.push_back(
                GLUON_TRY(spawn([&, i, idx] { caller(conns[i], c, unsigned(idx), w, st[idx]); })));
        }
    (void)this_fiber::sleep_for(c.warmup);
    double cpu0 = c.cpu_pid ? bench_net::process_cpu_s(c.cpu_pid) : 0;
    int64_t t0 = mono_now_ns();
    w.measuring = true;
    (void)this_fiber::sleep_for(c.seconds);
    w.measuring = false;
    double wall = double(mono_now_ns() - t0) / 1e9;
    double server_cpu = c.cpu_pid ? bench_net::process_cpu_s(c.cpu_pid) - cpu0 : 0;
    w.stop = true;
    for (auto& f : fs)
        (void)f.join();
    uint64_t calls = 0, errors = 0, mismatches = 0;
    std::vector<uint32_t> all;
    for (auto& s : st) {
        calls += s.calls;
        errors += s.errors;
        mismatches += s.mismatches;
        all.insert(all.end(), s.lat_ns.begin(), s.lat_ns.end());
    }
    std::sort(all.begin(), all.end());
    auto pct = [&](double q) {
        return all.empty() ? 0.0 : all[size_t(double(all.size() - 1) * q)] / 1000.0;
    };
    std::printf("{\"calls\": %llu, \"errors\": %llu, \"seconds\": %.3f, \"wall_s\": %.3f, "
                "\"server_cpu_s\": %.3f, "
                "\"calls_per_s\": %.1f, \"calls_per_server_cpu_s\": %.1f, \"p50_us\": %.1f, "
                "\"p90_us\": %.1f, "
                "\"p99_us\": %.1f, \"p999_us\": %.1f, \"max_us\": %.1f}\n",
                (unsigned long long)calls, (unsigned long long)(errors + mismatches), wall, wall,
                server_cpu, double(calls) / wall, server_cpu > 0 ? double(calls) / server_cpu : 0.0,
                pct(0.5), pct(0.9), pct(0.99), pct(0.999), pct(1.0));
    std::fflush(stdout);
    if (mismatches)
        std::fprintf(stderr, "rpc_bench client: %llu replies differed from their request\n",
                     (unsigned long long)mismatches);
    for (auto& cl : conns)
        (void)cl.close();
    return (mismatches || errors) ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
    const auto parsed = parse(argc, argv);
    if (!parsed) return 2;
    const config& c = *parsed;
    int code = 0;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        if (c.mode == "server") return serve(c);
        code = GLUON_TRY(load(c));
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "rpc_bench: %s\n", r.error().message().c_str());
        return 1;
    }
    return code;
}
