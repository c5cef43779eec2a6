#include "gluon/net/socket.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "gluon/common/log.h"
#include "gluon/net/server.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

TEST(address, parses_and_prints) {
    EXPECT_EQ(address::parse("127.0.0.1:8080")->to_string(), "127.0.0.1:8080");
    EXPECT_EQ(address::parse("[::1]:443")->to_string(), "[::1]:443");
    EXPECT_EQ(address::parse("unix:/tmp/x.sock")->to_string(), "unix:/tmp/x.sock");
    EXPECT_EQ(address::parse("unix:@gluon-test")->to_string(), "unix:@gluon-test");
    EXPECT_EQ(address::parse("[::1]:443")->port(), 443);
    EXPECT_EQ(address::parse("1.2.3:80").error(), std::errc::invalid_argument);
    EXPECT_EQ(address::parse("1.2.3.4:99999").error(), std::errc::invalid_argument);
    EXPECT_EQ(address::parse("1.2.3.4").error(), std::errc::invalid_argument);
    EXPECT_EQ(address::parse("unix:" + std::string(200, 'x')).error(), std::errc::filename_too_long);
}

TEST(address, ip_literals_have_one_parser) {
    EXPECT_EQ(address::from_ip("192.0.2.1", 80)->to_string(), "192.0.2.1:80");
    EXPECT_EQ(address::from_ip("2001:db8::1", 443)->to_string(), "[2001:db8::1]:443");
    EXPECT_EQ(address::from_ip("[2001:db8::1]", 443)->to_string(), "[2001:db8::1]:443");
    auto by_number = address::from_ip("fe80::1%1", 22);
    ASSERT_TRUE(by_number);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(by_number->data())->sin6_scope_id, 1u);
    auto by_name = address::from_ip("fe80::1%lo", 22);
    ASSERT_TRUE(by_name);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(by_name->data())->sin6_scope_id, if_nametoindex("lo"));
    // The same parser behind address::parse: a scope id there too.
    EXPECT_TRUE(address::parse("[fe80::1%lo]:22"));
    for (const char* bad : {"", "1.2.3", "[::1", "::1]", "[1.2.3.4]", "example.com", "fe80::1%"})
        EXPECT_EQ(address::from_ip(bad, 1).error(), std::errc::invalid_argument) << bad;
    EXPECT_EQ(address::from_ip("fe80::1%nosuchif", 1).error(), std::errc::no_such_device_or_address);
    EXPECT_EQ(address::parse("::1:80").error(), std::errc::invalid_argument);  // IPv6 needs brackets
}

// A scope id is printed (by number) and parsed back: a link-local address keeps its interface
// through text.
TEST(address, a_scope_id_survives_printing_and_parsing) {
    const unsigned lo = if_nametoindex("lo");
    ASSERT_NE(lo, 0u);
    auto a = address::parse("[fe80::1%lo]:22");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->to_string(), "[fe80::1%" + std::to_string(lo) + "]:22");
    auto again = address::parse(a->to_string());
    ASSERT_TRUE(again);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(again->data())->sin6_scope_id, lo);
    EXPECT_EQ(again->to_string(), a->to_string());
    EXPECT_EQ(address::parse("[fe80::1]:22")->to_string(), "[fe80::1]:22");  // none: none printed
}

class net_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(net_test);

// Echo server on `where`, one client that sends `n` bytes and checks the echo.
void echo_round_trip(const address& where) {
    auto srv = server::start(where, [](byte_stream& s) {
        char buf[4096];
        while (auto n = s.read_some(buf, sizeof buf)) {
            if (*n == 0 || !s.write_all(buf, *n)) break;
        }
    });
    ASSERT_TRUE(srv) << srv.error().message();
    auto c = stream::connect((*srv)->local_address(), 2s);
    ASSERT_TRUE(c) << c.error().message();
    std::string out(100000, '\0');
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<char>(i * 31 + 7);
    std::string in(out.size(), '\0');
    auto writer = spawn([&] { ASSERT_TRUE(c->write_all(out.data(), out.size())); });
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 5s));
    ASSERT_TRUE(writer->join());
    EXPECT_EQ(in, out);
    ASSERT_TRUE(c->close());
    (*srv)->stop(1s);
    EXPECT_EQ((*srv)->active(), 0u);
}

