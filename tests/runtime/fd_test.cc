#include "gluon/runtime/fd.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gluon/engine/engine.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/stats.h"
#include "gluon/runtime/vcpu.h"
#include "high_fd.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class fd_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv_), 0);
    }
    void TearDown() override {
        if (sv_[0] >= 0) (void)fd::close(sv_[0]);
        if (sv_[1] >= 0) (void)fd::close(sv_[1]);
        test::engine_test::TearDown();
    }
    int sv_[2] = {-1, -1};
};
GLUON_ENGINE_TEST_SUITE(fd_test);

TEST_P(fd_test, recv_parks_until_data_arrives) {
    char buf[16] = {};
    size_t got = 0;
    auto reader = spawn([&] { got = fd::recv_some(sv_[0], buf, sizeof buf).value_or(0); });
    this_fiber::yield();
    EXPECT_EQ(got, 0u);
    ASSERT_TRUE(fd::write_all(sv_[1], "hello", 5));
    ASSERT_TRUE(reader->join());
    EXPECT_EQ(got, 5u);
    EXPECT_EQ(std::string(buf, 5), "hello");
}

TEST_P(fd_test, recv_times_out) {
    char buf[4];
    auto t0 = mono_now_ns();
    auto r = fd::recv_some(sv_[0], buf, sizeof buf, 0, 20ms);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_GE(mono_now_ns() - t0, 19'000'000);
    // The socket still works afterwards and nothing was consumed.
    ASSERT_TRUE(fd::write_all(sv_[1], "x", 1));
    auto r2 = fd::recv_some(sv_[0], buf, sizeof buf, 0, 1s);
    ASSERT_TRUE(r2);
    EXPECT_EQ(*r2, 1u);
}

TEST_P(fd_test, interrupt_cancels_blocked_read) {
    std::error_code got;
    char buf[4];
    auto reader = spawn([&] { got = fd::read_some(sv_[0], buf, sizeof buf).error(); });
    this_fiber::yield();
    ASSERT_TRUE(reader->interrupt());
    ASSERT_TRUE(reader->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
}

// An interrupt that comes while the receive is only queued (its submission goes to the kernel
// with the cancel) ends it with ECANCELED: a receive the kernel does not wait in (MSG_DONTWAIT
// here, any O_NONBLOCK fd on older kernels) then finds the socket empty, and that EAGAIN is not
// the call's result; the interrupt is consumed, not left for the next call.
TEST_P(fd_test, an_interrupt_before_the_receive_reaches_the_kernel_is_ecanceled) {
    for (int i = 0; i < 20; ++i) {
        SCOPED_TRACE(i);
        std::error_code got;
        char buf[4];
        // Queued in this order: the reader parks and the interrupter runs next, with no engine
        // poll in between to hand the receive to the kernel on its own.
        result<short> after = errno_error(EINPROGRESS);
        auto reader = spawn([&] {
            got = fd::recv_some(sv_[0], buf, sizeof buf, MSG_DONTWAIT).error();
            after = fd::poll(sv_[0], POLLOUT, 5s);  // not interrupted: that one was consumed
        });
        auto interrupter = spawn([&] { (void)reader->interrupt(); });
        ASSERT_TRUE(interrupter->join());
        ASSERT_TRUE(reader->join());
        EXPECT_EQ(got, std::errc::operation_canceled) << got.message();
        EXPECT_TRUE(after) << after.error().message();
    }
}

// MSG_DONTWAIT does not keep recv_some and send_some from waiting (fd.h): on every engine, a
// receive from an empty socket and a send into a full one wait for readiness, not fail with
// EAGAIN, and end with the data.
TEST_P(fd_test, msg_dontwait_still_waits_for_readiness) {
    char buf[8] = {};
    result<size_t> got = errno_error(EINPROGRESS);
    auto reader = spawn([&] { got = fd::recv_some(sv_[0], buf, sizeof buf, MSG_DONTWAIT, 5s); });
    ASSERT_TRUE(reader);
    this_fiber::yield();
    this_fiber::yield();
    EXPECT_TRUE(!got && got.error() == std::errc::operation_in_progress);  // still waiting
    ASSERT_TRUE(fd::write_all(sv_[1], "data", 4));
    ASSERT_TRUE(reader->join());
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(std::string(buf, *got), "data");

    char block[4096] = {};
    while (::send(sv_[0], block, sizeof block, MSG_DONTWAIT) > 0) {}  // its send buffer full
    result<size_t> sent = errno_error(EINPROGRESS);
    auto sender = spawn([&] { sent = fd::send_some(sv_[0], "x", 1, MSG_DONTWAIT, 5s); });
    ASSERT_TRUE(sender);
    this_fiber::yield();
    this_fiber::yield();
    EXPECT_TRUE(!sent && sent.error() == std::errc::operation_in_progress);  // still waiting
    while (::recv(sv_[1], block, sizeof block, MSG_DONTWAIT) > 0) {}  // the peer takes it all
    ASSERT_TRUE(sender->join());
    ASSERT_TRUE(sent) << sent.error().message();
    EXPECT_EQ(*sent, 1u);
}

TEST_P(fd_test, large_transfer_round_trips_exactly) {
    std::string out(1 << 20, '\0');
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 7 + 3);
    std::string in(out.size(), '\0');
    auto writer = spawn([&] { ASSERT_TRUE(fd::write_all(sv_[1], out.data(), out.size())); });
    ASSERT_TRUE(fd::read_exactly(sv_[0], in.data(), in.size()));
    ASSERT_TRUE(writer->join());
    EXPECT_EQ(in, out);
}

