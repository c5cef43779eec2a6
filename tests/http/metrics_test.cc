// The Prometheus metrics handler: its text is parsed by an independent parser
// (python3-prometheus-client, tests/http/prom_check.py), and the runtime counters under it
// move as work is done.
#include "gluon/http/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "gluon/http/client.h"
#include "gluon/http/router.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/stats.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;

const std::string& python_with_prometheus() {
    static const std::string found = [] {
        for (std::string p : {std::string("/usr/bin/python3"), test::find_program("python3")}) {
            if (p.empty()) continue;
            test::child c({p, "-c", "import prometheus_client"});
            if (c.started() && c.wait(30s) == 0) return p;
        }
        return std::string();
    }();
    return found;
}

class http_metrics_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(http_metrics_test);

TEST_P(http_metrics_test, runtime_counters_move) {
    auto before = vcpu_statistics();
    ASSERT_FALSE(before.empty());
    int me = current_vcpu_index();
    const vcpu_stats* b = nullptr;
    for (auto& v : before)
        if (v.index == me) b = &v;
    ASSERT_NE(b, nullptr);
    auto f = gluon::spawn([] { (void)this_fiber::sleep_for(1ms); });
    ASSERT_TRUE(f);
    (void)f->join();
    auto after = vcpu_statistics();
    for (auto& a : after) {
        if (a.index != me) continue;
        EXPECT_EQ(a.fibers_created, b->fibers_created + 1);
        EXPECT_EQ(a.fibers_live, b->fibers_live);
        EXPECT_GE(a.uptime_ns, b->uptime_ns);
        EXPECT_LE(a.busy_ns, a.uptime_ns);
        EXPECT_STREQ(a.engine, engine::kind_name(GetParam()));
    }
}

// The busy time grows by the CPU the vCPU spends and not by the time it sleeps.
TEST_P(http_metrics_test, busy_time_is_the_cpu_the_vcpu_spent) {
    const int me = current_vcpu_index();
    auto busy = [me] {
        for (auto& v : vcpu_statistics())
            if (v.index == me) return static_cast<int64_t>(v.busy_ns);
        return int64_t{-1};
    };
    auto thread_cpu = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
    };
    const int64_t b0 = busy();
    ASSERT_GE(b0, 0);
    for (const int64_t c0 = thread_cpu(); thread_cpu() - c0 < 30'000'000;) {
    }
    const int64_t b1 = busy();
    EXPECT_GE(b1 - b0, 30'000'000);
    ASSERT_TRUE(this_fiber::sleep_for(100ms));
    EXPECT_LT(busy() - b1, 50'000'000);  // asleep in the engine: no CPU
}

TEST_P(http_metrics_test, prometheus_text_parses_with_an_independent_parser) {
    GLUON_REQUIRE_PEER(!python_with_prometheus().empty(), "no python3 with prometheus_client (python3-prometheus-client)");
    router routes;
    routes.get("/hello", [](request&, response& res) { res.body("hi"); });
    routes.get("/metrics", metrics_handler());
    auto srv = server::start(net::address::ipv4_loopback(0), routes.as_handler());
    ASSERT_TRUE(srv);
    const std::string base = "http://127.0.0.1:" + std::to_string((*srv)->local_address().port());
    client c;
    for (int i = 0; i < 5; ++i) ASSERT_EQ(c.get(base + "/hello")->status, 200);
    ASSERT_EQ(c.get(base + "/missing")->status, 404);
    auto m = c.get(base + "/metrics");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->status, 200);
    EXPECT_EQ(m->header("Content-Type").substr(0, 10), "text/plain");
    const std::string file = ::testing::TempDir() + "metrics_" + std::to_string(::getpid()) + ".txt";
    std::ofstream(file) << m->body;
    const std::string out = file + ".out";
    test::child check({python_with_prometheus(), std::string(GLUON_TESTS_DIR) + "/http/prom_check.py", file, "5", "1"},
                      "/dev/null", out);
    ASSERT_TRUE(check.started());
    int rc = check.wait(60s);
    std::stringstream why;
    why << std::ifstream(out).rdbuf() << std::ifstream(out + ".err").rdbuf();
    EXPECT_EQ(rc, 0) << why.str() << "\n" << m->body;
    for (const std::string& p : {file, out, out + ".err"}) std::remove(p.c_str());
}

}  // namespace
}  // namespace gluon::http
