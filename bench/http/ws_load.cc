// A WebSocket load generator built on gluon's client: N connections, each a fiber sending
// --depth binary messages of --size bytes and then reading their echoes (depth 1: ping-pong;
// more: pipelined), for a duration after a warm-up. Every echo is checked byte for byte. With
// --cpu-pid it reads the server's CPU time over the measured window and reports messages per
// server CPU-second.
//
//   ws_load --url ws://HOST:PORT/PATH [--conns 100] [--size 512] [--depth 1] [--duration 5]
//           [--warmup 1] [--cpu-pid PID] [--json]
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../net/load_support.h"
#include "gluon/http/websocket.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

}  // namespace

int main(int argc, char** argv) {
    std::string url;
    int conns = 100, cpu_pid = 0, depth = 1;
    size_t size = 512;
    gluon::duration duration = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
    bool json = false;
    cli::parser p("usage: ws_load --url URL [--conns N] [--size B] [--depth N] [--duration S] [--warmup S] "
                  "[--cpu-pid PID] [--json]");
    p.option("--url", url).option("--conns", conns).option("--size", size).option("--depth", depth);
    p.option("--duration", duration).option("--warmup", warmup).option("--cpu-pid", cpu_pid).flag("--json", json);
    if (!p.parse(argc, argv) || url.empty() || conns < 1 || depth < 1 || duration <= gluon::duration::zero())
        return p.usage();
    bench_net::raise_fd_limit(conns);

    std::atomic<bool> measuring{false}, stop{false};
    uint64_t done = 0, errors = 0;  // one vCPU: plain counters
    std::string first_error;
    double wall = 0, server_cpu = 0;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        std::vector<fiber> workers;
        for (int i = 0; i < conns; ++i) {
            workers.push_back(GLUON_TRY(spawn([&, i] {
                auto fail = [&](const std::string& why) {
                    if (errors++ == 0) first_error = why;
                };
                auto ws = http::websocket::connect(url);
                if (!ws) return fail("connect: " + ws.error().message());
                std::string payload(size, '\0');
                for (size_t k = 0; k < size; ++k) payload[k] = static_cast<char>(i * 31 + k * 7);
                http::websocket::message m;
                while (!stop) {
                    for (int k = 0; k < depth; ++k) {
                        auto s = ws->send_binary(payload, std::chrono::seconds(10));
                        if (!s) return fail("send: " + s.error().message());
                    }
                    for (int k = 0; k < depth; ++k) {
                        auto got = ws->recv(m, std::chrono::seconds(10));
                        if (!got) return fail("recv: " + got.error().message());
                        if (m.data != payload || m.is_text()) return fail("echo differs from the message sent");
                        if (measuring) ++done;
                    }
                }
                (void)ws->close(http::close_code::normal, {}, std::chrono::seconds(5));
            })));
        }
        (void)this_fiber::sleep_for(warmup);
        const double c0 = cpu_pid ? bench_net::process_cpu_s(cpu_pid) : 0;
        const int64_t t0 = mono_now_ns();
        measuring = true;
        (void)this_fiber::sleep_for(duration);
        measuring = false;
        wall = (mono_now_ns() - t0) / 1e9;
        server_cpu = cpu_pid ? bench_net::process_cpu_s(cpu_pid) - c0 : 0;
        stop = true;
        for (auto& w : workers) (void)w.join();
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "ws_load: %s\n", r.error().message().c_str());
        return 1;
    }
    const double rate = done / wall, per_cpu = server_cpu > 0 ? done / server_cpu : 0;
    if (json)
        std::printf("{\"messages\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"server_cpu_s\": %.3f, "
                    "\"msg_per_s\": %.1f, \"msg_per_server_cpu_s\": %.1f}\n",
                    static_cast<unsigned long>(done), static_cast<unsigned long>(errors), wall, server_cpu, rate,
                    per_cpu);
    else
        std::printf("%lu messages in %.2fs: %.0f/s, %.0f per server CPU-second, %lu errors\n",
                    static_cast<unsigned long>(done), wall, rate, per_cpu, static_cast<unsigned long>(errors));
    if (errors) {
        std::fprintf(stderr, "ws_load: %lu connections failed (first: %s)\n", static_cast<unsigned long>(errors),
                     first_error.c_str());
        return 1;
    }
    return 0;
}
