#include "gluon/common/result.h"

#include <gtest/gtest.h>

#include <string>

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

TEST(result, from_syscall_maps_negative_errno) {
    EXPECT_EQ(*from_syscall(5), 5);
    EXPECT_EQ(from_syscall(-EAGAIN).error(), std::errc::resource_unavailable_try_again);
    EXPECT_TRUE(void_from_syscall(0));
    EXPECT_EQ(void_from_syscall(-EBADF).error(), std::errc::bad_file_descriptor);
}

}  // namespace
}  // namespace gluon
