#include "gluon/common/intrusive_list.h"

#include <gtest/gtest.h>

#include <vector>

namespace gluon {
namespace {

struct item {
    int v;
    list_hook hook;
};
using list = intrusive_list<item, &item::hook>;

std::vector<int> values(list& l) {
    std::vector<int> out;
    l.for_each([&](item& i) { out.push_back(i.v); });
    return out;
}

TEST(intrusive_list, push_pop_erase_splice) {
    item a{1, {}}, b{2, {}}, c{3, {}}, d{4, {}};
    list l, m;
    l.push_back(a);
    l.push_back(b);
    l.push_front(c);
    EXPECT_EQ(values(l), (std::vector<int>{3, 1, 2}));
    l.erase(a);
    EXPECT_FALSE(a.hook.linked());
    EXPECT_EQ(values(l), (std::vector<int>{3, 2}));
    m.push_back(d);
    l.splice_back(m);
    EXPECT_TRUE(m.empty());
    EXPECT_EQ(values(l), (std::vector<int>{3, 2, 4}));
    list::unlink(b);
    EXPECT_EQ(l.pop_front()->v, 3);
    EXPECT_EQ(l.pop_front()->v, 4);
    EXPECT_EQ(l.pop_front(), nullptr);
}

}  // namespace
}  // namespace gluon