TEST_P(fd_test, eof_is_zero_and_read_exactly_reports_enodata) {
    ASSERT_TRUE(fd::write_all(sv_[1], "ab", 2));
    ASSERT_TRUE(fd::close(sv_[1]));
    sv_[1] = -1;
    char buf[8];
    EXPECT_EQ(fd::read_exactly(sv_[0], buf, 4).error(), std::errc::no_message_available);
    EXPECT_EQ(fd::read_some(sv_[0], buf, 4).value_or(99), 0u);
}

TEST_P(fd_test, poll_reports_readability) {
    auto w = spawn([&] { (void)this_fiber::sleep_for(2ms); (void)fd::write_all(sv_[1], "z", 1); });
    auto r = fd::poll(sv_[0], POLLIN, 1s);
    ASSERT_TRUE(r);
    EXPECT_TRUE(*r & POLLIN);
    ASSERT_TRUE(w->join());
}

// A wait for writability or urgent data (select with the fd in its write and except sets, as
// code waiting for a non-blocking connect does) ends when the socket becomes writable.
TEST_P(fd_test, poll_for_output_or_urgent_data_reports_writability) {
    char buf[4096] = {};
    while (::send(sv_[0], buf, sizeof buf, MSG_DONTWAIT) > 0) {}  // its send buffer full
    bool done = false;
    result<short> got = errno_error(EINPROGRESS);
    auto poller = spawn([&] {
        got = fd::poll(sv_[0], POLLOUT | POLLPRI, 5s);
        done = true;
    });
    ASSERT_TRUE(poller);
    this_fiber::yield();
    this_fiber::yield();
    EXPECT_FALSE(done);  // not writable yet
    while (::recv(sv_[1], buf, sizeof buf, MSG_DONTWAIT) > 0) {}  // the peer takes it all
    ASSERT_TRUE(poller->join());
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_TRUE(*got & POLLOUT);
}

// Two fibers wait on one socket: one for its peer's hang-up, one for data. Data wakes the
// reader; the hang-up then wakes the other.
TEST_P(fd_test, a_receive_behind_a_poll_for_hang_up_gets_the_data) {
    result<short> hang_up = errno_error(EINPROGRESS);
    auto watcher = spawn([&] { hang_up = fd::poll(sv_[0], POLLRDHUP, 5s); });
    ASSERT_TRUE(watcher);
    char buf[8] = {};
    result<size_t> got = errno_error(EINPROGRESS);
    auto reader = spawn([&] { got = fd::recv_some(sv_[0], buf, sizeof buf, 0, 5s); });
    ASSERT_TRUE(reader);
    this_fiber::yield();
    this_fiber::yield();
    ASSERT_EQ(::send(sv_[1], "data", 4, 0), 4);
    ASSERT_TRUE(reader->join());
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, 4u);
    EXPECT_EQ(std::string(buf, 4), "data");
    ASSERT_EQ(::shutdown(sv_[1], SHUT_WR), 0);
    ASSERT_TRUE(watcher->join());
    ASSERT_TRUE(hang_up) << hang_up.error().message();
    EXPECT_TRUE(*hang_up & POLLRDHUP);
}

