// Fetches URLs concurrently, one fiber per URL, all on one vCPU (one OS thread): each fiber
// writes plain blocking code and libcurl's transfers share the vCPU's event engine.
//
//   curl_fetch [--engine io_uring|epoll] [--timeout SECONDS] URL...
//
// Prints one line per URL (status, bytes, time) in the order they finish, then a total.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "gluon/net/curl.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct outcome {
    bool ok = false;
    size_t bytes = 0;
};

outcome fetch(const std::string& url, duration timeout) {
    const auto t0 = clock_type::now();
    net::curl::request_options opts;
    opts.timeout = timeout;
    opts.follow_redirects = true;
    auto r = net::curl::get(url, opts);
    if (!r) {
        // Connection refused, DNS failure, timeout, ...: a curl or errno error with its message.
        std::printf("%-8s %10s %9.1f ms  %s  (%s)\n", "error", "-", ms_since(t0), url.c_str(),
                    r.error().message().c_str());
        return {};
    }
    std::printf("%-8ld %10zu %9.1f ms  %s\n", r->status, r->body.size(), ms_since(t0), url.c_str());
    return {r->status < 400, r->body.size()};
}

// Fetches every URL in its own fiber; true if all succeeded.
result<bool> fetch_all(const std::vector<std::string>& urls, duration timeout) {
    std::printf("%-8s %10s %12s  %s\n", "status", "bytes", "time", "url");
    const auto t0 = clock_type::now();
    std::vector<outcome> results(urls.size());
    std::vector<fiber> fibers;
    for (size_t i = 0; i < urls.size(); ++i)
        fibers.push_back(GLUON_TRY(spawn([&, i] { results[i] = fetch(urls[i], timeout); })));
    for (auto& f : fibers)
        (void)f.join();

    size_t ok = 0, bytes = 0;
    for (const auto& r : results) {
        ok += r.ok;
        bytes += r.bytes;
    }
    std::printf("%zu/%zu ok, %zu bytes in %.1f ms\n", ok, urls.size(), bytes, ms_since(t0));
    return ok == urls.size();
}

} // namespace

int main(int argc, char** argv) {
    init_options opts;
    duration timeout = std::chrono::seconds(30);
    std::vector<std::string> urls;
    cli::parser p("usage: curl_fetch [--engine io_uring|epoll] [--timeout SECONDS] URL...");
    p.engine(opts).option("--timeout", timeout).positional(urls);
    if (!p.parse(argc, argv) || urls.empty()) return p.usage();
    opts.log_engine = false;
    // The vCPU (and with it the curl driver and its cached connections) ends with fetch_all.
    auto ok = run(opts, [&] { return fetch_all(urls, timeout); });
    if (!ok) std::fprintf(stderr, "curl_fetch: %s\n", ok.error().message().c_str());
    return ok && *ok ? 0 : 1;
}
