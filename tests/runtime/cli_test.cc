// gluon::cli::parser: options with values, numbers checked against their type, flags, lists,
// positional arguments and every way a command line can be wrong.
#include "gluon/runtime/cli.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "gluon/runtime/vcpu.h"

namespace gluon::cli {
namespace {

/// argv for the parser ("prog" first); the strings live as long as the returned object.
struct args {
    std::vector<std::string> s;
    std::vector<char*> v;
    args(std::initializer_list<const char*> a) : args(std::vector<const char*>(a)) {}
    explicit args(const std::vector<const char*>& a) : s(a.begin(), a.end()) {
        s.insert(s.begin(), "prog");
        for (auto& x : s) v.push_back(x.data());
    }
    args(const args&) = delete;  // v points into s
    int argc() { return static_cast<int>(v.size()); }
    char** argv() { return v.data(); }
};

TEST(cli, options_of_every_kind) {
    uint16_t port = 0;
    size_t keep = 0;
    int64_t delta = 0;
    double secs = 0;
    std::string root;
    std::vector<std::string> ups, rest;
    bool log = false;
    init_options vcpu;
    parser p("usage");
    p.option("--port", port).option("--seconds", secs).option("--root", root).option("--upstream", ups);
    p.flag("--log", log).engine(vcpu).positional(rest).option("--keep", keep).option("--delta", delta);
    args a{"--keep", "18446744073709551615", "--delta", "-5", "--port", "8080", "one", "--seconds", "0.5", "--upstream", "a:1", "--log", "--upstream", "b:2",
           "--root", "/srv", "--engine", "epoll", "two"};
    ASSERT_TRUE(p.parse(a.argc(), a.argv()));
    EXPECT_EQ(port, 8080);
    EXPECT_EQ(keep, SIZE_MAX);
    EXPECT_EQ(delta, -5);
    EXPECT_EQ(secs, 0.5);
    EXPECT_EQ(root, "/srv");
    EXPECT_EQ(ups, (std::vector<std::string>{"a:1", "b:2"}));
    EXPECT_TRUE(log);
    ASSERT_TRUE(vcpu.engine.has_value());
    EXPECT_EQ(*vcpu.engine, engine::kind::epoll);
    EXPECT_EQ(rest, (std::vector<std::string>{"one", "two"}));
}

TEST(cli, durations_are_given_in_seconds) {
    duration warmup = std::chrono::seconds(9), run = std::chrono::seconds(9), none = std::chrono::seconds(9);
    parser p("usage");
    p.option("--warmup", warmup).option("--run", run).option("--none", none);
    args a{"--warmup", "0.25", "--run", "3", "--none", "0"};
    ASSERT_TRUE(p.parse(a.argc(), a.argv()));
    EXPECT_EQ(warmup, std::chrono::milliseconds(250));
    EXPECT_EQ(run, std::chrono::seconds(3));
    EXPECT_EQ(none, duration::zero());
}

TEST(cli, every_mistake_is_refused) {
    const std::vector<std::vector<const char*>> mistakes = {
        {"--port", "70000"},  // out of uint16_t's range
        {"--port", "-1"},
        {"--port", "12x"},
        {"--port", ""},
        {"--port"},  // no value
        {"--nope"},  // unknown
        {"stray"},   // positional, none expected
        {"--engine", "kqueue"},
        {"--seconds", "soon"},
        {"--seconds", "nan"},  // a double option takes finite numbers only
        {"--seconds", "inf"},
        {"--seconds", "-inf"},
        {"--seconds", "1e400"},  // past a double's range: was taken as infinity
        {"--seconds", " 1"},     // strtod skipped leading spaces
        {"--seconds", "+1"},
        {"--seconds", "0x10"},
        {"--ratio", "1e300"},  // past a float's range: converting it was undefined behaviour
        {"--ratio", "-1e39"},
        {"--wait", "-1"},  // a duration is never negative
        {"--wait", "nan"},
        {"--wait", "inf"},
        {"--wait", "1s"},  // seconds are a plain number
    };
    for (const auto& words : mistakes) {
        args bad(words);
        uint16_t port = 0;
        double secs = 0;
        float ratio = 0;
        duration wait{};
        init_options vcpu;
        parser p("usage");
        p.option("--port", port).option("--seconds", secs).option("--ratio", ratio).option("--wait", wait).engine(vcpu);
        EXPECT_FALSE(p.parse(bad.argc(), bad.argv())) << bad.s[1];
    }
}

TEST(cli, floating_point_options_take_finite_numbers_in_range) {
    double big = 0, small = 0, neg = 0;
    float f = 0, fmax = 0;
    parser p("usage");
    p.option("--big", big).option("--small", small).option("--neg", neg).option("--f", f).option("--fmax", fmax);
    args a{"--big", "1e300", "--small", ".5e-3", "--neg", "-2.5", "--f", "0.25", "--fmax", "3.4028234663852886e38"};
    ASSERT_TRUE(p.parse(a.argc(), a.argv()));
    EXPECT_EQ(big, 1e300);
    EXPECT_EQ(small, 0.5e-3);
    EXPECT_EQ(neg, -2.5);
    EXPECT_EQ(f, 0.25f);
    EXPECT_EQ(fmax, std::numeric_limits<float>::max());
}

TEST(cli, parsing_starts_where_asked_and_usage_exits_2) {
    int n = 0;
    parser p("usage: prog MODE [--n N]");
    p.option("--n", n);
    args a{"server", "--n", "3"};
    EXPECT_TRUE(p.parse(a.argc(), a.argv(), 2));  // argv[1] is the mode, read by the caller
    EXPECT_EQ(n, 3);
    EXPECT_EQ(p.usage(), 2);
}

}  // namespace
}  // namespace gluon::cli
