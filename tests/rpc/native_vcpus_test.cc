// The native RPC on a runtime of several vCPUs: one rpc::server behind a sharded listener serves
// connections on every vCPU at once (its method table is shared, its counters add up), and a
// client connection refuses calls from a vCPU other than its own.
#include "gluon/net/sharded_server.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/semaphore.h"
#include "native_messages.h"
#include "test_support.h"

#include <atomic>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace gluon::rpc::testing {
namespace {

using namespace std::chrono_literals;

class rpc_vcpus : public ::testing::TestWithParam<engine::kind> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam()))
            GTEST_SKIP() << engine::kind_name(GetParam()) << " not available";
        ASSERT_TRUE(
            srv_.add(echo, [](call_context&, const echo_msg& in, echo_msg& out) -> result<void> {
                out.seq = in.seq;
                out.payload = bytes::view(in.payload.data(), in.payload.size());
                return {};
            }));
        auto rt = runtime::start(test::test_runtime(2, GetParam()));
        ASSERT_TRUE(rt);
        rt_ = std::move(*rt);
    }

    server srv_;
    std::unique_ptr<runtime> rt_;
};

TEST_P(rpc_vcpus, one_server_serves_connections_on_every_vcpu) {
    auto sh = net::sharded_server::start(*rt_, net::address::ipv4_loopback(0), srv_.handler());
    ASSERT_TRUE(sh) << sh.error().message();
    constexpr int k_conns = 4, k_fibers = 8, k_calls = 50;
    std::atomic<int> good{0}, bad{0};
    latch done(rt_->size());
    for (unsigned v = 0; v < rt_->size(); ++v) {
        ASSERT_TRUE(rt_->post(v, [&] {
            std::vector<fiber> fs;
            for (int c = 0; c < k_conns; ++c) {
                auto cl = client::connect((*sh)->local_address(), {}, 5s);
                if (!cl) {
                    bad += k_fibers * k_calls;
                    continue;
                }
                for (int f = 0; f < k_fibers; ++f) {
                    fs.push_back(*spawn([&, cl = *cl, f]() mutable {
                        std::string data(size_t(100 + f), char('a' + f));
                        for (int i = 0; i < k_calls; ++i) {
                            echo_msg req, resp;
                            req.seq = uint64_t(f * 1000 + i);
                            req.payload = bytes::view(data.data(), data.size());
                            bool ok = cl.call(echo, req, resp, {.timeout = 10s}) &&
                                      resp.seq == req.seq && resp.payload.str() == data;
                            (ok ? good : bad)++;
                        }
                    }));
                }
            }
            for (auto& f : fs)
                (void)f.join();
            done.count_down();
        }));
    }
    ASSERT_TRUE(done.wait(60s)); // this thread is not a vCPU: it blocks
    const int total = int(rt_->size()) * k_conns * k_fibers * k_calls;
    EXPECT_EQ(good.load(), total);
    EXPECT_EQ(bad.load(), 0);
    (*sh)->stop(5s); // connections end: their call counts are added
    EXPECT_EQ(srv_.stats().calls, uint64_t(total));
}

TEST_P(rpc_vcpus, a_client_is_used_from_its_own_vcpu_only) {
    auto sh = net::sharded_server::start(*rt_, net::address::ipv4_loopback(0), srv_.handler());
    ASSERT_TRUE(sh) << sh.error().message();
    client cl;
    ASSERT_TRUE(rt_->run(0, [&] {
        auto c = client::connect((*sh)->local_address(), {}, 5s);
        ASSERT_TRUE(c);
        cl = std::move(*c);
    }));
    result<void> r;
    ASSERT_TRUE(rt_->run(1, [&] {
        echo_msg req, resp;
        r = cl.call(echo, req, resp);
    }));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::cross_device_link);
    ASSERT_TRUE(rt_->run(0, [&] {
        echo_msg req, resp;
        r = cl.call(echo, req, resp, {.timeout = 5s});
        (void)cl.close();
        cl = client{};
    }));
    EXPECT_TRUE(r);
    (*sh)->stop(5s);
}

INSTANTIATE_TEST_SUITE_P(engines, rpc_vcpus, ::testing::ValuesIn(test::all_engines()),
                         test::engine_param_name);

} // namespace
} // namespace gluon::rpc::testing