TEST_P(fd_test, many_fibers_ping_pong_over_pairs) {
    constexpr int n = 50;
    int pairs[n][2];
    for (auto& p : pairs) ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, p), 0);
    int ok = 0;
    std::vector<fiber> fs;
    for (auto& p : pairs) {
        fs.push_back(*spawn([&ok, a = p[0]] {
            char c;
            for (int i = 0; i < 20; ++i) {
                if (!fd::read_exactly(a, &c, 1) || !fd::write_all(a, &c, 1)) return;
            }
            ++ok;
        }));
        fs.push_back(*spawn([b = p[1]] {
            char c = 'q';
            for (int i = 0; i < 20; ++i) {
                if (!fd::write_all(b, &c, 1) || !fd::read_exactly(b, &c, 1)) return;
            }
        }));
    }
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok, n);
    for (auto& p : pairs) {
        (void)fd::close(p[0]);
        (void)fd::close(p[1]);
    }
}

TEST(fd_misuse, blocking_call_outside_vcpu_is_eperm) {
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    char c;
    EXPECT_EQ(fd::read_some(0, &c, 1).error(), std::errc::operation_not_permitted);
    ::unsetenv("GLUON_MISUSE_ABORT");
}

}  // namespace
}  // namespace gluon

namespace gluon {
namespace {

// A connected TCP pair on loopback (zero-copy sends need TCP or UDP; AF_UNIX falls back).
void tcp_pair(int out[2]) {
    test::loopback_listener l(1);
    out[0] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(::connect(out[0], l.sa(), sizeof l.addr), 0);
    out[1] = ::accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(out[1], 0);
}

// Zero-copy sends: the data arrives intact and the call returns only when the buffer is free
// (the sender overwrites it right after each call; a premature return would corrupt the data).
void zerocopy_round(int* sv_) {
    constexpr size_t k_chunk = 256 * 1024;
    constexpr int k_rounds = 16;
    std::string got;
    auto reader = spawn([&] {
        std::string buf(65536, '\0');
        while (got.size() < k_chunk * k_rounds) {
            auto r = fd::recv_some(sv_[1], buf.data(), buf.size());
            if (!r || *r == 0) return;
            got.append(buf.data(), *r);
        }
    });
    std::string chunk(k_chunk, '\0');
    for (int round = 0; round < k_rounds; ++round) {
        std::memset(chunk.data(), 'a' + round, chunk.size());
        ASSERT_TRUE(fd::send_all_zerocopy(sv_[0], chunk.data(), chunk.size()).has_value());
    }
    ASSERT_TRUE(reader->join().has_value());
    ASSERT_EQ(got.size(), k_chunk * k_rounds);
    for (int round = 0; round < k_rounds; ++round)
        ASSERT_EQ(got.substr(round * k_chunk, k_chunk), std::string(k_chunk, static_cast<char>('a' + round))) << round;
}

TEST_P(fd_test, zerocopy_send_never_reuses_the_buffer_early) {
    int tcp[2];
    tcp_pair(tcp);
    for (int* pair : {sv_, tcp}) {
        SCOPED_TRACE(pair == sv_ ? "unix" : "tcp");
        zerocopy_round(pair);
    }
    (void)fd::close(tcp[0]);
    (void)fd::close(tcp[1]);
}

// A transfer of 2^32 bytes or more moves what one syscall would, not its length's low 32 bits:
// io_uring's SQE has only 32 of them, and the io_uring engine sent and wrote 0 bytes of 2^32 (a
// writer looping to the end gives up, a reader sees a false end of the stream) and 16 of 2^32 +
// 16. Each call gets a fresh pair, whose empty buffer takes far more than 16 bytes at once; a
// fiber drains what a send moved (a zero-copy send ends only once its bytes are taken). The sends
// come from address space only (read-only and unreserved: nothing is committed); the receives
// write only the 64 bytes that came.
TEST_P(fd_test, a_transfer_of_4_gib_or_more_is_not_cut_to_its_low_32_bits) {
    constexpr size_t n = size_t{1} << 32;
    const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    void* out = ::mmap(nullptr, n + 4096, PROT_READ, flags, -1, 0);
    void* in = ::mmap(nullptr, n + 4096, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (out == MAP_FAILED || in == MAP_FAILED) {
        if (out != MAP_FAILED) ::munmap(out, n + 4096);
        if (in != MAP_FAILED) ::munmap(in, n + 4096);
        GTEST_SKIP() << "no 2 x 4 GiB of address space";
    }
    enum op_kind { k_send, k_write, k_send_zc, k_recv, k_read };
    for (op_kind k : {k_send, k_write, k_send_zc, k_recv, k_read}) {
        for (size_t len : {n, n + 16}) {
            SCOPED_TRACE(testing::Message() << "op " << k << ", " << len << " bytes");
            int p[2];
            if (k == k_send_zc) {
                tcp_pair(p);  // (zero-copy needs TCP: AF_UNIX falls back to a plain send)
            } else {
                ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p), 0);
            }
            result<size_t> r = errno_error(EINPROGRESS);
            if (k == k_recv || k == k_read) {
                ASSERT_TRUE(fd::send_all(p[1], std::string(64, 'x').data(), 64));
                r = k == k_recv ? fd::recv_some(p[0], in, len, 0, 5s) : fd::read_some(p[0], in, len, 5s);
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_EQ(*r, 64u);
            } else {
                size_t drained = 0;
                auto drainer = spawn([&] {
                    std::string b(65536, '\0');
                    while (auto got = fd::recv_some(p[1], b.data(), b.size(), 0, 5s)) {
                        if (*got == 0) return;
                        drained += *got;
                    }
                });
                ASSERT_TRUE(drainer);
                if (k == k_send_zc) {
                    auto op = engine::io_op::transfer(engine::opcode::send_zc, p[0], out, len);
                    r = from_syscall<size_t>(run_op(op, timeout_deadline(5s)));
                } else {
                    r = k == k_send ? fd::send_some(p[0], out, len, 0, 5s) : fd::write_some(p[0], out, len, 5s);
                }
                ASSERT_EQ(::shutdown(p[0], SHUT_WR), 0);
                ASSERT_TRUE(drainer->join());
                ASSERT_TRUE(r) << r.error().message();
                EXPECT_GT(*r, 16u);
                EXPECT_LE(*r, size_t{0x7ffff000});
                EXPECT_EQ(drained, *r);
            }
            (void)fd::close(p[0]);
            (void)fd::close(p[1]);
        }
    }
    ::munmap(out, n + 4096);
    ::munmap(in, n + 4096);
}

// sendfile from a temporary file into one end of a socket pair while a fiber reads the other,
// far more than the socket buffer holds, so the sender must wait for room many times.
TEST_P(fd_test, sendfile_and_splice_move_file_bytes) {
    char path[] = "/tmp/gluon-sendfile-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    std::string data(3 * 1024 * 1024, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
    ASSERT_EQ(::pwrite(file, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));

    std::string got;
    auto reader = spawn([&] {
        char buf[65536];
        while (got.size() < data.size() - 100) {
            auto r = fd::recv_some(sv_[1], buf, sizeof buf);
            if (!r || *r == 0) return;
            got.append(buf, *r);
        }
    });
    size_t sent = 0;
    while (sent < data.size() - 100) {  // from offset 100 to the end
        auto r = fd::sendfile(sv_[0], file, static_cast<int64_t>(100 + sent), data.size() - 100 - sent);
        ASSERT_TRUE(r.has_value()) << r.error().message();
        ASSERT_GT(*r, 0u);
        sent += *r;
    }
    ASSERT_TRUE(reader->join().has_value());
    EXPECT_TRUE(got == data.substr(100));

    // splice: socket -> pipe -> socket, a zero-copy relay.
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    std::string relayed;
    auto sink = spawn([&] {
        char buf[4096];
        while (relayed.size() < 10000) {
            auto r = fd::recv_some(sv_[0], buf, sizeof buf);
            if (!r || *r == 0) return;
            relayed.append(buf, *r);
        }
    });
    auto relay = spawn([&] {
        size_t moved = 0;
        while (moved < 10000) {
            auto in = fd::splice(sv_[1], p[1], 10000 - moved);  // socket -> pipe (waits for data)
            ASSERT_TRUE(in.has_value());
            size_t left = *in;
            while (left > 0) {
                auto out = fd::splice(p[0], sv_[1], left);  // pipe -> socket (back the other way)
                ASSERT_TRUE(out.has_value());
                left -= *out;
            }
            moved += *in;
        }
    });
    std::string msg(10000, 'r');
    ASSERT_TRUE(fd::send_all(sv_[0], msg.data(), msg.size()).has_value());
    ASSERT_TRUE(relay->join().has_value());
    ASSERT_TRUE(sink->join().has_value());
    EXPECT_EQ(relayed, msg);
    ::close(p[0]);
    ::close(p[1]);
    ::close(file);
    EXPECT_EQ(fd::sendfile(sv_[0], file, 0, 10).error(), std::errc::bad_file_descriptor);
}

// close() from another fiber fails a receive parked on the socket with EBADF at once (and the
// socket is really closed: the peer sees its end), on every engine.
TEST_P(fd_test, close_fails_a_parked_receive_with_ebadf) {
    bool started = false;
    std::error_code got;
    auto reader = spawn([&] {
        char b[16];
        started = true;
        auto r = fd::recv_some(sv_[0], b, sizeof b, 0, std::chrono::seconds(10));
        if (!r) got = r.error();
    });
    while (!started) this_fiber::yield();
    this_fiber::yield();  // the reader runs on until it parks in its receive
    current_engine()->flush();  // and its receive is in the kernel, not only queued
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(fd::close(sv_[0]).has_value());
    sv_[0] = -1;
    ASSERT_TRUE(reader->join().has_value());
    EXPECT_EQ(got, std::errc::bad_file_descriptor) << got.message();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    char b[4];
    auto eof = fd::recv_some(sv_[1], b, sizeof b, 0, std::chrono::seconds(5));
    ASSERT_TRUE(eof.has_value()) << eof.error().message();
    EXPECT_EQ(*eof, 0u);  // the peer sees the end of the stream
}

// sendfile and splice into a peer that is gone: EPIPE, never the SIGPIPE whose default action
// would end this process, and nothing left pending for the thread.
TEST_P(fd_test, a_gone_peer_is_epipe_never_sigpipe) {
    struct sigaction dfl{}, old{};
    dfl.sa_handler = SIG_DFL;
    ASSERT_EQ(::sigaction(SIGPIPE, &dfl, &old), 0);
    char path[] = "/tmp/gluon-sendfile-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    std::string data(4096, 'x');
    ASSERT_EQ(::pwrite(file, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));

    ASSERT_TRUE(fd::close(sv_[1]).has_value());
    sv_[1] = -1;
    auto r = fd::sendfile(sv_[0], file, 0, data.size());
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), std::errc::broken_pipe);

    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    ::close(p[0]);  // no reader
    auto s = fd::splice(file, p[1], data.size());
    ASSERT_FALSE(s.has_value());
    EXPECT_EQ(s.error(), std::errc::broken_pipe);
    ::close(p[1]);
    ::close(file);

    sigset_t pending;
    ASSERT_EQ(::sigpending(&pending), 0);
    EXPECT_FALSE(sigismember(&pending, SIGPIPE));
    ::sigaction(SIGPIPE, &old, nullptr);
}

}  // namespace
}  // namespace gluon

