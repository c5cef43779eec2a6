// Tasks on the file engines, and blocking fiber calls made from tasks (co::in_fiber).
#include "gluon/task/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gluon/runtime/fiber.h"
#include "gluon/task/spawn.h"
#include "gluon/task/sync.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_file_test : public test::engine_test {};

TEST_P(task_file_test, every_file_engine_reads_and_writes) {
    char path[] = "/tmp/gluon_task_file_XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    for (auto k : {file_io::engine_kind::io_uring, file_io::engine_kind::libaio, file_io::engine_kind::posix_aio,
                   file_io::engine_kind::psync, file_io::engine_kind::psync_inline}) {
        if (!file_io::available(k)) continue;
        SCOPED_TRACE(file_io::kind_name(k));
        file_io::file_engine* e = file_io::get(k).value();
        auto t = [](file_io::file_engine* eng, int f) -> task<std::string> {
            std::string data(10000, 'x');
            for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
            auto w = co_await co::pwrite(*eng, f, data.data(), data.size(), 100);
            EXPECT_TRUE(w);
            EXPECT_EQ(w.value_or(0), data.size());
            EXPECT_TRUE(co_await co::fsync(*eng, f, true));
            std::string back(data.size(), '\0');
            auto r = co_await co::pread(*eng, f, back.data(), back.size(), 100);
            EXPECT_TRUE(r);
            EXPECT_EQ(r.value_or(0), data.size());
            co_return back == data ? std::string("same") : back;
        };
        EXPECT_EQ(block_on(t(e, fd)).value(), "same");
    }
    ::close(fd);
}

TEST_P(task_file_test, in_fiber_runs_blocking_calls_and_is_cancelled_by_interrupt) {
    auto t = []() -> task<int> {
        auto v = co_await co::in_fiber([] {
            (void)this_fiber::sleep_for(1ms);
            return 5;
        });
        EXPECT_TRUE(v);
        auto slept = co_await co::in_fiber([] { return this_fiber::sleep_for(10s); });
        co_return slept ? 0 : slept.error().value();
    };
    auto h = co_spawn(t()).value();
    auto f = spawn([&] {
        (void)this_fiber::sleep_for(20ms);
        h.cancel();
    });
    EXPECT_EQ(h.join(), ECANCELED);
    ASSERT_TRUE(f->join());
}

TEST_P(task_file_test, in_fiber_gives_etimedout_at_its_timeout) {
    auto t = []() -> task<void> {
        // The timeout interrupts fn's blocking call: its ECANCELED becomes ETIMEDOUT.
        auto slept = co_await co::in_fiber([] { return this_fiber::sleep_for(10s); }, 10ms);
        EXPECT_FALSE(slept);
        EXPECT_EQ(slept ? 0 : slept.error().value(), ETIMEDOUT);
        // An fn returning void or a plain value cannot say it was cut short.
        bool interrupted = false;
        auto v = co_await co::in_fiber([&] { interrupted = !this_fiber::sleep_for(10s); }, 10ms);
        EXPECT_TRUE(interrupted);
        EXPECT_EQ(v ? 0 : v.error().value(), ETIMEDOUT);
        auto n = co_await co::in_fiber([] {
            (void)this_fiber::sleep_for(10s);
            return 5;
        }, 10ms);
        EXPECT_EQ(n ? 0 : n.error().value(), ETIMEDOUT);
        // A value, or another error, that fn returned in spite of the interrupt is passed on.
        auto kept = co_await co::in_fiber([]() -> result<int> {
            (void)this_fiber::sleep_for(10s);
            return 7;
        }, 10ms);
        EXPECT_EQ(kept.value_or(0), 7);
        auto other = co_await co::in_fiber([]() -> result<int> {
            (void)this_fiber::sleep_for(10s);
            return errno_error(EIO);
        }, 10ms);
        EXPECT_EQ(other ? 0 : other.error().value(), EIO);
        // Within the timeout, fn's value.
        auto quick = co_await co::in_fiber([] { return 3; }, 10s);
        EXPECT_EQ(quick.value_or(0), 3);
    };
    ASSERT_TRUE(block_on(t()));
}

GLUON_ENGINE_TEST_SUITE(task_file_test);

}  // namespace
}  // namespace gluon
