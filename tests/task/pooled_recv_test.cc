// co::recv_pooled on every engine: data arrives in a buffer of the engine's pool, a receive
// waiting for data holds no buffer, a receive that finds every buffer out waits for one to
// come back, and timeouts end a receive in either wait.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_pooled_recv_test : public test::engine_test {};

// Takes every buffer of the pool: a byte received on each of the first `total` pairs, held.
// Plain sends, in one task: awaiting a task per buffer that completes at once would nest a
// frame per await where the sanitizers keep symmetric transfer from being a tail call, and 256
// of them would overflow the runner's stack.
task<bool> take_every_buffer(std::vector<std::unique_ptr<test::sock_pair>>& pairs, unsigned total,
                             std::vector<co::pooled_buffer>& held) {
    for (unsigned i = 0; i < total; ++i) {
        EXPECT_EQ(::send(pairs[i]->fd[1], "x", 1, 0), 1);
        auto got = co_await co::recv_pooled(pairs[i]->fd[0]);
        if (!got) {
            ADD_FAILURE() << got.error().message();
            co_return false;
        }
        held.push_back(std::move(*got));
    }
    co_return true;
}

// Lets the other tasks run and the engine's completions reach them: a nop goes round the ring
// on io_uring, and a yield lets a ready task run (a nop completes inline on epoll).
task<void> settle() {
    for (int i = 0; i < 10; ++i) {
        co_await co::nop();
        co_await co::yield();
    }
}

using test::sock_pair;

unsigned out() { return current_engine()->pooled_buffers_out(); }

TEST_P(task_pooled_recv_test, receives_into_a_pool_buffer_and_gives_it_back) {
    sock_pair sp;
    auto t = [](int a, int b) -> task<void> {
        EXPECT_TRUE(co_await co::send_all(b, "hello", 5));
        auto got = co_await co::recv_pooled(a);
        EXPECT_TRUE(got);
        if (!got) co_return;
        EXPECT_EQ(got->view(), "hello");
        EXPECT_EQ(out(), 1u);
        got->reset();
        EXPECT_EQ(out(), 0u);
        ::shutdown(b, SHUT_WR);
        auto end = co_await co::recv_pooled(a);  // the end of the stream: an empty buffer
        EXPECT_TRUE(end && end->empty());
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t(sp.fd[0], sp.fd[1])));
}

TEST_P(task_pooled_recv_test, receives_waiting_for_data_hold_no_buffer) {
    constexpr int n = 100;
    std::vector<std::unique_ptr<sock_pair>> pairs;
    for (int i = 0; i < n; ++i) pairs.push_back(std::make_unique<sock_pair>());
    auto reader = [](int fd) -> task<std::string> {
        auto got = co_await co::recv_pooled(fd);
        if (!got) co_return "error";
        co_return std::string(got->view());
    };
    auto t = [&]() -> task<void> {
        std::vector<join_handle<std::string>> readers;
        for (auto& p : pairs) readers.push_back(std::move(co_spawn(reader(p->fd[0])).value()));
        for (int i = 0; i < 10; ++i) co_await co::nop();  // every reader is waiting in the engine
        EXPECT_EQ(out(), 0u);
        for (int i = 0; i < n; ++i) {  // plain sends: a socket pair's buffer takes them at once
            std::string msg = "message " + std::to_string(i);
            EXPECT_EQ(::send(pairs[i]->fd[1], msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
        }
        for (int i = 0; i < n; ++i) EXPECT_EQ(co_await readers[i], "message " + std::to_string(i));
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t()));
}

TEST_P(task_pooled_recv_test, a_receive_waits_for_a_buffer_when_every_one_is_out) {
    constexpr unsigned total = engine::engine::pooled_buffer_count;
    std::vector<std::unique_ptr<sock_pair>> pairs;
    for (unsigned i = 0; i <= total; ++i) pairs.push_back(std::make_unique<sock_pair>());
    auto t = [&]() -> task<void> {
        std::vector<co::pooled_buffer> held;
        if (!co_await take_every_buffer(pairs, total, held)) co_return;
        EXPECT_EQ(out(), total);
        int last = pairs[total]->fd[0];
        EXPECT_EQ(::send(pairs[total]->fd[1], "last", 4, 0), 4);
        // Data is there but no buffer: a timeout ends the wait.
        auto timed_out = co_await co::recv_pooled(last, 0, 20ms);
        EXPECT_FALSE(timed_out);
        if (!timed_out) {
            EXPECT_EQ(timed_out.error().value(), ETIMEDOUT);
        }
        bool done = false;
        auto waiter = [](int fd, bool* done) -> task<std::string> {
            auto got = co_await co::recv_pooled(fd);
            *done = true;
            co_return got ? std::string(got->view()) : "error";
        };
        auto h = co_spawn(waiter(last, &done));
        EXPECT_TRUE(h);
        for (int i = 0; i < 10; ++i) co_await co::nop();
        EXPECT_FALSE(done);  // still waiting for a buffer
        held.pop_back();     // one comes back
        EXPECT_EQ(co_await *h, "last");
        held.clear();
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t()));
}