namespace gluon {
namespace {

// An fd waited on by vCPU 0, then closed by vCPU 1: when its number is reused for a new socket,
// vCPU 0 must wait on the new socket, not on its stale registration of the old one.
TEST(fd_cross_vcpu, a_number_closed_elsewhere_and_reused_still_wakes) {
    for (auto k : test::all_engines()) {
        if (!engine::available(k)) continue;
        SCOPED_TRACE(engine::kind_name(k));
        auto rt = runtime::start(test::test_runtime(2, k));
        ASSERT_TRUE(rt.has_value());
        int old_fds[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, old_fds), 0);
        ASSERT_TRUE((*rt)->run(0, [&] {
            char c;
            EXPECT_EQ(fd::recv_some(old_fds[0], &c, 1, 0, 1ms).error(), std::errc::timed_out);
        }));
        ASSERT_TRUE((*rt)->run(1, [&] {
            (void)fd::close(old_fds[0]);
            (void)fd::close(old_fds[1]);
        }));
        int fresh[2];
        ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fresh), 0);
        ASSERT_EQ(fresh[0], old_fds[0]);  // the lowest free numbers come back
        long got = 0;
        ASSERT_TRUE((*rt)->run(0, [&] {
            auto w = spawn([&] { (void)fd::send_all(fresh[1], "x", 1); });
            char c;
            auto r = fd::recv_some(fresh[0], &c, 1, 0, 2s);
            got = r ? static_cast<long>(*r) : -r.error().value();
            (void)w->join();
        }));
        EXPECT_EQ(got, 1);
        ::close(fresh[0]);
        ::close(fresh[1]);
    }
}

}  // namespace
}  // namespace gluon

