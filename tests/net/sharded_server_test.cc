// The sharded listener's locality: a connection made from a thread pinned to CPU k is accepted
// and served by the vCPU pinned to CPU k, every time.
#include "gluon/net/sharded_server.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gluon/engine/engine.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

class sharded_test : public ::testing::TestWithParam<engine::kind> {};
INSTANTIATE_TEST_SUITE_P(engines, sharded_test, ::testing::Values(engine::kind::io_uring, engine::kind::epoll),
                         [](const auto& i) { return std::string(engine::kind_name(i.param)); });

TEST_P(sharded_test, connections_are_served_on_the_cpu_that_received_them) {
    if (!engine::available(GetParam())) GTEST_SKIP();
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
    auto rt = runtime::start(test::test_runtime(2, GetParam(), /*pin=*/true));
    ASSERT_TRUE(rt);
    std::atomic<int> local{0}, remote{0};
    auto srv = sharded_server::start(**rt, address::ipv4_loopback(0), [&](byte_stream& s) {
        char want;
        if (!s.read_exactly(&want, 1, 5s)) return;
        const char got = static_cast<char>('0' + sched_getcpu());
        (got == want ? local : remote)++;
        (void)s.write_all(&got, 1);
    });
    ASSERT_TRUE(srv) << srv.error().message();
    constexpr int per_cpu = 25;
    for (int cpu = 0; cpu < 2; ++cpu) {
        std::thread client([&, cpu] {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpu, &set);
            ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
            const address& where = (*srv)->local_address();
            for (int i = 0; i < per_cpu; ++i) {  // a plain pinned thread with plain syscalls
                int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ASSERT_EQ(::connect(c, where.data(), where.size()), 0);
                const char me = static_cast<char>('0' + cpu);
                char reply = 0;
                ASSERT_EQ(::send(c, &me, 1, MSG_NOSIGNAL), 1);
                ASSERT_EQ(::recv(c, &reply, 1, MSG_WAITALL), 1);
                EXPECT_EQ(reply, me);
                ::close(c);
            }
        });
        client.join();
    }
    EXPECT_EQ(local.load(), 2 * per_cpu);
    EXPECT_EQ(remote.load(), 0);
    EXPECT_EQ((*srv)->accepted(0), static_cast<uint64_t>(per_cpu));
    EXPECT_EQ((*srv)->accepted(1), static_cast<uint64_t>(per_cpu));
    (*srv)->stop(1s);
}

// A client thread on CPU `cpu` connects (reaching that CPU's shard) and keeps the connection.
int connect_from_cpu(int cpu, const address& where) {
    int c = -1;
    std::thread([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
        c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_EQ(::connect(c, where.data(), where.size()), 0);
    }).join();
    return c;
}

// stop(grace) closes every shard's listener before it waits for any shard's handlers, which
// then share the one grace: with a handler that never ends on each shard, the stop takes about
// grace, not grace once per shard (while the shards not yet stopping went on accepting).
TEST_P(sharded_test, stop_gives_the_handlers_of_all_shards_one_grace) {
    if (!engine::available(GetParam())) GTEST_SKIP();
    if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two CPUs";
    auto rt = runtime::start(test::test_runtime(2, GetParam(), /*pin=*/true));
    ASSERT_TRUE(rt);
    std::atomic<int> running{0}, interrupted{0};
    auto srv = sharded_server::start(**rt, address::ipv4_loopback(0), [&](byte_stream& s) {
        ++running;
        char c;
        auto r = s.read_some(&c, 1);  // the client never writes: until stop interrupts it
        if (!r && r.error() == std::errc::operation_canceled) ++interrupted;
    });
    ASSERT_TRUE(srv) << srv.error().message();
    const address where = (*srv)->local_address();
    const int held[2] = {connect_from_cpu(0, where), connect_from_cpu(1, where)};
    ASSERT_TRUE(test::eventually([&] { return running == 2; }));
    ASSERT_EQ((*srv)->accepted(0), 1u);
    ASSERT_EQ((*srv)->accepted(1), 1u);

    constexpr auto grace = 1s;
    const auto t0 = std::chrono::steady_clock::now();
    (*srv)->stop(grace);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(interrupted.load(), 2);
    EXPECT_GE(took, grace - 50ms);
    EXPECT_LT(took, grace + 700ms);  // one grace per shard took two
    for (int c : held) ::close(c);
}

}  // namespace
}  // namespace gluon::net