TEST_P(net_test, tcp_ipv4_echo) { echo_round_trip(address::ipv4_loopback(0)); }
TEST_P(net_test, tcp_ipv6_echo) {
    auto probe = listener::listen(address::ipv6_loopback(0));
    if (!probe) GTEST_SKIP() << "no IPv6 loopback";
    echo_round_trip(address::ipv6_loopback(0));
}
// A Unix listener whose backlog is full and which accepts nothing: a connect to it must not
// succeed. Its EAGAIN was taken for a connect under way, whose outcome the socket's SO_ERROR
// then gave as 0 (io_uring): the caller got a socket connected to nothing.
TEST_P(net_test, a_connect_to_a_full_unix_backlog_does_not_succeed) {
    auto addr = *address::unix_abstract("gluon-full-backlog-" + std::to_string(::getpid()) + "-" +
                                         std::to_string(static_cast<int>(GetParam())));
    listen_options lo;
    lo.backlog = 1;
    auto l = listener::listen(addr, lo);
    ASSERT_TRUE(l) << l.error().message();
    std::vector<stream> queued;
    for (int i = 0; i < 4; ++i) {  // fill the backlog (the kernel takes backlog + 1)
        auto c = stream::connect(addr, 50ms);
        if (!c) break;
        queued.push_back(std::move(*c));
    }
    ASSERT_FALSE(queued.empty());
    auto c = stream::connect(addr, 200ms);
    EXPECT_FALSE(c) << "connected with " << queued.size() << " connections queued on a backlog of 1";
    if (!c) {
        EXPECT_EQ(c.error(), std::errc::timed_out) << c.error().message();
    }
}

TEST_P(net_test, unix_path_echo) {
    std::string path = "/tmp/gluon-net-test-" + std::to_string(::getpid()) + ".sock";
    ::unlink(path.c_str());
    echo_round_trip(*address::unix_path(path));
    ::unlink(path.c_str());
}
TEST_P(net_test, unix_abstract_echo) {
    echo_round_trip(*address::unix_abstract("gluon-net-test-" + std::to_string(::getpid())));
}

TEST_P(net_test, server_turns_nagle_off_on_accepted_tcp_connections) {
    int nodelay = -1;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        nodelay = s.socket()->get_option(IPPROTO_TCP, TCP_NODELAY).value_or(-2);
    });
    ASSERT_TRUE(srv);
    auto c = stream::connect((*srv)->local_address(), 2s);
    ASSERT_TRUE(c);
    char b;
    EXPECT_EQ(c->read_some(&b, 1, 2s).value_or(9), 0u);  // the handler returned: EOF
    EXPECT_EQ(nodelay, 1);
    (*srv)->stop(1s);
}

// listen_options::nodelay holds for a listener's own accepts too, not only under a server.
TEST_P(net_test, a_listener_turns_nagle_off_on_what_it_accepts_as_asked) {
    for (bool on : {true, false}) {
        listen_options o;
        o.nodelay = on;
        auto l = listener::listen(address::ipv4_loopback(0), o);
        ASSERT_TRUE(l) << l.error().message();
        const address where = *l->local_address();
        auto c1 = stream::connect(where, 2s);
        ASSERT_TRUE(c1);
        auto a1 = l->accept(2s);
        ASSERT_TRUE(a1) << a1.error().message();
        EXPECT_EQ(a1->get_option(IPPROTO_TCP, TCP_NODELAY).value_or(-1), on ? 1 : 0);
        auto c2 = stream::connect(where, 2s);
        ASSERT_TRUE(c2);
        address peer;
        auto a2 = l->accept(peer, 2s);
        ASSERT_TRUE(a2) << a2.error().message();
        EXPECT_EQ(a2->get_option(IPPROTO_TCP, TCP_NODELAY).value_or(-1), on ? 1 : 0);
    }
}

