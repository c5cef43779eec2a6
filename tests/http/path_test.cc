// The normal form of request paths that routes and static files match.
#include "../../src/http/path.h"

#include <gtest/gtest.h>

#include <string>

namespace gluon::http::detail {
namespace {

std::string normal(std::string_view raw) {
    std::string storage;
    auto r = normal_path(raw, storage);
    return r ? std::string(*r) : std::string("<error>");
}

TEST(http_path, normal_paths_are_returned_as_they_are_without_a_copy) {
    std::string storage;
    const std::string_view raw = "/a/b.txt/c/";
    auto r = normal_path(raw, storage);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->data(), raw.data());
    EXPECT_TRUE(storage.empty());
    EXPECT_EQ(normal("/"), "/");
    EXPECT_EQ(normal("*"), "*");                      // OPTIONS *
    EXPECT_EQ(normal("example.com:443"), "example.com:443");  // a CONNECT authority
    EXPECT_EQ(normal("/a.b/.c/x..y"), "/a.b/.c/x..y");        // dots inside names are names
}

TEST(http_path, escapes_of_unreserved_characters_are_decoded_and_others_kept_in_upper_case) {
    EXPECT_EQ(normal("/%61dmin"), "/admin");
    EXPECT_EQ(normal("/%41%7a%30%2D%2e%5f%7E"), "/Az0-._~");
    EXPECT_EQ(normal("/a%2fb"), "/a%2Fb");  // an encoded '/' is not a separator
    EXPECT_EQ(normal("/sp%20ace%3f"), "/sp%20ace%3F");
    EXPECT_EQ(normal("/bad%zz/%4"), "/bad%zz/%4");  // left for whoever decodes to refuse
}

TEST(http_path, dot_segments_and_repeated_slashes_are_resolved) {
    EXPECT_EQ(normal("//admin"), "/admin");
    EXPECT_EQ(normal("/./admin"), "/admin");
    EXPECT_EQ(normal("/x/../admin"), "/admin");
    EXPECT_EQ(normal("/x/%2e%2E/admin"), "/admin");
    EXPECT_EQ(normal("/a//b///c"), "/a/b/c");
    EXPECT_EQ(normal("/a/b/"), "/a/b/");
    EXPECT_EQ(normal("/a/b//"), "/a/b/");
    EXPECT_EQ(normal("/a/."), "/a/");
    EXPECT_EQ(normal("/a/b/.."), "/a/");
    EXPECT_EQ(normal("/a/.."), "/");
    EXPECT_EQ(normal("//"), "/");
}

TEST(http_path, a_dot_dot_above_the_root_is_an_error) {
    EXPECT_EQ(normal("/.."), "<error>");
    EXPECT_EQ(normal("/a/../.."), "<error>");
    EXPECT_EQ(normal("/%2e%2e/etc/passwd"), "<error>");
    EXPECT_EQ(normal("/../a"), "<error>");
}

}  // namespace
}  // namespace gluon::http::detail
