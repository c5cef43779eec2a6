// Shared test fixture: runs a test once per event engine this machine has, on a fresh vCPU.
#pragma once

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/engine/engine.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::test {

/// A connected AF_UNIX stream socket pair, closed through gluon when destroyed.
struct sock_pair {
    int fd[2] = {-1, -1};
    sock_pair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd), 0); }
    sock_pair(const sock_pair&) = delete;
    ~sock_pair() {
        for (int f : fd)
            if (f >= 0) (void)fd::close(f);
    }
};

/// A TCP listener on a loopback port the kernel picks, made with plain socket calls; `flags`
/// are socket(2)'s type flags (SOCK_NONBLOCK for engine accepts on epoll). Closed when destroyed.
struct loopback_listener {
    int fd = -1;
    sockaddr_in addr{};
    explicit loopback_listener(int backlog = 16, int flags = SOCK_CLOEXEC) {
        fd = ::socket(AF_INET, SOCK_STREAM | flags, 0);
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
        EXPECT_EQ(::listen(fd, backlog), 0);
    }
    loopback_listener(const loopback_listener&) = delete;
    ~loopback_listener() {
        if (fd >= 0) ::close(fd);
    }
    const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
    uint16_t port() const { return ntohs(addr.sin_port); }
};

/// A Unix stream listener on an abstract name the kernel picks (autobind) with a backlog of 0,
/// filled with connections made with plain socket calls (`full` says it worked): a connect to
/// it finds the backlog full (EAGAIN) until accept_one() takes one. Closed when destroyed.
struct full_unix_listener {
    int fd = -1;
    sockaddr_un addr{};
    socklen_t len = sizeof(sa_family_t);
    bool full = false;
    std::vector<int> socks;  // the queued clients, then the accepted ones
    full_unix_listener() {
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        addr.sun_family = AF_UNIX;
        EXPECT_EQ(::bind(fd, sa(), len), 0);  // an address of family only: autobind
        len = sizeof addr;
        EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
        EXPECT_EQ(::listen(fd, 0), 0);
        for (int i = 0; i < 8 && !full; ++i) {  // the kernel queues backlog + 1
            const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (::connect(c, sa(), len) == 0) {
                socks.push_back(c);
                continue;
            }
            full = errno == EAGAIN;
            ::close(c);
        }
    }
    full_unix_listener(const full_unix_listener&) = delete;
    ~full_unix_listener() {
        for (int s : socks) ::close(s);
        ::close(fd);
    }
    const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
    /// Takes one queued connection: the backlog has room for one more.
    void accept_one() {
        const int s = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        EXPECT_GE(s, 0) << std::strerror(errno);
        if (s >= 0) socks.push_back(s);
    }
};

/// Times a wait that must sleep, not spin, from its construction: the wall time, and the CPU
/// time of the whole process (every thread, io_uring's workers included), where a spin shows.
/// expect() checks the wall time is in [min, max) and the CPU time under a quarter of it.
struct sleeping_wait {
    static int64_t cpu_ns() {
        timespec ts{};
        ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return timespec_ns(ts);
    }
    int64_t t0 = mono_now_ns(), cpu0 = cpu_ns();
    void expect(std::chrono::nanoseconds min, std::chrono::nanoseconds max) const {
        const int64_t waited = mono_now_ns() - t0, cpu = cpu_ns() - cpu0;
        EXPECT_GE(waited, min.count());
        EXPECT_LT(waited, max.count());
        EXPECT_LT(cpu, waited / 4) << "the wait used " << cpu / 1000 << " us of CPU in " << waited / 1000 << " us";
    }
};

/// Waits until `done()` holds, checking every millisecond (other fibers of this vCPU run
/// meanwhile), for `limit` at most; returns done()'s last answer. For conditions that come
/// true in another fiber or process with nothing to wait on (a count of connections).
template <typename Pred>
bool eventually(Pred done, duration limit = std::chrono::seconds(10)) {
    const deadline_t until = deadline_after(limit);
    while (!done() && mono_now_ns() < until)
        if (!this_fiber::sleep_for(std::chrono::milliseconds(1))) break;
    return done();
}

inline std::vector<engine::kind> all_engines() { return {engine::kind::io_uring, engine::kind::epoll}; }

class engine_test : public ::testing::TestWithParam<engine::kind> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam())) GTEST_SKIP() << engine::kind_name(GetParam()) << " not available";
        init_options o;
        o.engine = GetParam();
        o.log_engine = false;
        ASSERT_TRUE(init(o).has_value());
    }
    void TearDown() override {
        if (is_vcpu()) {
            ASSERT_TRUE(fini().has_value());
        }
    }
};

/// Options for a test runtime of n quiet vCPUs (unpinned unless asked).
inline runtime_options test_runtime(unsigned n, std::optional<engine::kind> k = {}, bool pin = false) {
    runtime_options o;
    o.vcpus = n;
    o.pin = pin;
    o.vcpu.engine = k;
    o.vcpu.log_engine = false;
    return o;
}

inline std::string engine_param_name(const ::testing::TestParamInfo<engine::kind>& info) {
    return engine::kind_name(info.param);
}

}  // namespace gluon::test

/// A test that needs a peer program (openssl, curl, nginx, ...) skips when it is missing, unless
/// GLUON_REQUIRE_PEERS=1 (make test and CI set it): there a missing peer fails the test, so that
/// a suite cannot pass by testing nothing.
#define GLUON_REQUIRE_PEER(available, why)                                                      \
    do {                                                                                        \
        if (!(available)) {                                                                     \
            const char* req_ = std::getenv("GLUON_REQUIRE_PEERS");                              \
            if (req_ && std::string(req_) == "1") FAIL() << "missing peer (GLUON_REQUIRE_PEERS=1): " << (why); \
            GTEST_SKIP() << (why);                                                              \
        }                                                                                       \
    } while (0)

#define GLUON_ENGINE_TEST_SUITE(suite)                                                    \
    INSTANTIATE_TEST_SUITE_P(engines, suite, ::testing::ValuesIn(::gluon::test::all_engines()), \
                             ::gluon::test::engine_param_name)