TEST_P(net_test, send_file_streams_a_file_over_tcp) {
    char path[] = "/tmp/gluon-send-file-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    std::string data(2 * 1024 * 1024 + 17, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i ^ (i >> 9));
    ASSERT_EQ(::pwrite(file, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        (void)s.send_file(file, 0, data.size());
        (void)s.send_file(file, static_cast<int64_t>(data.size()) - 5, 10).error();  // runs off the end
    });
    ASSERT_TRUE(srv) << srv.error().message();
    auto c = stream::connect((*srv)->local_address(), 2s);
    ASSERT_TRUE(c);
    std::string in(data.size() + 5, '\0');
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 5s));
    EXPECT_TRUE(in.substr(0, data.size()) == data);
    EXPECT_EQ(in.substr(data.size()), data.substr(data.size() - 5));
    (*srv)->stop(1s);
    ::close(file);
}

TEST_P(net_test, connect_refused_is_a_clear_error) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    auto where = *l->local_address();
    ASSERT_TRUE(l->close());
    EXPECT_EQ(stream::connect(where, 2s).error(), std::errc::connection_refused);
}

TEST_P(net_test, half_close_and_peer_reset) {
    auto [a, b] = *stream::pair();
    ASSERT_TRUE(a.write_all("abc", 3));
    ASSERT_TRUE(a.shutdown(SHUT_WR));
    char buf[8];
    ASSERT_TRUE(b.read_exactly(buf, 3));
    EXPECT_EQ(b.read_some(buf, sizeof buf).value_or(99), 0u);  // EOF, but b can still send
    ASSERT_TRUE(b.write_all("xy", 2));
    ASSERT_TRUE(a.read_exactly(buf, 2));
    EXPECT_EQ(std::string(buf, 2), "xy");

    // A TCP peer that resets: the reader gets ECONNRESET, not a hang.
    auto l = listener::listen(address::ipv4_loopback(0));
    auto c = stream::connect(*l->local_address());
    auto s = l->accept(2s);
    ASSERT_TRUE(c && s);
    ASSERT_TRUE(c->set_linger(true, 0));
    ASSERT_TRUE(c->close());
    auto r = s->read_some(buf, sizeof buf, 2s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
}

// Data and the end of stream arrive together: the read that takes the data is short, and the
// end of stream must still be seen (the epoll engine waits for a new edge after a short read,
// and none follows a FIN it has already reported).
TEST_P(net_test, data_then_end_of_stream_in_one_arrival) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    for (int round = 0; round < 20; ++round) {
        auto c = stream::connect(*l->local_address());
        auto s = l->accept(2s);
        ASSERT_TRUE(c && s);
        char buf[64 * 1024];
        // The server is waiting in a read when data and FIN arrive.
        auto reader = spawn([&] {
            auto n = s->read_some(buf, sizeof buf, 2s);
            ASSERT_TRUE(n) << n.error().message();
            size_t got = *n;
            while (got < 3) {
                auto m = s->read_some(buf + got, sizeof buf - got, 2s);
                ASSERT_TRUE(m && *m > 0);
                got += *m;
            }
            auto eof = s->read_some(buf, sizeof buf, 2s);
            ASSERT_TRUE(eof) << eof.error().message();  // ETIMEDOUT here: the FIN was lost
            EXPECT_EQ(*eof, 0u);
        });
        this_fiber::yield();
        ASSERT_TRUE(c->write_all("abc", 3));
        ASSERT_TRUE(c->close());
        ASSERT_TRUE(reader->join());
    }
}

