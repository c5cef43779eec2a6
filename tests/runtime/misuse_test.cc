// Misuse gives a clear message and aborts (debug default), and a fiber's stack overflow hits its
// guard page and names the fiber; engine selection honours GLUON_ENGINE.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/mutex.h"

namespace gluon {
namespace {

class misuse_death : public ::testing::Test {
protected:
    void SetUp() override {
        GTEST_FLAG_SET(death_test_style, "threadsafe");
        ::setenv("GLUON_MISUSE_ABORT", "1", 1);
    }
    void TearDown() override { ::unsetenv("GLUON_MISUSE_ABORT"); }
};

TEST_F(misuse_death, join_twice_aborts_with_a_message) {
    EXPECT_DEATH(
        {
            (void)init({.log_engine = false});
            auto f = spawn([] {});
            (void)f->join();
            (void)f->join();
        },
        "API misuse: join on a fiber that is not joinable");
}

TEST_F(misuse_death, blocking_outside_a_vcpu_aborts_with_a_message) {
    EXPECT_DEATH(
        {
            char c;
            (void)fd::read_some(0, &c, 1);
        },
        "API misuse: a blocking gluon call on a thread that is not a vCPU");
}

TEST_F(misuse_death, destroying_a_locked_mutex_aborts_with_a_message) {
    EXPECT_DEATH(
        {
            auto* m = new mutex;
            m->lock();
            delete m;
        },
        "API misuse: destroying a locked gluon::mutex");
}

#if !defined(__SANITIZE_ADDRESS__)  // ASan reports the overflow itself
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winfinite-recursion"  // the point: overflow the stack
__attribute__((noinline)) int recurse_forever(int n) {
    volatile char pad[1024];
    pad[0] = static_cast<char>(n);
    return recurse_forever(n + 1) + pad[0];
}
#pragma GCC diagnostic pop

TEST(stack_overflow, hits_the_guard_page_and_names_the_fiber) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            (void)init({.log_engine = false});
            fiber_options o;
            o.name = "deep-diver";
            o.stack_size = 64 * 1024;
            auto f = spawn(o, [] { (void)recurse_forever(0); });
            (void)f->join();
        },
        "stack overflow in fiber 'deep-diver'");
}
#endif

TEST(engine_selection, gluon_engine_env_forces_the_engine) {
    for (const char* name : {"epoll", "io_uring"}) {
        auto parsed = engine::parse_kind(name);
        ASSERT_TRUE(parsed);
        engine::kind k = *parsed;
        if (!engine::available(k)) continue;
        ::setenv("GLUON_ENGINE", name, 1);
        ASSERT_TRUE(init({.engine = k == engine::kind::epoll ? engine::kind::io_uring : engine::kind::epoll,
                          .log_engine = false}));
        EXPECT_EQ(current_engine()->type(), k) << name;
        ASSERT_TRUE(fini());
    }
    ::unsetenv("GLUON_ENGINE");
    init_options bad;
    ::setenv("GLUON_ENGINE", "carrier-pigeon", 1);
    EXPECT_EQ(init(bad).error(), std::errc::invalid_argument);
    ::unsetenv("GLUON_ENGINE");
}

// Makes io_uring_register(IORING_REGISTER_PROBE) fail with EPERM in this process from now on, as
// a seccomp profile that allows rings but not registrations does.
bool refuse_io_uring_probe() {
    sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[1])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IORING_REGISTER_PROBE, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
    return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// A ring whose opcode probe is refused cannot tell which operations it has: it ran them all as
// blocking syscalls, and a socket's, tried once with MSG_DONTWAIT, failed with EAGAIN instead of
// waiting. Selection falls back to epoll instead, and says why.
TEST(engine_selection, a_ring_without_its_opcode_probe_falls_back_to_epoll) {
    if (!engine::available(engine::kind::io_uring)) GTEST_SKIP() << "io_uring not available";
    if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) GTEST_SKIP() << "no seccomp";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ::unsetenv("GLUON_ENGINE");
            if (!refuse_io_uring_probe()) {
                std::fprintf(stderr, "seccomp filter refused\n");
                std::_Exit(2);
            }
            auto s = engine::select();
            if (!s) {
                std::fprintf(stderr, "no engine: %s\n", s.error().message().c_str());
                std::_Exit(1);
            }
            std::fprintf(stderr, "selected %s: %s\n", s->eng->name(), s->reason.c_str());
            std::_Exit(0);
        },
        ::testing::ExitedWithCode(0), "selected epoll: io_uring lacks operations");
}

}  // namespace
}  // namespace gluon
