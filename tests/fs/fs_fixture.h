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
#include "file_io/io_fixture.h"

namespace gluon::test {

class fs_test : public engine_pair_test {
protected:
    void SetUp() override {
        engine_pair_test::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        auto f = fs::open_local(dir_, file_engine_kind());
        ASSERT_TRUE(f.has_value()) << f.error().message();
        fs_ = std::move(*f);
    }
    void TearDown() override {
        fs_.reset();
        engine_pair_test::TearDown();
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

    std::unique_ptr<fs::filesystem> fs_;
};

}  // namespace gluon::test

#define GLUON_FS_TEST_SUITE(suite) GLUON_ENGINE_PAIR_TEST_SUITE(suite)