// A peeking read leaves the data queued: the next read must not wait for new data.
TEST_P(net_test, short_peek_then_read) {
    auto [a, b] = *stream::pair();
    char buf[64];
    // Settle b's readiness state: a read that empties it, then a wait that times out.
    ASSERT_TRUE(a.write_all("x", 1));
    ASSERT_TRUE(b.read_exactly(buf, 1));
    EXPECT_EQ(b.read_some(buf, sizeof buf, 10ms).error(), std::errc::timed_out);
    ASSERT_TRUE(a.write_all("hello", 5));
    auto p = fd::recv_some(b.get(), buf, sizeof buf, MSG_PEEK, 2s);
    ASSERT_TRUE(p);
    EXPECT_EQ(*p, 5u);
    auto r = b.read_some(buf, sizeof buf, 2s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 5u);
}

TEST_P(net_test, sending_to_a_closed_peer_is_epipe_not_sigpipe) {
    auto [a, b] = *stream::pair();
    ASSERT_TRUE(b.close());
    std::string big(1 << 20, 'x');
    auto r = a.write_all(big.data(), big.size(), 2s);  // SIGPIPE's default action would kill us
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error() == std::errc::broken_pipe || r.error() == std::errc::connection_reset);
}

TEST_P(net_test, recv_timeout_and_interrupt) {
    auto [a, b] = *stream::pair();
    char c;
    EXPECT_EQ(a.read_some(&c, 1, 10ms).error(), std::errc::timed_out);
    std::error_code got;
    auto f = spawn([&] { got = a.read_some(&c, 1).error(); });
    this_fiber::yield();
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
}

// A client that never reads: the server's send_all fills the socket buffers and times out with
// ETIMEDOUT (nothing lost from the caller's view: it knows the send failed), while the same
// server keeps answering another client.
TEST_P(net_test, slow_reader_times_out_the_sender_not_the_server) {
    std::atomic<int> slow_result{0};
    event slow_done;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        char first;
        if (!s.read_exactly(&first, 1)) return;
        if (first == 's') {  // the slow reader: push 64 MiB at it
            std::string big(1 << 20, 'z');
            for (int i = 0; i < 64; ++i) {
                auto r = s.write_all(big.data(), big.size(), 300ms);
                if (!r) {
                    slow_result = r.error().value();
                    break;
                }
            }
            slow_done.set();
            return;
        }
        char buf[512];
        while (auto n = s.read_some(buf, sizeof buf)) {  // everyone else: echo
            if (*n == 0 || !s.write_all(buf, *n)) break;
        }
    });
    ASSERT_TRUE(srv);
    auto slow = stream::connect((*srv)->local_address(), 2s);
    ASSERT_TRUE(slow);
    ASSERT_TRUE(slow->set_buffer_sizes(4096, 4096));
    ASSERT_TRUE(slow->write_all("s", 1));
    auto fast = stream::connect((*srv)->local_address(), 2s);
    ASSERT_TRUE(fast);
    ASSERT_TRUE(fast->write_all("fhello", 6));
    char echo[5];
    ASSERT_TRUE(fast->read_exactly(echo, 5, 2s));  // served while the slow one is stuck
    EXPECT_EQ(std::string(echo, 5), "hello");
    ASSERT_TRUE(slow_done.wait(5s));
    EXPECT_EQ(slow_result, ETIMEDOUT);
    ASSERT_TRUE(fast->write_all("again", 5));
    ASSERT_TRUE(fast->read_exactly(echo, 5, 2s));
    (*srv)->stop(1s);
}

