#include "gluon/fs/path.h"

#include <gtest/gtest.h>

namespace gluon::fs::path {
namespace {

TEST(path, normalize) {
    EXPECT_EQ(normalize("/a/./b/../c/"), "/a/c");
    EXPECT_EQ(normalize("a//b///c"), "a/b/c");
    EXPECT_EQ(normalize("/../x"), "/x");
    EXPECT_EQ(normalize("../x/../../y"), "../../y");
    EXPECT_EQ(normalize(""), ".");
    EXPECT_EQ(normalize("a/.."), ".");
    EXPECT_EQ(normalize("/"), "/");
}

TEST(path, join_basename_dirname) {
    EXPECT_EQ(join("a", "b"), "a/b");
    EXPECT_EQ(join("a/", "b"), "a/b");
    EXPECT_EQ(join("a", "/b"), "/b");
    EXPECT_EQ(join("", "b"), "b");
    EXPECT_EQ(basename("a/b/c.txt"), "c.txt");
    EXPECT_EQ(basename("a/b/"), "b");
    EXPECT_EQ(basename("c"), "c");
    EXPECT_EQ(dirname("a/b/c"), "a/b");
    EXPECT_EQ(dirname("c"), ".");
    EXPECT_EQ(dirname("/c"), "/");
}

TEST(path, escapes) {
    EXPECT_TRUE(escapes(".."));
    EXPECT_TRUE(escapes("../x"));
    EXPECT_TRUE(escapes("a/../../x"));
    EXPECT_FALSE(escapes("a/../x"));
    EXPECT_FALSE(escapes("a/b/.."));
    EXPECT_FALSE(escapes("..x"));
}

}  // namespace
}  // namespace gluon::fs::path
