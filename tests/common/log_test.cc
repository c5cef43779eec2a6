#include "gluon/common/log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace gluon {
namespace {

std::vector<std::string> g_lines;
void capture(log::level, std::string_view line, void*) { g_lines.emplace_back(line); }

TEST(log, levels_filter_and_sink_receives_formatted_lines) {
    g_lines.clear();
    log::set_sink(capture, nullptr);
    log::set_level(log::level::info);
    GLUON_DEBUG("hidden {}", 1);
    GLUON_INFO("shown {} {}", 2, "x");
    log::reset_sink();
    ASSERT_EQ(g_lines.size(), 1u);
    EXPECT_NE(g_lines[0].find("INFO"), std::string::npos);
    EXPECT_NE(g_lines[0].find("shown 2 x"), std::string::npos);
}

TEST(log, rate_limited_suppresses_and_counts) {
    g_lines.clear();
    log::set_sink(capture, nullptr);
    for (int i = 0; i < 100; ++i) GLUON_LOG_RATE_LIMITED(warn, std::chrono::hours(1), "flood {}", i);
    log::reset_sink();
    ASSERT_EQ(g_lines.size(), 1u);
    EXPECT_NE(g_lines[0].find("flood 0"), std::string::npos);
}

TEST(log, parse_level) {
    log::level l = log::level::info;
    EXPECT_TRUE(log::parse_level("error", l));
    EXPECT_EQ(l, log::level::error);
    EXPECT_FALSE(log::parse_level("loud", l));
}

}  // namespace
}  // namespace gluon
