#include "gluon/runtime/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gluon/runtime/fiber.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class signals_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(signals_test);

bool handler_is_default(int sig) {
    struct sigaction sa {};
    sigaction(sig, nullptr, &sa);
    return sa.sa_handler == SIG_DFL;
}

// Starts a fiber that waits for `sigs`; once the caller's yield returns, the fiber is parked in
// the wait with the handlers installed.
fiber start_waiter(std::initializer_list<int> sigs, result<int>& out) {
    auto f = spawn([sigs, &out] { out = wait_for_signals(sigs); });
    EXPECT_TRUE(f);
    this_fiber::yield();
    return std::move(*f);
}

TEST_P(signals_test, a_signal_from_another_thread_wakes_the_waiting_fiber) {
    ASSERT_TRUE(handler_is_default(SIGUSR1));
    result<int> got = errno_error(EINVAL);
    fiber w = start_waiter({SIGUSR2, SIGUSR1}, got);
    EXPECT_FALSE(handler_is_default(SIGUSR1));
    // The signal goes to the process; whichever thread takes it, the fiber wakes. Under TSan it
    // goes to the sending thread: TSan defers a signal that reaches a thread asleep in a system
    // call it does not intercept (io_uring_enter) until that thread's next intercepted call, so
    // a vCPU asleep in its ring would never run the handler (the test hung 1 run in 2-40).
    std::thread sender([] {
#if defined(__SANITIZE_THREAD__)
        ::raise(SIGUSR1);
#else
        ::kill(::getpid(), SIGUSR1);
#endif
    });
    ASSERT_TRUE(w.join());
    sender.join();
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, SIGUSR1);
    EXPECT_TRUE(handler_is_default(SIGUSR1)) << "the earlier disposition is back";
    EXPECT_TRUE(handler_is_default(SIGUSR2));
}

TEST_P(signals_test, a_signal_that_came_during_an_earlier_wait_does_not_end_the_next) {
    result<int> got = errno_error(EINVAL);
    fiber w = start_waiter({SIGUSR2}, got);
    // raise() runs the handler on this thread before it returns: two reports, one wait.
    ASSERT_EQ(::raise(SIGUSR2), 0);
    ASSERT_EQ(::raise(SIGUSR2), 0);
    ASSERT_TRUE(w.join());
    ASSERT_EQ(*got, SIGUSR2);
    EXPECT_EQ(wait_for_signals({SIGUSR2}, 20ms).error(), std::errc::timed_out);
}

TEST_P(signals_test, the_timed_form_times_out_and_restores_the_dispositions) {
    EXPECT_EQ(wait_for_signals({SIGUSR1}, 10ms).error(), std::errc::timed_out);
    EXPECT_TRUE(handler_is_default(SIGUSR1));
}

TEST_P(signals_test, an_interrupt_ends_the_wait) {
    result<int> got = 0;
    fiber w = start_waiter({SIGUSR1}, got);
    ASSERT_TRUE(w.interrupt());
    ASSERT_TRUE(w.join());
    EXPECT_EQ(got.error(), std::errc::operation_canceled);
    EXPECT_TRUE(handler_is_default(SIGUSR1));
}

TEST_P(signals_test, bad_sets_and_a_second_waiter_are_refused) {
    EXPECT_EQ(wait_for_signals({}).error(), std::errc::invalid_argument);
    EXPECT_EQ(wait_for_signals({SIGKILL}).error(), std::errc::invalid_argument);
    EXPECT_EQ(wait_for_signals({0}).error(), std::errc::invalid_argument);
    result<int> got = 0;
    fiber w = start_waiter({SIGUSR1}, got);
    EXPECT_EQ(wait_for_signals({SIGUSR2}, 1s).error(), std::errc::device_or_resource_busy);
    ASSERT_TRUE(w.interrupt());
    ASSERT_TRUE(w.join());
}

TEST_P(signals_test, ready_runs_once_the_signals_are_caught) {
    ASSERT_TRUE(handler_is_default(SIGUSR1));
    bool caught = false;
    // raise() runs the handler before it returns: a default disposition would end the process.
    auto got = wait_for_signals({SIGUSR1}, 5s, [&] {
        caught = !handler_is_default(SIGUSR1);
        ASSERT_EQ(::raise(SIGUSR1), 0);
    });
    EXPECT_TRUE(caught);
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, SIGUSR1);
    EXPECT_TRUE(handler_is_default(SIGUSR1));
    int calls = 0;
    EXPECT_EQ(wait_for_signals({SIGKILL}, 5s, [&] { ++calls; }).error(), std::errc::invalid_argument);
    EXPECT_EQ(calls, 0) << "ready is not called when the wait fails first";
}

// A server that is signalled the moment its port is asked for, i.e. as "listening" is printed:
// what a script does that sends SIGTERM as soon as it reads the line.
struct signalled_on_listening {
    struct address {
        uint16_t port() const { return 0; }
    };
    bool stopped = false;
    address local_address() const {
        (void)::raise(SIGTERM);
        return {};
    }
    void stop(duration) { stopped = true; }
};

TEST_P(signals_test, a_signal_sent_as_listening_is_printed_stops_the_server) {
    ASSERT_TRUE(handler_is_default(SIGTERM));
    signalled_on_listening srv;
    ASSERT_TRUE(serve_until_signalled(srv, 1s));  // not the end of the process
    EXPECT_TRUE(srv.stopped);
    EXPECT_TRUE(handler_is_default(SIGTERM));
}

TEST(signals, outside_a_vcpu_the_call_is_refused) {
    EXPECT_EQ(wait_for_signals({SIGUSR1}).error(), std::errc::operation_not_permitted);
}

}  // namespace
}  // namespace gluon