// A receive waiting for a buffer holds no request in the kernel and no readiness wait, so
// closing its socket must end it there: once a buffer came back it would otherwise receive
// from whatever socket got the number next.
TEST_P(task_pooled_recv_test, closing_the_socket_ends_a_receive_waiting_for_a_buffer) {
    constexpr unsigned total = engine::engine::pooled_buffer_count;
    std::vector<std::unique_ptr<sock_pair>> pairs;
    for (unsigned i = 0; i <= total; ++i) pairs.push_back(std::make_unique<sock_pair>());
    auto t = [&]() -> task<void> {
        std::vector<co::pooled_buffer> held;
        if (!co_await take_every_buffer(pairs, total, held)) co_return;
        const int last = pairs[total]->fd[0];
        EXPECT_EQ(::send(pairs[total]->fd[1], "last", 4, 0), 4);
        bool done = false;
        auto waiter = [](int fd, bool* done) -> task<std::string> {
            auto got = co_await co::recv_pooled(fd);
            *done = true;
            co_return got ? std::string(got->view()) : got.error().message();
        };
        auto h = co_spawn(waiter(last, &done));
        EXPECT_TRUE(h);
        if (!h) co_return;
        co_await settle();
        EXPECT_FALSE(done);  // waiting for a buffer
        EXPECT_TRUE(fd::close(last));
        pairs[total]->fd[0] = -1;
        co_await settle();
        EXPECT_TRUE(done);  // ended by the close, with no buffer back
        // The number goes to another connection (the lowest free one: usually this), with data.
        sock_pair other;
        const int other_peer = other.fd[0] == last ? other.fd[1] : other.fd[0];
        EXPECT_EQ(::send(other_peer, "other", 5, 0), 5);
        held.pop_back();
        EXPECT_EQ(co_await *h, std::make_error_code(std::errc::bad_file_descriptor).message());
        held.clear();
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t()));
}

// A read-ahead receive whose single-shot receive (the socket's first read) found every buffer
// out, and that then timed out waiting for one, leaves its socket with no operation in the
// kernel. It stayed counted as one on io_uring, and every later close of the fd number sent the
// kernel a cancel for nothing, whose completion is waiting right after the close (epoll has
// none to wait).
TEST_P(task_pooled_recv_test, a_read_ahead_receive_that_timed_out_waiting_for_a_buffer_leaves_nothing_to_cancel) {
    constexpr unsigned total = engine::engine::pooled_buffer_count;
    std::vector<std::unique_ptr<sock_pair>> pairs;
    for (unsigned i = 0; i <= total; ++i) pairs.push_back(std::make_unique<sock_pair>());
    auto t = [&]() -> task<void> {
        std::vector<co::pooled_buffer> held;
        if (!co_await take_every_buffer(pairs, total, held)) co_return;
        const int last = pairs[total]->fd[0];
        EXPECT_EQ(::send(pairs[total]->fd[1], "last", 4, 0), 4);
        auto r = co_await co::recv_pooled_ahead(last, 20ms);  // data, but no buffer
        EXPECT_FALSE(r);
        if (!r) {
            EXPECT_EQ(r.error().value(), ETIMEDOUT);
        }
        held.clear();
        co_await settle();
        EXPECT_FALSE(current_engine()->has_pending());  // nothing else on its way
        EXPECT_TRUE(fd::close(last));
        pairs[total]->fd[0] = -1;
        EXPECT_FALSE(current_engine()->has_pending()) << "the close cancelled a receive that was not there";
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t()));
}

TEST_P(task_pooled_recv_test, a_timeout_ends_a_receive_waiting_for_data) {
    sock_pair sp;
    auto t = [](int a) -> task<void> {
        auto r = co_await co::recv_pooled(a, 0, 10ms);
        EXPECT_FALSE(r);
        if (!r) {
            EXPECT_EQ(r.error().value(), ETIMEDOUT);
        }
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t(sp.fd[0])));
}