namespace gluon {
namespace {

// fds above 65,536 get the same per-fd state as low ones: engine registrations and close
// generations (the tables grow with RLIMIT_NOFILE).
TEST_P(fd_test, fds_above_65536_work_and_are_tracked) {
    test::high_fds high;
    if (!high.available()) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit keeps fds below 65,536 here";
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    const int a = high.move_high(sv[0]), b = high.move_high(sv[1]);
    ASSERT_GE(a, test::high_fds::k_first);
    ASSERT_GE(b, test::high_fds::k_first);
    auto f = spawn([&] {
        auto reader = spawn([&] {
            char buf[5];
            ASSERT_TRUE(fd::read_exactly(b, buf, sizeof buf));
            EXPECT_EQ(std::string(buf, sizeof buf), "hello");
        });
        ASSERT_TRUE(reader);
        ASSERT_TRUE(fd::write_all(a, "hello", 5));
        ASSERT_TRUE(reader->join());
    });
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->join());
    const uint32_t gen = engine::fd_generation(a);
    ASSERT_TRUE(fd::close(a));
    EXPECT_EQ(engine::fd_generation(a), gen + 1);
    ASSERT_TRUE(fd::close(b));
}

// ---- a connect to a Unix listener whose backlog is full -----------------------------------------

// Engine operations of this vCPU that failed so far: each attempt of a connect refused for a
// full backlog is one.
uint64_t failed_ops() {
    for (const vcpu_stats& v : vcpu_statistics())
        if (v.index == current_vcpu_index()) return v.engine_errors;
    return 0;
}

// The connect tries again after pauses that grow, and fails with ETIMEDOUT at its timeout,
// having used next to no CPU. On io_uring an O_NONBLOCK socket's connect spun until the
// deadline (the engine polled the socket, which is writable at once, and connected again). A
// blocking socket on io_uring waits in the kernel instead; it must end at the timeout too.
TEST_P(fd_test, a_connect_to_a_full_unix_backlog_pauses_between_attempts_until_its_timeout) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    for (const int nonblock : {int{SOCK_NONBLOCK}, 0}) {
        const int c = ::socket(AF_UNIX, SOCK_STREAM | nonblock | SOCK_CLOEXEC, 0);
        ASSERT_GE(c, 0);
        const uint64_t failed = failed_ops();
        const test::sleeping_wait w;
        auto r = fd::connect(c, l.sa(), l.len, 300ms);
        const uint64_t attempts = failed_ops() - failed;
        ASSERT_FALSE(r) << "connected past a full backlog";
        EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
        w.expect(290ms, 1300ms);
        // Pauses of 1, 2, 4, ... 64 ms: about ten attempts in 300 ms.
        EXPECT_LE(attempts, 20u) << "attempts were not paused";
        ASSERT_TRUE(fd::close(c));
    }
}

