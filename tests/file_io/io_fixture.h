// Shared by the io and fs tests: a test runs once per (event engine, file engine) pair on a
// fresh vCPU, with a fresh temporary directory; pairs this machine lacks are skipped.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>

#include "gluon/file_io/file_engine.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "test_support.h"

namespace gluon::test {

using engine_pair = std::tuple<engine::kind, file_io::engine_kind>;

class engine_pair_test : public ::testing::TestWithParam<engine_pair> {
protected:
    void SetUp() override {
        auto [ek, fk] = GetParam();
        if (!engine::available(ek)) GTEST_SKIP() << engine::kind_name(ek) << " not available";
        if (!file_io::available(fk)) GTEST_SKIP() << file_io::kind_name(fk) << " not available";
        init_options o;
        o.engine = ek;
        o.log_engine = false;
        ASSERT_TRUE(init(o).has_value());
        char tmpl[] = "/tmp/gluon-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        if (is_vcpu()) {
            ASSERT_TRUE(fini().has_value());
        }
        if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
    }
    file_io::engine_kind file_engine_kind() const { return std::get<1>(GetParam()); }
    /// Runs body in a fiber and waits for it.
    template <typename F>
    void in_fiber(F&& body) {
        auto f = spawn(std::forward<F>(body));
        ASSERT_TRUE(f.has_value());
        ASSERT_TRUE(f->join().has_value());
    }

    std::string dir_;
};

inline std::string engine_pair_name(const ::testing::TestParamInfo<engine_pair>& info) {
    return std::string(engine::kind_name(std::get<0>(info.param))) + "_" + file_io::kind_name(std::get<1>(info.param));
}

}  // namespace gluon::test

/// Instantiates suite over every event engine x every file engine.
#define GLUON_ENGINE_PAIR_TEST_SUITE(suite)                                                         \
    INSTANTIATE_TEST_SUITE_P(                                                                       \
        engines, suite,                                                                             \
        ::testing::Combine(::testing::ValuesIn(::gluon::test::all_engines()),                       \
                           ::testing::Values(::gluon::file_io::engine_kind::io_uring,                    \
                                             ::gluon::file_io::engine_kind::libaio,                      \
                                             ::gluon::file_io::engine_kind::posix_aio,                   \
                                             ::gluon::file_io::engine_kind::psync,                       \
                                             ::gluon::file_io::engine_kind::psync_inline)),              \
        ::gluon::test::engine_pair_name)
