// 100,000 fibers blocked in sleep at once all wake and finish. The timing and RSS targets are
// measured by bench/runtime (`runtime_bench --only scale`), not asserted here.
#include <gtest/gtest.h>

#include <vector>

#include "gluon/runtime/fiber.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class scale_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(scale_test);

TEST_P(scale_test, hundred_thousand_sleeping_fibers) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "too heavy under a sanitizer";
#endif
    constexpr int n = 100'000;
    int woke = 0;
    std::vector<fiber> fs;
    fs.reserve(n);
    const deadline_t wake_at = deadline_after(300ms);
    for (int i = 0; i < n; ++i) {
        auto f = spawn([&] {
            if (this_fiber::sleep_until(wake_at)) ++woke;
        });
        ASSERT_TRUE(f) << "fiber " << i << ": " << f.error().message();
        fs.push_back(std::move(*f));
    }
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(woke, n);
}

}  // namespace
}  // namespace gluon