// An operation on a registered (fixed) socket that finds it not ready waits for readiness on
// that socket, not on whatever file has the index's number in the process: here a pipe that
// never becomes readable. MSG_DONTWAIT makes io_uring hand the EAGAIN back instead of waiting
// in the kernel. Other engines refuse registered files.
TEST_P(net_test, a_registered_socket_that_is_not_ready_waits_on_itself) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    int never[2];  // the number of its read end is the socket's index
    ASSERT_EQ(::pipe2(never, O_CLOEXEC), 0);
    std::vector<int> table(static_cast<size_t>(never[0]) + 1, -1);  // -1: an empty slot
    table[static_cast<size_t>(never[0])] = sv[0];
    engine::engine* eng = current_engine();
    auto reg = eng->register_files(table.data(), static_cast<unsigned>(table.size()));
    if (eng->type() != engine::kind::io_uring) {
        EXPECT_EQ(reg.error(), std::errc::operation_not_supported);
    } else {
        ASSERT_TRUE(reg) << reg.error().message();
        char buf[8];
        long got = 0;
        bool started = false;
        auto reader = spawn([&] {
            auto op = engine::io_op::transfer(engine::opcode::recv, never[0], buf, sizeof buf, -1,
                                              MSG_DONTWAIT);
            op.fixed_file = true;
            started = true;
            got = run_op(op, deadline_after(5s));
        });
        ASSERT_TRUE(reader);
        while (!started) this_fiber::yield();
        // Queued after the recv: when it completes, the kernel has tried the recv and found
        // nothing, so the data below comes while the recv waits for readiness.
        engine::io_op nop;
        nop.code = engine::opcode::nop;
        ASSERT_EQ(run_op(nop), 0);
        ASSERT_EQ(::write(sv[1], "hi", 2), 2);
        ASSERT_TRUE(reader->join());
        EXPECT_EQ(got, 2);
        EXPECT_EQ(std::string(buf, 2), "hi");
        ASSERT_TRUE(eng->register_files(nullptr, 0));
    }
    for (int f : {sv[0], sv[1], never[0], never[1]}) ::close(f);
}

// More requests than the submission ring holds, queued between two looks at the completions,
// whose completions overflow the completion ring: each completes, once. When the submission
// ring is full and the kernel takes nothing from it (older kernels, 5.10 among them, while
// completions wait for room in the completion ring; an SQPOLL thread not caught up yet), the
// engine moves completions out of the ring and runs them later, in order. On a plain and an
// SQPOLL ring; where the kernel takes every submission at once, the plain ring never needs to.
TEST(io_uring_rings, more_requests_than_the_rings_hold_all_complete_once) {
    if (!engine::available(engine::kind::io_uring)) GTEST_SKIP() << "no io_uring";
    for (bool sqpoll : {false, true}) {
        init_options o;
        o.engine = engine::kind::io_uring;
        o.queue_depth = 4;  // 4 submissions, 16 completions
        o.sqpoll = sqpoll;
        o.log_engine = false;
        auto r = init(o);
        if (!r && sqpoll && r.error() == std::errc::operation_not_permitted) continue;
        ASSERT_TRUE(r) << r.error().message();
        constexpr int n = 300;
        std::vector<int> results(n, 1);
        std::vector<fiber> fibers;
        for (int i = 0; i < n; ++i) {
            auto f = spawn([&results, i] {
                engine::io_op nop;
                nop.code = engine::opcode::nop;
                results[static_cast<size_t>(i)] = static_cast<int>(run_op(nop, deadline_after(10s)));
            });
            ASSERT_TRUE(f);
            fibers.push_back(std::move(*f));
        }
        for (auto& f : fibers) ASSERT_TRUE(f.join());
        EXPECT_EQ(std::count(results.begin(), results.end(), 0), n) << (sqpoll ? "SQPOLL" : "plain");
        ASSERT_TRUE(fini());
    }
}

TEST_P(net_test, udp_round_trip) {
    auto srv = datagram::bind(address::ipv4_loopback(0));
    auto cli = datagram::bind(address::ipv4_loopback(0));
    ASSERT_TRUE(srv && cli);
    auto to = *srv->local_address();
    ASSERT_TRUE(cli->send_to("ping", 4, to));
    char buf[16];
    address from;
    auto n = srv->recv_from(buf, sizeof buf, from, 2s);
    ASSERT_TRUE(n);
    EXPECT_EQ(std::string(buf, *n), "ping");
    EXPECT_EQ(from.port(), cli->local_address()->port());
    EXPECT_EQ(srv->recv_from(buf, sizeof buf, from, 5ms).error(), std::errc::timed_out);
}

