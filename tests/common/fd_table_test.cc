#include "gluon/common/fd_table.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gluon/sys/proc.h"

namespace gluon {
namespace {

TEST(fd_table, covers_the_process_fd_limit) {
    fd_table<std::atomic<uint32_t>> t(sys::fd_limit());
    rlimit rl{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
    EXPECT_GE(t.capacity(), std::min<rlim_t>(rl.rlim_max, rlim_t{1} << 30));
    EXPECT_EQ(t.capacity() % fd_table<int>::k_chunk, 0u);
}

TEST(fd_table, grows_past_65536_a_chunk_at_a_time) {
    fd_table<std::atomic<uint32_t>> t(size_t{1} << 20);
    EXPECT_EQ(t.capacity(), size_t{1} << 20);
    EXPECT_EQ(t.chunks_in_use(), 0u);
    EXPECT_EQ(t.find(1'000'000), nullptr);  // never written: reads as absent, allocates nothing
    EXPECT_EQ(t.chunks_in_use(), 0u);

    auto* e = t.get(1'000'000);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->load(), 0u);
    e->store(7);
    EXPECT_EQ(t.chunks_in_use(), 1u);
    EXPECT_EQ(t.find(1'000'000), e);
    EXPECT_EQ(t.get(1'000'001), e + 1);  // same chunk

    auto* low = t.get(3);
    ASSERT_NE(low, nullptr);
    EXPECT_EQ(t.chunks_in_use(), 2u);
    EXPECT_EQ(t.find(1'000'000), e);  // entries never move
    EXPECT_EQ(e->load(), 7u);
}

TEST(fd_table, refuses_numbers_outside) {
    fd_table<int> t(5000);
    EXPECT_EQ(t.capacity(), 2 * fd_table<int>::k_chunk);
    EXPECT_EQ(t.get(-1), nullptr);
    EXPECT_EQ(t.find(-1), nullptr);
    EXPECT_EQ(t.get(static_cast<int>(t.capacity())), nullptr);
    EXPECT_NE(t.get(static_cast<int>(t.capacity()) - 1), nullptr);
}

TEST(fd_table, racing_first_writers_agree_on_one_chunk) {
    for (int round = 0; round < 20; ++round) {
        fd_table<std::atomic<uint32_t>> t(size_t{1} << 18);
        const int fd = 200'000 + round;
        std::atomic<bool> go{false};
        std::vector<std::thread> threads;
        for (int i = 0; i < 4; ++i)
            threads.emplace_back([&] {
                while (!go.load(std::memory_order_acquire)) {
                }
                t.get(fd)->fetch_add(1);
            });
        go.store(true, std::memory_order_release);
        for (auto& th : threads) th.join();
        EXPECT_EQ(t.find(fd)->load(), 4u);
        EXPECT_EQ(t.chunks_in_use(), 1u);
    }
}

}  // namespace
}  // namespace gluon