// The connect gets in at its next attempt once the listener has taken a connection. The epoll
// engine waited for an edge of the socket that never came (nothing wakes a connecting socket
// when the listener accepts) until the timeout; io_uring's spin ended no attempt.
TEST_P(fd_test, a_connect_to_a_full_unix_backlog_gets_in_once_the_listener_accepts) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(c, 0);
    const uint64_t failed = failed_ops();
    result<void> got = errno_error(EINPROGRESS);
    auto connector = spawn([&] { got = fd::connect(c, l.sa(), l.len, 10s); });
    ASSERT_TRUE(connector);
    // The room comes once the connect has been refused twice: it is pausing between attempts.
    const bool refused = test::eventually([&] { return failed_ops() >= failed + 2; }, 5s);
    EXPECT_TRUE(refused) << "no refused attempt ended";
    if (refused) l.accept_one();
    else (void)connector->interrupt();  // (the captures must outlive it)
    const int64_t t0 = mono_now_ns();
    ASSERT_TRUE(connector->join());
    if (refused) {
        EXPECT_TRUE(got) << got.error().message();
        // Its next attempt, at most k_connect_pause_max after the room came.
        EXPECT_LT(mono_now_ns() - t0, 1'000'000'000);
    }
    ASSERT_TRUE(fd::close(c));
}

// An interrupt ends a connect that waits for room, as it ends any wait: ECANCELED.
TEST_P(fd_test, an_interrupt_ends_a_connect_waiting_for_a_full_unix_backlog) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(c, 0);
    const uint64_t failed = failed_ops();
    result<void> got;
    auto connector = spawn([&] { got = fd::connect(c, l.sa(), l.len); });
    ASSERT_TRUE(connector);
    const bool refused = test::eventually([&] { return failed_ops() >= failed + 2; }, 5s);
    EXPECT_TRUE(refused) << "no refused attempt ended";
    ASSERT_TRUE(connector->interrupt());
    ASSERT_TRUE(connector->join());
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error(), std::errc::operation_canceled) << got.error().message();
    ASSERT_TRUE(fd::close(c));
}

}  // namespace
}  // namespace gluon
