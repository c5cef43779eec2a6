// A vCPU on the given event engine, a fresh temporary directory and a local filesystem over it
// on the given file engine.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>

#include "gluon/fs/local.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "test_support.h"

namespace gluon::test {

using fs_param = std::tuple<engine::kind, io::engine_kind>;

class fs_test : public ::testing::TestWithParam<fs_param> {
protected:
    void SetUp() override {
        auto [ek, fk] = GetParam();
        if (!engine::available(ek)) GTEST_SKIP() << engine::kind_name(ek) << " not available";
        if (!io::available(fk)) GTEST_SKIP() << io::kind_name(fk) << " not available";
        init_options o;
        o.engine = ek;
        o.log_engine = false;
        ASSERT_TRUE(init(o).has_value());
        char tmpl[] = "/tmp/gluon-fs-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
        auto f = fs::open_local(dir_, fk);
        ASSERT_TRUE(f.has_value()) << f.error().message();
        fs_ = std::move(*f);
    }
    void TearDown() override {
        fs_.reset();
        if (is_vcpu()) {
            ASSERT_TRUE(fini().has_value());
        }
        if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
    }
    template <typename F>
    void in_fiber(F&& body) {
        auto f = spawn(std::forward<F>(body));
        ASSERT_TRUE(f.has_value());
        ASSERT_TRUE(f->join().has_value());
    }
    std::unique_ptr<fs::file> make(const char* name, const std::string& content) {
        auto f = fs_->open(name, O_RDWR | O_CREAT | O_TRUNC);
        EXPECT_TRUE(f.has_value()) << f.error().message();
        if (!f) return nullptr;
        EXPECT_TRUE((*f)->pwrite_all(content.data(), content.size(), 0).has_value());
        return std::move(*f);
    }
    std::string slurp(const char* name) {
        auto f = fs_->open(name, O_RDONLY);
        if (!f) return "<" + f.error().message() + ">";
        std::string out;
        char buf[4096];
        for (;;) {
            auto r = (*f)->read(buf, sizeof buf);
            if (!r || *r == 0) break;
            out.append(buf, *r);
        }
        return out;
    }

    std::string dir_;
    std::unique_ptr<fs::filesystem> fs_;
};

inline std::string fs_param_name(const ::testing::TestParamInfo<fs_param>& info) {
    return std::string(engine::kind_name(std::get<0>(info.param))) + "_" + io::kind_name(std::get<1>(info.param));
}

}  // namespace gluon::test

#define GLUON_FS_TEST_SUITE(suite)                                                                  \
    INSTANTIATE_TEST_SUITE_P(                                                                       \
        engines, suite,                                                                             \
        ::testing::Combine(::testing::ValuesIn(::gluon::test::all_engines()),                       \
                           ::testing::Values(::gluon::io::engine_kind::io_uring,                    \
                                             ::gluon::io::engine_kind::libaio,                      \
                                             ::gluon::io::engine_kind::posix_aio,                   \
                                             ::gluon::io::engine_kind::psync,                       \
                                             ::gluon::io::engine_kind::psync_inline)),              \
        ::gluon::test::fs_param_name)