TEST_P(net_test, fd_passing_over_unix) {
    auto [a, b] = *stream::pair();
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    int send[1] = {p[1]};
    ASSERT_TRUE(a.send_fds("x", 1, send));
    ::close(p[1]);
    char c;
    int got[2] = {-1, -1};
    auto r = b.recv_fds(&c, 1, got);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->bytes, 1u);
    ASSERT_EQ(r->fds, 1u);
    EXPECT_FALSE(r->truncated);
    ASSERT_EQ(::write(got[0], "z", 1), 1);  // the passed fd is the pipe's write end
    char z;
    ASSERT_EQ(::read(p[0], &z, 1), 1);
    EXPECT_EQ(z, 'z');
    ::close(got[0]);
    ::close(p[0]);
}

// More fds than the receiver has room for: the data still arrives, the fds that fit are the
// caller's, and the others are closed, not leaked (a pipe whose every write end is closed
// reports POLLHUP on its read end).
TEST_P(net_test, fd_passing_with_more_fds_than_room_keeps_the_data_and_closes_the_rest) {
    auto [a, b] = *stream::pair();
    int p[3][2];
    for (auto& q : p) ASSERT_EQ(::pipe2(q, O_CLOEXEC), 0);
    const int send[3] = {p[0][1], p[1][1], p[2][1]};
    ASSERT_TRUE(a.send_fds("abc", 3, send));
    for (auto& q : p) ::close(q[1]);
    ASSERT_TRUE(a.write_all("def", 3));
    char buf[3];
    int got[1] = {-1};
    auto r = b.recv_fds(buf, sizeof buf, got, 2s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(std::string(buf, r->bytes), "abc");
    ASSERT_EQ(r->fds, 1u);
    EXPECT_TRUE(r->truncated);
    ASSERT_EQ(::write(got[0], "z", 1), 1);  // the first fd passed: pipe 0's write end
    char z;
    ASSERT_EQ(::read(p[0][0], &z, 1), 1);
    ::close(got[0]);
    for (auto& q : p) {
        pollfd pfd{q[0], POLLIN, 0};
        ASSERT_EQ(::poll(&pfd, 1, 0), 1);
        EXPECT_TRUE(pfd.revents & POLLHUP) << "a write end is still open";
        ::close(q[0]);
    }
    ASSERT_TRUE(b.read_exactly(buf, 3, 2s));  // the stream goes on where the message ended
    EXPECT_EQ(std::string(buf, 3), "def");
}

TEST_P(net_test, server_stop_interrupts_handlers_after_grace) {
    bool handler_saw_cancel = false;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        char c;
        handler_saw_cancel = s.read_some(&c, 1).error() == std::errc::operation_canceled;
    });
    ASSERT_TRUE(srv);
    auto c = stream::connect((*srv)->local_address());
    ASSERT_TRUE(c);
    while ((*srv)->active() == 0) this_fiber::yield();
    (*srv)->stop(5ms);
    EXPECT_TRUE(handler_saw_cancel);
    EXPECT_EQ((*srv)->active(), 0u);
    EXPECT_EQ(stream::connect((*srv)->local_address(), 1s).error(), std::errc::connection_refused);
}

std::atomic<int> g_backoff_logs{0};
void count_backoff(log::level, std::string_view line, void*) {
    if (line.find("backing off") != std::string_view::npos) ++g_backoff_logs;
}

// RLIMIT_NOFILE bounds fd *numbers*: a limit at the lowest free number forbids any new fd.
int lowest_free_fd() {
    int fd = 0;
    while (::fcntl(fd, F_GETFD) >= 0) ++fd;
    return fd;
}

