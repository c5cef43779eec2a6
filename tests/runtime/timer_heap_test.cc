// The vCPU timer heap against a sorted reference: random inserts, removals from anywhere and
// expiries, with equal deadlines, keep every node's position right and fire in deadline order.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "runtime/timer_heap.h"

namespace gluon::detail {
namespace {

struct node : timer_node {
    int id = 0;
};
std::vector<int>* g_fired = nullptr;

void fired(timer_node* t) { g_fired->push_back(static_cast<node*>(t)->id); }

TEST(timer_heap, matches_a_sorted_reference_under_random_operations) {
    std::mt19937_64 rng(42);
    std::vector<node> nodes(500);
    for (int i = 0; i < 500; ++i) {
        nodes[i].id = i;
        nodes[i].fire = fired;
    }
    timer_heap h;
    std::multiset<std::pair<int64_t, int>> ref;
    std::vector<int> fired_ids;
    g_fired = &fired_ids;
    int64_t now = 0;
    for (int step = 0; step < 200000; ++step) {
        node& n = nodes[rng() % nodes.size()];
        switch (rng() % 4) {
            case 0:
            case 1:
                if (!n.armed()) {
                    n.deadline = now + static_cast<int64_t>(rng() % 64);  // many equal deadlines
                    h.insert(&n);
                    ref.insert({n.deadline, n.id});
                }
                break;
            case 2:
                if (n.armed()) ref.erase(ref.find({n.deadline, n.id}));
                h.remove(&n);  // removing a node that is not armed does nothing
                EXPECT_FALSE(n.armed());
                break;
            case 3: {
                now += static_cast<int64_t>(rng() % 8);
                fired_ids.clear();
                int k = h.fire_expired(now);
                std::vector<int> want;
                while (!ref.empty() && ref.begin()->first <= now) {
                    want.push_back(ref.begin()->second);
                    ref.erase(ref.begin());
                }
                ASSERT_EQ(k, static_cast<int>(want.size()));
                // Deadline order; ties in any order.
                for (size_t i = 1; i < fired_ids.size(); ++i)
                    EXPECT_LE(nodes[fired_ids[i - 1]].deadline, nodes[fired_ids[i]].deadline);
                std::sort(want.begin(), want.end());
                std::vector<int> got = fired_ids;
                std::sort(got.begin(), got.end());
                ASSERT_EQ(got, want);
                break;
            }
        }
        ASSERT_EQ(h.size(), ref.size());
        ASSERT_EQ(h.next_deadline(), ref.empty() ? INT64_MAX : ref.begin()->first);
    }
    for (auto& n : nodes) h.remove(&n);
    EXPECT_TRUE(h.empty());
}

}  // namespace
}  // namespace gluon::detail
