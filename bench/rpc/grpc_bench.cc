// gluon's side of the gRPC rows of bench/run rpc (B8): an echo server on gluon's gRPC server,
// and the load generator every server is measured with (gluon's gRPC client).
//
//   grpc_bench server [--port P]
//       Serves /gluon.bench.Bench/Echo (a google.protobuf.BytesValue back) over h2c on
//       127.0.0.1; prints its port first, serves until SIGTERM or SIGINT.
//   grpc_bench client --port P [--conns 1] [--callers 64] [--payload 64] [--seconds 5]
//                     [--warmup 1] [--cpu-pid PID]
//       --conns connections (a channel each), --callers fibers per connection, each calling Echo
//       in a loop with a payload of --payload bytes that differs per call; every reply is
//       checked byte for byte. Prints one JSON line: calls and errors in the measured window,
//       calls per second, calls per server CPU-second (with --cpu-pid), p50 and p99 in us.
//       Exits 1 if any call failed or any reply differed.
#include <google/protobuf/wrappers.pb.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../net/load_support.h"
#include "gluon/http/server.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using google::protobuf::BytesValue;
namespace grpc = gluon::rpc::grpc;

namespace {

constexpr const char* k_method = "/gluon.bench.Bench/Echo";


int serve(uint16_t port) {
    grpc::server g;
    g.add(k_method, grpc::unary<BytesValue, BytesValue>([](grpc::server_context&, const BytesValue& req, BytesValue& resp) {
              resp.set_value(req.value());
              return grpc::status{};
          }));
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        auto s = GLUON_TRY(http::server::start(net::address::ipv4_loopback(port), g.as_handler()));
        std::printf("%u\n", s->local_address().port());
        std::fflush(stdout);
        (void)wait_for_signals({SIGINT, SIGTERM});
        s->stop(std::chrono::seconds(1));
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "grpc_bench server: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}

struct load {
    uint16_t port = 0;
    int conns = 1, callers = 64, cpu_pid = 0;
    size_t payload = 64;
    gluon::duration secs = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
};

int drive(const load& l) {
    bench_net::raise_fd_limit(l.conns);
    bool measuring = false, stop = false;  // one vCPU: plain variables
    uint64_t calls = 0, errors = 0;
    std::string first_error;
    std::vector<int64_t> lat;  // ns, measured calls
    double wall = 0, server_cpu = 0;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        std::vector<std::unique_ptr<grpc::channel>> chans;
        for (int c = 0; c < l.conns; ++c) chans.push_back(std::make_unique<grpc::channel>("127.0.0.1", l.port));
        std::vector<fiber> workers;
        for (int c = 0; c < l.conns; ++c)
            for (int k = 0; k < l.callers; ++k)
                workers.push_back(GLUON_TRY(spawn([&, c, k] {
                    BytesValue req, resp;
                    std::string& p = *req.mutable_value();
                    p.assign(l.payload, '\0');
                    for (size_t i = 0; i < l.payload; ++i) p[i] = static_cast<char>(c * 131 + k * 31 + i * 7);
                    for (uint64_t n = 0; !stop; ++n) {
                        std::memcpy(p.data(), &n, std::min(sizeof n, p.size()));  // each call's own bytes
                        int64_t t0 = mono_now_ns();
                        grpc::status s = grpc::unary(*chans[c], k_method, req, resp);
                        int64_t t1 = mono_now_ns();
                        if (!s.ok() || resp.value() != p) {
                            if (errors++ == 0)
                                first_error = s.ok() ? "reply differs from the request" : grpc::code_name(s.code) + (": " + s.message);
                            return;
                        }
                        if (measuring) {
                            ++calls;
                            lat.push_back(t1 - t0);
                        }
                    }
                })));
        (void)this_fiber::sleep_for(l.warmup);
        const double c0 = l.cpu_pid ? bench_net::process_cpu_s(l.cpu_pid) : 0;
        const int64_t t0 = mono_now_ns();
        measuring = true;
        (void)this_fiber::sleep_for(l.secs);
        measuring = false;
        wall = (mono_now_ns() - t0) / 1e9;
        server_cpu = l.cpu_pid ? bench_net::process_cpu_s(l.cpu_pid) - c0 : 0;
        stop = true;
        for (auto& w : workers) (void)w.join();
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "grpc_bench client: %s\n", r.error().message().c_str());
        return 1;
    }
    std::sort(lat.begin(), lat.end());
    auto pct = [&](double q) { return lat.empty() ? 0.0 : lat[static_cast<size_t>(q * (lat.size() - 1))] / 1e3; };
    std::printf("{\"calls\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"server_cpu_s\": %.3f, \"calls_per_s\": %.1f, "
                "\"calls_per_server_cpu_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
                static_cast<unsigned long>(calls), static_cast<unsigned long>(errors), wall, server_cpu, calls / wall,
                server_cpu > 0 ? calls / server_cpu : 0.0, pct(0.5), pct(0.99));
    if (errors) {
        std::fprintf(stderr, "grpc_bench client: %lu failed calls; first: %s\n", static_cast<unsigned long>(errors),
                     first_error.c_str());
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    load l;
    cli::parser p("usage: grpc_bench server [--port P]\n"
                  "       grpc_bench client --port P [--conns N] [--callers N] [--payload B] [--seconds S] "
                  "[--warmup S] [--cpu-pid PID]");
    p.option("--port", l.port).option("--conns", l.conns).option("--callers", l.callers);
    p.option("--payload", l.payload).option("--seconds", l.secs).option("--warmup", l.warmup);
    p.option("--cpu-pid", l.cpu_pid);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (!p.parse(argc, argv, 2)) return p.usage();
    if (mode == "server") return serve(l.port);
    if (mode != "client" || l.port == 0 || l.conns < 1 || l.callers < 1 || l.secs <= gluon::duration::zero())
        return p.usage();
    return drive(l);
}