TEST_P(net_test, accept_storm_past_the_fd_limit_keeps_serving) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "the sanitizer runtimes need fds of their own to report; none are left here";
#endif
    int served = 0;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        char c;
        if (s.read_exactly(&c, 1, 5s)) ++served;
    });
    ASSERT_TRUE(srv);
    // Client sockets made before the limit drops: connecting them needs no new fd, but the
    // server's accepts do, and fail with EMFILE until the limit is raised again.
    constexpr int n = 40;
    std::vector<stream> clients;
    for (int i = 0; i < n; ++i) clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    rlimit old{};
    ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
    g_backoff_logs = 0;
    log::set_sink(count_backoff, nullptr);
    rlimit low{static_cast<rlim_t>(lowest_free_fd()), old.rlim_max};
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    const address where = (*srv)->local_address();
    for (auto& c : clients) ASSERT_TRUE(fd::connect(c.get(), where.data(), where.size(), 2s));
    while (g_backoff_logs == 0) (void)this_fiber::sleep_for(1ms);  // the acceptor hit EMFILE
    const uint64_t accepted_during_storm = (*srv)->accepted();
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
    log::reset_sink();
    for (auto& c : clients) ASSERT_TRUE(c.write_all("k", 1));
    const deadline_t until = deadline_after(10s);
    while (served < n && mono_now_ns() < until) (void)this_fiber::sleep_for(1ms);
    EXPECT_EQ(accepted_during_storm, 0u);
    EXPECT_EQ(served, n);  // nobody was dropped: the listener survived the storm
    clients.clear();
    (*srv)->stop(1s);
}

// Many clients at once, each accepted and served once.
TEST_P(net_test, server_accepts_many_connections_at_once) {
    constexpr int n = 300;
    int served = 0;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        char c;
        if (s.read_exactly(&c, 1, 5s) && s.write_all(&c, 1, 5s)) ++served;
    });
    ASSERT_TRUE(srv);
    const address where = (*srv)->local_address();
    std::atomic<int> ok{0};
    std::vector<fiber> clients;
    for (int i = 0; i < n; ++i) {
        clients.push_back(*spawn([&, i] {
            auto c = stream::connect(where, 5s);
            if (!c) return;
            char out = static_cast<char>(i), in = 0;
            if (c->write_all(&out, 1, 5s) && c->read_exactly(&in, 1, 5s) && in == out) ++ok;
        }));
    }
    for (auto& f : clients) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok.load(), n);
    (*srv)->stop(1s);
    EXPECT_EQ(served, n);
    EXPECT_EQ((*srv)->accepted(), static_cast<uint64_t>(n));
    EXPECT_EQ((*srv)->active(), 0u);
}

int open_fds() {
    int n = 0;
    for (int fd = 0; fd < 4096; ++fd) n += ::fcntl(fd, F_GETFD) >= 0;
    return n;
}

// stop() cancels the pending accept and leaks no fd, whether connections were waiting to be
// accepted or none came at all.
TEST_P(net_test, server_stop_while_accepting_leaks_nothing) {
    for (int pending : {0, 1, 50}) {
        const int before = open_fds();
        {
            auto srv = server::start(address::ipv4_loopback(0), [](byte_stream& s) {
                char c;
                (void)s.read_some(&c, 1);  // until the client goes or stop interrupts
            });
            ASSERT_TRUE(srv);
            if (pending) this_fiber::yield();  // the acceptor submits its accept
            std::vector<stream> clients;
            for (int i = 0; i < pending; ++i) {
                clients.emplace_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
                const address where = (*srv)->local_address();
                ASSERT_TRUE(fd::connect(clients.back().get(), where.data(), where.size(), 2s));
            }
            (*srv)->stop(duration::zero());  // some connections are likely not accepted yet
            EXPECT_EQ((*srv)->active(), 0u);
            for (auto& c : clients) {  // every client sees its connection end
                char b;
                auto r = c.read_some(&b, 1, 2s);
                EXPECT_TRUE(!r || *r == 0);
            }
            EXPECT_EQ(stream::connect((*srv)->local_address(), 1s).error(),
                      std::errc::connection_refused);
        }
        EXPECT_EQ(open_fds(), before) << pending << " pending";
    }
}

}  // namespace
}  // namespace gluon::net
