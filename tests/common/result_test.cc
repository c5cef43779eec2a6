#include "gluon/common/result.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace gluon {
namespace {

TEST(result, holds_value_or_error) {
    result<std::string> ok = std::string("v");
    ASSERT_TRUE(ok);
    EXPECT_EQ(*ok, "v");
    EXPECT_FALSE(ok.error());
    result<std::string> bad = errno_error(ENOENT);
    EXPECT_FALSE(bad);
    EXPECT_EQ(bad.error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(bad.value_or("d"), "d");
}

// Transfers return result<size_t>: it must stay trivially copyable and two words wide, so that
// it is returned in registers.
static_assert(std::is_trivially_copyable_v<result<size_t>>);
static_assert(sizeof(result<size_t>) == 16);
static_assert(!std::is_copy_constructible_v<result<std::unique_ptr<int>>>);

TEST(result, copies_moves_and_assigns_values_and_errors) {
    result<std::vector<int>> a = std::vector<int>{1, 2, 3};
    result<std::vector<int>> b = a;  // copy of a value
    EXPECT_EQ(b->size(), 3u);
    result<std::vector<int>> c = errno_error(EIO);
    b = c;  // value replaced by an error
    EXPECT_EQ(b.error(), std::errc::io_error);
    c = std::move(a);  // error replaced by a value
    ASSERT_TRUE(c);
    EXPECT_EQ((*c)[2], 3);
    result<std::unique_ptr<int>> p = std::make_unique<int>(7);
    result<std::unique_ptr<int>> q = std::move(p);
    EXPECT_EQ(**q, 7);
    // A zero code is still an error (only result<void> maps "no error" to success).
    result<int> z = unexpected(std::error_code{});
    EXPECT_FALSE(z);
}

TEST(result_death, value_of_an_error_aborts_with_the_error) {
    result<int> bad = errno_error(ENOENT);
    EXPECT_DEATH((void)*bad, "value\\(\\) of a result that holds an error: No such file");
}

TEST(result, from_syscall_maps_negative_errno) {
    EXPECT_EQ(*from_syscall(5), 5);
    EXPECT_EQ(from_syscall(-EAGAIN).error(), std::errc::resource_unavailable_try_again);
    EXPECT_TRUE(void_from_syscall(0));
    EXPECT_EQ(void_from_syscall(-EBADF).error(), std::errc::bad_file_descriptor);
}

TEST(result, and_then_chains_values_and_passes_errors_through) {
    auto half = [](int v) -> result<int> {
        if (v % 2) return errno_error(EINVAL);
        return v / 2;
    };
    EXPECT_EQ(result<int>(8).and_then(half).and_then(half).value(), 2);
    auto odd = result<int>(6).and_then(half).and_then(half);
    EXPECT_EQ(odd.error(), std::errc::invalid_argument);
    int calls = 0;
    auto failed = result<int>(errno_error(EIO)).and_then([&](int v) -> result<int> {
        ++calls;
        return v;
    });
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(failed.error(), std::errc::io_error);
    result<void> ok;
    EXPECT_EQ(ok.and_then([] { return result<int>(3); }).value(), 3);
    EXPECT_EQ(result<void>(errno_error(EIO)).and_then([] { return result<int>(3); }).error(),
              std::errc::io_error);
}

TEST(result, transform_maps_the_value_and_may_return_void) {
    auto len = result<std::string>(std::string("abcd")).transform([](const std::string& x) {
        return x.size();
    });
    static_assert(std::is_same_v<decltype(len), result<size_t>>);
    EXPECT_EQ(*len, 4u);
    int seen = 0;
    result<void> v = result<int>(5).transform([&](int x) { seen = x; });
    EXPECT_TRUE(v);
    EXPECT_EQ(seen, 5);
    auto err = result<int>(errno_error(ENOENT)).transform([](int x) { return x * 2.0; });
    static_assert(std::is_same_v<decltype(err), result<double>>);
    EXPECT_EQ(err.error(), std::errc::no_such_file_or_directory);
    // Moves out of an rvalue result.
    auto moved = result<std::unique_ptr<int>>(std::make_unique<int>(7))
                     .transform([](std::unique_ptr<int> p) { return *p; });
    EXPECT_EQ(*moved, 7);
}

TEST(result, or_else_and_transform_error_touch_only_errors) {
    auto recover = [](std::error_code e) -> result<int> {
        if (e == std::errc::timed_out) return 0;
        return unexpected(e);
    };
    EXPECT_EQ(result<int>(errno_error(ETIMEDOUT)).or_else(recover).value(), 0);
    EXPECT_EQ(result<int>(errno_error(EIO)).or_else(recover).error(), std::errc::io_error);
    EXPECT_EQ(result<int>(9).or_else(recover).value(), 9);
    auto to_eof = [](std::error_code) { return errno_code(ENODATA); };
    EXPECT_EQ(result<int>(errno_error(EPIPE)).transform_error(to_eof).error(),
              std::errc::no_message_available);
    EXPECT_EQ(result<int>(1).transform_error(to_eof).value(), 1);
    EXPECT_EQ(result<void>(errno_error(EPIPE)).transform_error(to_eof).error(),
              std::errc::no_message_available);
    EXPECT_TRUE(result<void>().or_else([](std::error_code) { return result<void>(); }));
}

result<int> parse_digit(char c) {
    if (c < '0' || c > '9') return errno_error(EINVAL);
    return c - '0';
}
result<void> must_be_even(int v) {
    if (v % 2) return errno_error(EDOM);
    return {};
}
result<int> twice_even_digit(char c, int* reached) {
    int v = GLUON_TRY(parse_digit(c));
    GLUON_TRY(must_be_even(v));
    *reached = v;
    return v * 2;
}

TEST(result, try_returns_early_with_the_error_and_yields_the_value) {
    int reached = -1;
    EXPECT_EQ(*twice_even_digit('4', &reached), 8);
    EXPECT_EQ(reached, 4);
    reached = -1;
    EXPECT_EQ(twice_even_digit('x', &reached).error(), std::errc::invalid_argument);
    EXPECT_EQ(twice_even_digit('3', &reached).error(), std::errc::argument_out_of_domain);
    EXPECT_EQ(reached, -1);
    // An lvalue result is not moved from.
    auto keep = [](const result<std::string>& r) -> result<size_t> {
        std::string copy = GLUON_TRY(r);
        return copy.size();
    };
    result<std::string> s(std::string("abc"));
    EXPECT_EQ(*keep(s), 3u);
    EXPECT_EQ(*s, "abc");
}

}  // namespace
}  // namespace gluon