// Read ahead (co::recv_pooled_ahead, co::recv_ahead): on io_uring one multishot receive stays
// armed on the socket from its second read on. Messages come in order, a pooled receive is
// handed the filled buffer itself, a copying receive's leftover is handed over whole to the
// next pooled one, and every buffer comes back.
TEST_P(task_pooled_recv_test, read_ahead_receives_come_in_order_and_give_every_buffer_back) {
    sock_pair sp;
    auto t = [](int a, int b) -> task<void> {
        EXPECT_EQ(::send(b, "w", 1, 0), 1);
        char w = 0;
        auto first = co_await co::recv_ahead(a, &w, 1);  // single-shot: the socket's first read
        EXPECT_TRUE(first && *first == 1 && w == 'w');
        for (int i = 0; i < 50; ++i) {
            std::string msg = "message " + std::to_string(i);
            auto reader = co_spawn([](int fd) -> task<std::string> {
                auto got = co_await co::recv_pooled_ahead(fd);
                if (!got) co_return "error";
                co_return std::string(got->view());
            }(a));
            EXPECT_TRUE(reader);
            if (!reader) co_return;
            co_await co::nop();  // the reader waits on the armed receive
            EXPECT_EQ(::send(b, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
            EXPECT_EQ(co_await *reader, msg);
            EXPECT_EQ(out(), 0u);
        }
        // A copying read that takes one byte of "hello world" leaves the rest kept; the next
        // pooled read is handed it whole.
        auto copier = co_spawn([](int fd) -> task<char> {
            char c = 0;
            auto n = co_await co::recv_ahead(fd, &c, 1);
            co_return n && *n == 1 ? c : '?';
        }(a));
        EXPECT_TRUE(copier);
        if (!copier) co_return;
        co_await co::nop();
        EXPECT_EQ(::send(b, "hello world", 11, 0), 11);
        EXPECT_EQ(co_await *copier, 'h');
        auto rest = co_await co::recv_pooled_ahead(a);
        EXPECT_TRUE(rest);
        if (!rest) co_return;
        EXPECT_EQ(rest->view(), "ello world");
        rest->reset();
        EXPECT_EQ(out(), 0u);
        ::shutdown(b, SHUT_WR);
        auto end = co_await co::recv_pooled_ahead(a);
        EXPECT_TRUE(end && end->empty());
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t(sp.fd[0], sp.fd[1])));
}

// A buffer the engine frees itself (here: read-ahead data kept in it, copied out) runs a receive
// waiting for one, as a buffer given back does; it waited for the next give_back, which, with
// no buffer held by a caller, never came.
TEST_P(task_pooled_recv_test, a_buffer_freed_by_a_read_ahead_read_runs_a_receive_waiting_for_one) {
    constexpr unsigned total = engine::engine::pooled_buffer_count;
    sock_pair ahead;
    std::vector<std::unique_ptr<sock_pair>> pairs;
    for (unsigned i = 0; i < total; ++i) pairs.push_back(std::make_unique<sock_pair>());
    bool kept = false;
    auto t = [&]() -> task<void> {
        const int a = ahead.fd[0];
        EXPECT_EQ(::send(ahead.fd[1], "w", 1, 0), 1);
        char c = 0;
        auto first = co_await co::recv_ahead(a, &c, 1);  // single-shot: the socket's first read
        EXPECT_TRUE(first && *first == 1);
        auto reader = co_spawn([](int fd) -> task<char> {
            char c = 0;
            auto n = co_await co::recv_ahead(fd, &c, 1);
            co_return n && *n == 1 ? c : '?';
        }(a));
        EXPECT_TRUE(reader);
        if (!reader) co_return;
        co_await co::nop();  // the reader waits on the armed receive
        EXPECT_EQ(::send(ahead.fd[1], "ab", 2, 0), 2);
        EXPECT_EQ(co_await *reader, 'a');
        kept = out() == 1;  // "b" is kept in a pool buffer for the next read
        if (!kept) co_return;  // no multishot receive here (epoll, or an older kernel)
        std::vector<co::pooled_buffer> held;
        if (!co_await take_every_buffer(pairs, total - 1, held)) co_return;
        EXPECT_EQ(out(), total);
        const int last = pairs[total - 1]->fd[0];
        EXPECT_EQ(::send(pairs[total - 1]->fd[1], "last", 4, 0), 4);
        bool done = false;
        auto h = co_spawn([](int fd, bool* done) -> task<std::string> {
            auto got = co_await co::recv_pooled(fd, 0, 5s);
            *done = true;
            co_return got ? std::string(got->view()) : got.error().message();
        }(last, &done));
        EXPECT_TRUE(h);
        if (!h) co_return;
        co_await settle();
        EXPECT_FALSE(done);  // every buffer is out
        auto rest = co_await co::recv_ahead(a, &c, 1);  // frees the buffer "b" was kept in
        EXPECT_TRUE(rest && *rest == 1 && c == 'b');
        EXPECT_EQ(co_await *h, "last");
        held.clear();
        EXPECT_EQ(out(), 0u);
    };
    ASSERT_TRUE(block_on(t()));
    if (!kept) GTEST_SKIP() << "the engine keeps no read-ahead data in its pool here";
}

GLUON_ENGINE_TEST_SUITE(task_pooled_recv_test);

}  // namespace
}  // namespace gluon
