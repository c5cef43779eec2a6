// Under the asan preset: ASan sees fiber stacks (fiber-switch annotations), so a stack buffer
// overflow inside a fiber is reported as such, and thousands of switches raise no false report.
#include <gtest/gtest.h>

#include <cstring>

#include "gluon/runtime/fiber.h"
#include "test_support.h"

#if defined(__SANITIZE_ADDRESS__)
#define GLUON_TEST_ASAN 1
#endif

namespace gluon {
namespace {

class sanitizer_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(sanitizer_test);

[[maybe_unused]] __attribute__((noinline)) int overflow_stack_buffer(int i) {
    char buf[16] = {};
    char* volatile p = buf;  // through a pointer: UBSan's bounds check cannot see it, ASan must
    p[i] = 1;                // i == 16: one past the end
    return buf[0];
}

TEST_P(sanitizer_test, thousands_of_switches_with_stack_buffers_are_clean) {
    long sum = 0;
    auto body = [&](int seed) {
        for (int i = 0; i < 5000; ++i) {
            char local[64];
            std::memset(local, seed + i, sizeof local);
            this_fiber::yield();
            sum += local[i % 64];
        }
    };
    auto a = spawn(body, 1);
    auto b = spawn(body, 2);
    ASSERT_TRUE(a->join() && b->join());
    EXPECT_NE(sum, 0);
}

TEST_P(sanitizer_test, stack_buffer_overflow_in_a_fiber_is_reported) {
#ifndef GLUON_TEST_ASAN
    GTEST_SKIP() << "only meaningful in the asan preset";
#else
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            auto f = spawn([] { overflow_stack_buffer(16); });
            (void)f->join();
        },
        "stack-buffer-overflow");
#endif
}

}  // namespace
}  // namespace gluon
