// gluon's side of bench/run redis: N connections to a Redis server, each with one fiber sending
// GET or SET of a --size byte value, one command in flight per connection (as redis-benchmark
// -P 1 and the hiredis peer do). Every reply is checked: OK for SET, the value stored for GET.
//
//   redis_load --port P [--conns 50] [--op get|set] [--size 64] [--seconds 5] [--warmup 1]
//
// Prints one JSON line: calls and errors in the measured window, this process's CPU seconds in
// it (for calls per client CPU-second) and calls per second.
#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gluon/redis/client.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

int main(int argc, char** argv) {
    uint16_t port = 0;
    int conns = 50;
    std::string op = "get";
    size_t size = 64;
    duration secs = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
    init_options vcpu;
    vcpu.log_engine = false;
    cli::parser p("usage: redis_load --port P [--conns N] [--op get|set] [--size B] [--seconds S] [--warmup S] "
                  "[--engine io_uring|epoll]");
    p.option("--port", port).option("--conns", conns).option("--op", op).option("--size", size);
    p.option("--seconds", secs).option("--warmup", warmup).engine(vcpu);
    if (!p.parse(argc, argv) || port == 0 || conns < 1 || (op != "get" && op != "set")) return p.usage();
    bool measuring = false, stop = false;  // one vCPU: plain variables
    uint64_t calls = 0, errors = 0;
    std::string first_error;
    double wall = 0, cpu = 0;
    auto cpu_now = [] {
        rusage u{};
        ::getrusage(RUSAGE_SELF, &u);
        return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
    };
    auto r = run(vcpu, [&]() -> result<void> {
        redis::options o;
        o.port = port;
        std::vector<std::unique_ptr<redis::client>> clients;
        for (int i = 0; i < conns; ++i) clients.push_back(std::make_unique<redis::client>(o));
        std::vector<fiber> workers;
        for (int i = 0; i < conns; ++i)
            workers.push_back(GLUON_TRY(spawn([&, i] {
                redis::client& db = *clients[i];
                std::string key = "bench:" + std::to_string(i), value(size, static_cast<char>('a' + i % 26));
                auto fail = [&](std::string why) {
                    if (errors++ == 0) first_error = std::move(why);
                };
                if (!db.set(key, value)) return fail("SET failed");  // GET finds the value
                while (!stop) {
                    if (op == "set") {
                        auto s = db.command({"SET", key, value});
                        if (!s || s->str != "OK") return fail("SET: " + (s ? s->str : s.error().message()));
                    } else {
                        auto g = db.command({"GET", key});
                        if (!g || g->str != value) return fail("GET: " + (g ? std::string("wrong value") : g.error().message()));
                    }
                    if (measuring) ++calls;
                }
            })));
        (void)this_fiber::sleep_for(warmup);
        const int64_t t0 = mono_now_ns();
        const double c0 = cpu_now();
        measuring = true;
        (void)this_fiber::sleep_for(secs);
        measuring = false;
        wall = (mono_now_ns() - t0) / 1e9;
        cpu = cpu_now() - c0;
        stop = true;
        for (auto& w : workers) (void)w.join();
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "redis_load: %s\n", r.error().message().c_str());
        return 1;
    }
    std::printf("{\"calls\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"cpu_s\": %.3f, \"calls_per_s\": %.1f}\n",
                static_cast<unsigned long>(calls), static_cast<unsigned long>(errors), wall, cpu, calls / wall);
    if (errors) {
        std::fprintf(stderr, "redis_load: %lu failed; first: %s\n", static_cast<unsigned long>(errors), first_error.c_str());
        return 1;
    }
    return 0;
}
