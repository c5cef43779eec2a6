// A load generator built on gluon's HTTP client: N fibers, each with its own client (so one
// kept-alive connection each), sending GET requests for a duration; every answer is checked
// (status 200, and the body's size if --expect-bytes is given). The clients keep their default
// options, as an application's would; a request one of them had to send again (a retry) fails
// the run, so nothing is hidden. Each fiber sends one request object again and again into one
// response object (client::send(req, out, on_body)), as a loop should; bodies are counted and
// dropped, as wrk does. Compared with wrk in requests per client CPU-second.
//
//   http_load --url URL [--conns 100] [--duration 5] [--warmup 1] [--expect-bytes N] [--json]
#include <sys/resource.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gluon/http/client.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

double cpu_seconds() {
    rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
    std::string url;
    int conns = 100;
    gluon::duration duration = std::chrono::seconds(5), warmup = std::chrono::seconds(1);
    long expect_bytes = -1;
    bool json = false;
    cli::parser p("usage: http_load --url URL [--conns N] [--duration S] [--warmup S] [--expect-bytes N] [--json]");
    p.option("--url", url).option("--conns", conns).option("--duration", duration).option("--warmup", warmup);
    p.option("--expect-bytes", expect_bytes).flag("--json", json);
    if (!p.parse(argc, argv) || url.empty() || conns < 1 || duration <= gluon::duration::zero()) return p.usage();

    std::atomic<bool> measuring{false}, stop{false};
    std::atomic<uint64_t> done{0}, errors{0}, retries{0};
    std::string first_error;
    double wall = 0, cpu = 0;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        std::vector<fiber> workers;
        for (int i = 0; i < conns; ++i) {
            workers.push_back(GLUON_TRY(spawn([&] {
                http::client c;
                http::client_request req;
                req.url = url;
                http::client_response out;
                // Bodies are counted and dropped, as wrk does: out.body_length says how long.
                auto count = [](std::string_view) { return true; };
                const std::function<bool(std::string_view)> on_body = count;
                while (!stop) {
                    auto res = c.send(req, out, on_body);
                    bool ok = res && out.status == 200 &&
                              (expect_bytes < 0 || out.body_length == static_cast<uint64_t>(expect_bytes));
                    if (!measuring) continue;
                    if (ok) {
                        ++done;
                    } else {
                        if (errors++ == 0)
                            first_error = res ? "status " + std::to_string(out.status) + ", " +
                                                    std::to_string(out.body_length) + " bytes"
                                              : res.error().message();
                    }
                }
                retries += c.statistics().retries;
            })));
        }
        (void)this_fiber::sleep_for(warmup);
        measuring = true;
        int64_t t0 = mono_now_ns();
        double c0 = cpu_seconds();
        (void)this_fiber::sleep_for(duration);
        measuring = false;
        wall = (mono_now_ns() - t0) / 1e9;
        cpu = cpu_seconds() - c0;
        stop = true;
        for (auto& w : workers) (void)w.join();
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "http_load: %s\n", r.error().message().c_str());
        return 1;
    }
    double rps = done / wall, per_cpu = cpu > 0 ? done / cpu : 0;
    if (json)
        std::printf("{\"requests\": %lu, \"errors\": %lu, \"wall_s\": %.3f, \"client_cpu_s\": %.3f, "
                    "\"req_per_s\": %.1f, \"req_per_cpu_s\": %.1f}\n",
                    static_cast<unsigned long>(done.load()), static_cast<unsigned long>(errors.load()), wall, cpu,
                    rps, per_cpu);
    else
        std::printf("%lu requests in %.2fs: %.0f/s, %.0f per client CPU-second, %lu errors\n",
                    static_cast<unsigned long>(done.load()), wall, rps, per_cpu,
                    static_cast<unsigned long>(errors.load()));
    if (retries) {
        std::fprintf(stderr, "http_load: %lu requests were sent again after their connection failed\n",
                     static_cast<unsigned long>(retries.load()));
        return 1;
    }
    if (errors) {
        std::fprintf(stderr, "http_load: %lu failed requests (first: %s)\n",
                     static_cast<unsigned long>(errors.load()), first_error.c_str());
        return 1;
    }
    return 0;
}
