#include <gtest/gtest.h>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "test_support.h"

namespace gluon {
namespace {

class run_test : public ::testing::TestWithParam<engine::kind> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam())) GTEST_SKIP() << "engine not available";
    }
    init_options opts() const { return {.engine = GetParam(), .log_engine = false}; }
};

// Destroyed on the vCPU: it checks that the vCPU is still there when fn's locals go.
struct needs_vcpu {
    bool* was_vcpu;
    ~needs_vcpu() { *was_vcpu = is_vcpu(); }
};

TEST_P(run_test, fn_runs_on_a_vcpu_and_its_locals_go_before_the_vcpu) {
    bool destroyed_on_vcpu = false;
    auto r = run(opts(), [&] {
        EXPECT_TRUE(is_vcpu());
        needs_vcpu guard{&destroyed_on_vcpu};
        auto f = spawn([] { this_fiber::yield(); });
        EXPECT_TRUE(f);
        return 42;
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 42);
    EXPECT_TRUE(destroyed_on_vcpu);
    EXPECT_FALSE(is_vcpu()) << "fini ran";
}

TEST_P(run_test, a_result_from_fn_is_passed_on_unnested) {
    auto bad = run(opts(), []() -> result<int> { return errno_error(ENOENT); });
    static_assert(std::is_same_v<decltype(bad), result<int>>);
    EXPECT_EQ(bad.error(), std::errc::no_such_file_or_directory);
    result<void> done = run(opts(), [] {});
    EXPECT_TRUE(done);
    EXPECT_FALSE(is_vcpu());
}

TEST_P(run_test, init_errors_are_returned_and_fn_is_not_called) {
    ASSERT_TRUE(init(opts()));
    bool called = false;
    auto r = run(opts(), [&] { called = true; });
    EXPECT_EQ(r.error(), std::errc::file_exists);
    EXPECT_FALSE(called);
    ASSERT_TRUE(fini());
}

INSTANTIATE_TEST_SUITE_P(engines, run_test,
                         ::testing::Values(engine::kind::io_uring, engine::kind::epoll),
                         [](const auto& info) { return std::string(engine::kind_name(info.param)); });

}  // namespace
}  // namespace gluon
