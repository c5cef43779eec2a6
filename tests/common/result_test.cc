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

}  // namespace
}  // namespace gluon
