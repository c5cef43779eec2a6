// Sessions between two gluon peers over every engine: both handshakes, single and chained
// messages, zero-copy writes and reads, many streams, fallback, close, a dead peer, a full
// region, and a peer that breaks the protocol. After each, the free lists are back at capacity.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gluon/ipc/listener.h"
#include "gluon/http/server.h"
#include "gluon/ipc/session.h"
#include "gluon/ipc/session_manager.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "ipc/session_impl.h"
#include "test_support.h"

namespace gluon::ipc {
namespace {

using namespace std::chrono_literals;

net::address unique_address() {
    static std::atomic<int> n{0};
    return *net::address::unix_abstract("gluon-ipc-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
}

// Files of ours left in /dev/shm.
int leftover_files(const std::string& prefix) {
    int n = 0;
    DIR* d = opendir("/dev/shm");
    if (!d) return 0;
    while (dirent* e = readdir(d))
        if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    closedir(d);
    return n;
}

// Waits (polling, bounded) until the peer has given back every slice, then checks it.
void expect_full(const session& s) {
    auto full = [&] {
        for (const auto& l : s.occupancy())
            if (l.free != int32_t(l.capacity)) return false;
        return true;
    };
    for (int i = 0; i < 5000 && !full(); ++i) (void)this_fiber::sleep_for(1ms);
    for (const auto& l : s.occupancy()) EXPECT_EQ(l.free, int32_t(l.capacity)) << "list of " << l.slice_size;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 31 + seed);
    return v;
}

struct param {
    engine::kind engine;
    memory_mode mode;
};

class ipc_session : public test::engine_test {
protected:
    session_options options(memory_mode m, size_t buffer_size = 4u << 20) {
        session_options o;
        o.mode = m;
        o.path_prefix = "/dev/shm/" + prefix_;
        o.buffer_size = buffer_size;
        o.slices = {{1020, 30}, {16380, 40}, {65532, 30}};
        o.queue_cap = 64;
        return o;
    }
    void TearDown() override {
        EXPECT_EQ(leftover_files(prefix_ + "_"), 0);  // "_": pid 2710 is not pid 27101
        test::engine_test::TearDown();
    }
    std::string prefix_ = "gluon-ipc-test-" + std::to_string(::getpid());
};
GLUON_ENGINE_TEST_SUITE(ipc_session);

// Echoes every stream of s (a fiber each) until the session ends. sends_must_succeed: a failed
// send is a test failure (false: the test may close the session under a stream).
void echo_streams(session& s, bool sends_must_succeed) {
    std::vector<fiber> workers;
    while (auto st = s.accept_stream()) {
        workers.push_back(*spawn([st = *st, sends_must_succeed]() mutable {
            while (auto v = st.read_view()) {
                auto n = v->size();
                if (!st.send(v->data(), n)) {
                    EXPECT_FALSE(sends_must_succeed) << "echo send failed";
                    break;
                }
                st.consume(n);
            }
            (void)st.close();
        }));
    }
    for (auto& w : workers) (void)w.join();
}

// An echo server: every stream's bytes come back on it until the client closes it.
fiber echo_server(listener& l, std::atomic<bool>& done, std::vector<session>* keep = nullptr) {
    return *spawn([&l, &done, keep] {
        auto s = l.accept(10s);
        ASSERT_TRUE(s) << s.error().message();
        echo_streams(*s, true);
        done = true;
        if (keep) keep->push_back(std::move(*s));
    });
}

// Options of a session manager to addr.
manager_options manager_to(const net::address& addr, const session_options& o, unsigned sessions = 1) {
    manager_options mo;
    mo.address = addr;
    mo.session = o;
    mo.sessions = sessions;
    return mo;
}

void round_trip(stream& st, size_t n, uint8_t seed) {
    auto out = pattern(n, seed);
    ASSERT_TRUE(st.send(out.data(), out.size()));
    std::vector<uint8_t> in(n);
    auto r = st.recv_exactly(in.data(), n, 10s);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(in, out);
}

// A stream from m, a round trip of n bytes on it, and the stream put back.
void manager_round_trip(session_manager& m, size_t n, uint8_t seed) {
    auto st = m.get_stream();
    ASSERT_TRUE(st) << st.error().message();
    round_trip(*st, n, seed);
    m.put_back(std::move(*st));
}

void echo_scenario(ipc_session& t, session_options o) {
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    std::atomic<bool> done{false};
    fiber srv = echo_server(*l, done);
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->version(), o.mode == memory_mode::memfd ? 3 : 2);
    auto st = c->open_stream();
    ASSERT_TRUE(st);
    EXPECT_EQ(st->id(), 2u);  // shmipc's first stream id
    for (size_t n : {size_t(1), size_t(64), size_t(1020), size_t(4096), size_t(65532), size_t(200000)})
        round_trip(*st, n, uint8_t(n));
    // Zero-copy write.
    auto buf = st->reserve(100);
    ASSERT_TRUE(buf);
    std::memset(buf->data(), 7, 100);
    ASSERT_TRUE(st->commit(100));
    std::vector<uint8_t> in(100);
    ASSERT_TRUE(st->recv_exactly(in.data(), 100, 10s));
    EXPECT_EQ(in, std::vector<uint8_t>(100, 7));
    // Sixteen streams at once.
    std::vector<stream> many;
    for (int i = 0; i < 16; ++i) many.push_back(*c->open_stream());
    for (int i = 0; i < 16; ++i) {
        auto out = pattern(3000, uint8_t(i));
        ASSERT_TRUE(many[i].send(out.data(), out.size()));
    }
    for (int i = 0; i < 16; ++i) {
        std::vector<uint8_t> got(3000);
        ASSERT_TRUE(many[i].recv_exactly(got.data(), got.size(), 10s));
        EXPECT_EQ(got, pattern(3000, uint8_t(i)));
        ASSERT_TRUE(many[i].close());
    }
    ASSERT_TRUE(st->close());
    auto cnt = c->counters();
    EXPECT_GT(cnt.messages_sent, 20u);
    EXPECT_EQ(cnt.fallbacks_sent, 0u);
    // Every slice comes back once the server has read the closes.
    expect_full(*c);
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(srv.join());
    EXPECT_TRUE(done);
    (void)t;
}

// Handshakes run side by side: a client that connects and says nothing delays no other, and
// its failure is reported once its handshake times out.
TEST_P(ipc_session, a_silent_client_delays_no_other) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.handshake_timeout = 3s;
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    auto silent = net::stream::connect(addr, 5s);  // connected, never a byte
    ASSERT_TRUE(silent);
    result<session> c = errno_error(EAGAIN);
    fiber cl = *spawn([&] { c = session::connect(addr, o); });
    const int64_t t0 = mono_now_ns();
    auto s = l->accept(2s);
    ASSERT_TRUE(s) << s.error().message();
    EXPECT_LT(std::chrono::nanoseconds(mono_now_ns() - t0), 2s);
    ASSERT_TRUE(cl.join());
    ASSERT_TRUE(c) << c.error().message();
    auto failed = l->accept(10s);  // the silent one, when its handshake gives up
    EXPECT_FALSE(failed);
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(l->close());
    EXPECT_EQ(l->accept(1s).error(), std::errc::bad_file_descriptor);
}

TEST_P(ipc_session, echo_memfd) { echo_scenario(*this, options(memory_mode::memfd)); }
TEST_P(ipc_session, echo_dev_shm) { echo_scenario(*this, options(memory_mode::dev_shm)); }

TEST_P(ipc_session, fallback_when_a_message_exceeds_the_region) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::atomic<bool> done{false};
    fiber srv = echo_server(*l, done);
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st = c->open_stream();
    round_trip(*st, 3u << 20, 5);  // larger than the whole region: FallbackData both ways
    EXPECT_TRUE(st->in_fallback());
    round_trip(*st, 10, 6);  // and the stream stays on the socket, in order
    EXPECT_GE(c->counters().fallbacks_sent, 2u);
    EXPECT_GE(c->counters().fallbacks_received, 1u);
    ASSERT_TRUE(st->close());
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(srv.join());
}

// A write beyond the region and beyond max_fallback goes as several FallbackData messages, each
// within what the peer accepts (one message of it all ended the peer's session).
TEST_P(ipc_session, fallback_larger_than_max_fallback_goes_in_pieces) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.max_fallback = 256u << 10;
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::atomic<bool> done{false};
    fiber srv = echo_server(*l, done);
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st = c->open_stream();
    round_trip(*st, 3u << 20, 7);  // 12 messages of 256 KiB (the echo comes back in slices)
    EXPECT_TRUE(st->in_fallback());
    EXPECT_GE(c->counters().fallbacks_sent, 12u);
    EXPECT_TRUE(c->healthy()) << c->error().message();
    ASSERT_TRUE(st->close());
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(srv.join());
    EXPECT_TRUE(done);
}

TEST_P(ipc_session, a_full_region_blocks_the_writer_until_its_timeout) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.slices = {{65532, 100}};
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::vector<session> kept;
    std::atomic<bool> got_stream{false};
    // A server that accepts the stream and never reads it.
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        ASSERT_TRUE(s);
        auto st = s->accept_stream(10s);
        ASSERT_TRUE(st);
        got_stream = true;
        kept.push_back(std::move(*s));
    });
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st = c->open_stream();
    auto chunk = pattern(60000, 1);
    int sent = 0;
    for (;; ++sent) {
        auto r = st->send(chunk.data(), chunk.size(), 50ms);
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::timed_out);
            break;
        }
        ASSERT_LT(sent, 100);
    }
    EXPECT_GT(sent, 5);
    EXPECT_GT(c->counters().full_waits, 0u);
    ASSERT_TRUE(srv.join());
    // The reader frees what it was sent when it closes: the writer could go on.
    ASSERT_TRUE(kept[0].close());
    expect_full(*c);
    ASSERT_TRUE(c->close());
}

TEST_P(ipc_session, a_dead_peer_wakes_every_waiter) {
    auto o = options(memory_mode::memfd);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        ASSERT_TRUE(s);
        auto st = s->accept_stream(10s);
        ASSERT_TRUE(st);
        // Gone without a word (a crash looks the same from the socket).
    });
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st1 = c->open_stream();
    auto st2 = c->open_stream();
    ASSERT_TRUE(st1->send("x", 1));
    std::atomic<int> woken{0};
    fiber w = *spawn([&] {
        uint8_t b;
        auto r = st2->recv_some(&b, 1);
        EXPECT_FALSE(r);
        ++woken;
    });
    uint8_t b;
    auto r = st1->recv_some(&b, 1, 10s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    ASSERT_TRUE(w.join());
    EXPECT_EQ(woken, 1);
    EXPECT_FALSE(c->healthy());
    ASSERT_TRUE(srv.join());
    ASSERT_TRUE(c->close());
}

TEST_P(ipc_session, many_sessions_share_nothing_and_clean_up) {
    auto o = options(memory_mode::dev_shm);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::atomic<int> served{0};
    fiber srv = *spawn([&] {
        std::vector<fiber> fs;
        for (int i = 0; i < 3; ++i) {
            auto s = l->accept(10s);
            ASSERT_TRUE(s);
            fs.push_back(*spawn([s = std::move(*s), &served]() mutable {
                auto st = s.accept_stream(10s);
                ASSERT_TRUE(st);
                uint8_t b[4];
                ASSERT_TRUE(st->recv_exactly(b, 4, 10s));
                ASSERT_TRUE(st->send(b, 4));
                ++served;
                uint8_t e;
                EXPECT_EQ(st->recv_some(&e, 1, 10s).error(), std::errc::no_message_available);
            }));
        }
        for (auto& f : fs) (void)f.join();
    });
    for (int i = 0; i < 3; ++i) {
        auto c = session::connect(addr, o);
        ASSERT_TRUE(c);
        auto st = c->open_stream();
        ASSERT_TRUE(st->send("ping", 4));
        char b[4];
        ASSERT_TRUE(st->recv_exactly(b, 4, 10s));
        ASSERT_TRUE(st->close());
    }
    ASSERT_TRUE(srv.join());
    EXPECT_EQ(served, 3);
}

// A stream is a net::byte_stream: HTTP/1.1 served over shared memory, unchanged.
TEST_P(ipc_session, http_over_a_stream) {
    auto o = options(memory_mode::memfd);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        ASSERT_TRUE(s);
        auto st = s->accept_stream(10s);
        ASSERT_TRUE(st);
        http::serve_connection(*st, [](http::request&, http::response& r) { r.body("hello over shm\n"); }, {});
        (void)st->close();
    });
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st = c->open_stream();
    net::byte_stream& bs = *st;
    const std::string req = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    ASSERT_TRUE(bs.write_all(req.data(), req.size(), 10s));
    std::string got;
    char buf[512];
    for (;;) {
        auto n = bs.read_some(buf, sizeof buf, 10s);
        ASSERT_TRUE(n) << n.error().message();
        if (*n == 0) break;  // the server closed the stream: end of stream
        got.append(buf, *n);
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
    EXPECT_NE(got.find("hello over shm"), std::string::npos) << got;
    ASSERT_TRUE(bs.close());
    ASSERT_TRUE(srv.join());
    expect_full(*c);
    ASSERT_TRUE(c->close());
}

// shutdown() ends this side's writing; reading goes on.
TEST_P(ipc_session, shutdown_is_a_half_close) {
    auto o = options(memory_mode::memfd);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        ASSERT_TRUE(s);
        auto st = s->accept_stream(10s);
        ASSERT_TRUE(st);
        std::string all;
        char b[64];
        while (auto n = st->read_some(b, sizeof b, 10s)) {
            if (*n == 0) break;
            all.append(b, *n);
        }
        ASSERT_TRUE(st->write_all(all.data(), all.size(), 10s));  // answers after the client's end
        (void)st->close();
    });
    auto c = session::connect(addr, o);
    auto st = c->open_stream();
    ASSERT_TRUE(st->write_all("abc", 3, 10s));
    ASSERT_TRUE(st->shutdown(10s));
    EXPECT_EQ(st->send("x", 1).error(), std::errc::broken_pipe);
    char b[3];
    ASSERT_TRUE(st->read_exactly(b, 3, 10s));
    EXPECT_EQ(std::string(b, 3), "abc");
    ASSERT_TRUE(srv.join());
    ASSERT_TRUE(st->close());
    ASSERT_TRUE(c->close());
}

// The session manager reuses a stream put back, and closes one that fell back to the socket.
TEST_P(ipc_session, session_manager_pools_streams) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::atomic<bool> done{false};
    std::vector<session> kept;
    fiber srv = echo_server(*l, done, &kept);
    auto m = session_manager::connect(manager_to(addr, o));
    ASSERT_TRUE(m) << m.error().message();
    auto a = m->get_stream();
    ASSERT_TRUE(a);
    round_trip(*a, 100, 1);
    uint32_t id = a->id();
    m->put_back(std::move(*a));
    auto b = m->get_stream();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->id(), id);  // the same stream again
    round_trip(*b, 3u << 20, 2);  // larger than the region: FallbackData, so not pooled
    EXPECT_TRUE(b->in_fallback());
    m->put_back(std::move(*b));
    auto c = m->get_stream();
    ASSERT_TRUE(c);
    EXPECT_NE(c->id(), id);
    round_trip(*c, 10, 3);
    m->put_back(std::move(*c));
    ASSERT_EQ(m->sessions().size(), 1u);
    expect_full(*m->sessions()[0]);
    ASSERT_TRUE(m->close());
    ASSERT_TRUE(srv.join());
}

// A server for the redial tests: accepts sessions until its listener is closed and echoes every
// stream; `live` lets a test close a session from the server's side.
struct echo_sessions {
    std::optional<listener> l;
    // Shared with the test, which may close a session while its fiber still runs.
    std::vector<std::shared_ptr<session>> live;
    std::vector<fiber> sessions;
    fiber acceptor;

    // Listens on addr and serves what comes. Errors: listener::listen's.
    result<void> start(const net::address& addr, const session_options& o) {
        l.emplace(GLUON_TRY(listener::listen(addr, o)));
        acceptor = *spawn([this] {
            for (;;) {
                auto s = l->accept();
                if (!s) {
                    EXPECT_EQ(s.error(), std::errc::operation_canceled) << s.error().message();
                    break;
                }
                auto sp = std::make_shared<session>(std::move(*s));
                live.push_back(sp);
                sessions.push_back(*spawn([this, sp] {
                    echo_streams(*sp, false);
                    std::erase(live, sp);
                    (void)sp->close();
                }));
            }
        });
        return {};
    }
    // Stops accepting, closes the listener, and waits for the sessions to end (kill: closes
    // them from this side first).
    void stop(bool kill) {
        (void)acceptor.interrupt();
        (void)acceptor.join();
        ASSERT_TRUE(l->close());
        if (kill)
            for (auto& s : std::vector<std::shared_ptr<session>>(live)) (void)s->close();
        for (auto& f : sessions) (void)f.join();
        sessions.clear();
    }
};

// Waits (polling, bounded) until pred holds.
template <typename P>
bool eventually(P pred) {
    for (int i = 0; i < 10000 && !pred(); ++i) (void)this_fiber::sleep_for(1ms);
    return pred();
}

bool all_healthy(const session_manager& m) {
    for (const session* s : m.sessions())
        if (!s->healthy()) return false;
    return true;
}

// The server goes away without a HotRestart and comes back: get_stream fails with the redial's
// error while it is away, then connects again (new shared memory) and the streams work.
TEST_P(ipc_session, session_manager_dials_again_after_the_server_went_away) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    echo_sessions srv1;
    ASSERT_TRUE(srv1.start(addr, o));
    manager_options mo = manager_to(addr, o);
    mo.redial_min = 20ms;
    mo.redial_max = 100ms;
    auto m = session_manager::connect(mo);
    ASSERT_TRUE(m) << m.error().message();
    manager_round_trip(*m, 100, 1);

    // The server dies: its sessions close and nobody listens any more.
    srv1.stop(true);
    ASSERT_TRUE(eventually([&] { return !all_healthy(*m); }));
    auto down = m->get_stream();
    ASSERT_FALSE(down);
    EXPECT_EQ(down.error(), std::errc::connection_refused) << down.error().message();
    EXPECT_EQ(m->redials(), 0u);

    // A new server on the same address: within the backoff, get_stream connects to it.
    echo_sessions srv2;
    ASSERT_TRUE(srv2.start(addr, o));
    std::optional<stream> b;
    ASSERT_TRUE(eventually([&] {
        auto r = m->get_stream();
        if (r) b = std::move(*r);
        return r.has_value();
    }));
    EXPECT_EQ(m->redials(), 1u);
    round_trip(*b, 70000, 2);  // a chain of slices: the new region works
    m->put_back(std::move(*b));
    ASSERT_EQ(m->sessions().size(), 1u);
    EXPECT_TRUE(m->sessions()[0]->healthy());
    expect_full(*m->sessions()[0]);
    ASSERT_TRUE(m->close());
    srv2.stop(false);
}

// One of two sessions dies (the server closed it): the next get_stream dials that one again on
// the same shared memory and keeps the other.
TEST_P(ipc_session, session_manager_dials_one_dead_session_again) {
    auto o = options(memory_mode::dev_shm, 1u << 20);
    auto addr = unique_address();
    echo_sessions srv;
    ASSERT_TRUE(srv.start(addr, o));
    auto m = session_manager::connect(manager_to(addr, o, 2));
    ASSERT_TRUE(m) << m.error().message();
    ASSERT_TRUE(eventually([&] { return srv.live.size() == 2; }));
    const session* kept = m->sessions()[1];
    (void)std::shared_ptr<session>(srv.live[0])->close();
    ASSERT_TRUE(eventually([&] { return !all_healthy(*m); }));
    EXPECT_TRUE(kept->healthy());
    // Streams come from the first session for 32 calls, then the second: use both.
    for (int i = 0; i < 64; ++i) {
        SCOPED_TRACE(i);
        ASSERT_NO_FATAL_FAILURE(manager_round_trip(*m, 200, uint8_t(i)));
    }
    EXPECT_EQ(m->redials(), 1u);
    ASSERT_EQ(m->sessions().size(), 2u);
    EXPECT_TRUE(all_healthy(*m));
    EXPECT_EQ(m->sessions()[1], kept);
    ASSERT_TRUE(m->close());
    srv.stop(false);
}

// Session managers and plain sessions with one path prefix, all live in one process, name their
// files apart. (Two managers once both made "<prefix>_<pid>_0_buffer": the second failed with
// EEXIST, and a plain session's file of that name, removed and made again, was mapped stale by a
// shmipc-go server, which caches mappings by path.)
TEST_P(ipc_session, session_managers_and_sessions_never_share_a_file_name) {
    auto o = options(memory_mode::dev_shm, 1u << 20);
    auto addr = unique_address();
    echo_sessions srv;
    ASSERT_TRUE(srv.start(addr, o));
    auto plain = session::connect(addr, o);
    ASSERT_TRUE(plain) << plain.error().message();
    const manager_options mo = manager_to(addr, o);
    auto a = session_manager::connect(mo);
    ASSERT_TRUE(a) << a.error().message();
    auto b = session_manager::connect(mo);
    ASSERT_TRUE(b) << b.error().message();
    auto st = plain->open_stream();
    ASSERT_TRUE(st);
    round_trip(*st, 300, 1);
    ASSERT_TRUE(st->close());
    manager_round_trip(*a, 300, 2);
    manager_round_trip(*b, 300, 2);
    ASSERT_TRUE(a->close());
    ASSERT_TRUE(b->close());
    ASSERT_TRUE(plain->close());
    srv.stop(false);
}

// A server that requires sealed memory takes a gluon client's memfds (sealed against shrinking)
// and refuses /dev/shm files, which cannot be sealed.
TEST_P(ipc_session, required_seals_take_memfds_and_refuse_files) {
    for (memory_mode m : {memory_mode::memfd, memory_mode::dev_shm}) {
        SCOPED_TRACE(int(m));
        auto o = options(m, 1u << 20);
        o.require_sealed = true;
        auto addr = unique_address();
        auto l = listener::listen(addr, o);
        ASSERT_TRUE(l);
        std::error_code seen;
        fiber srv = *spawn([&] {
            auto s = l->accept(10s);
            if (!s) {
                seen = s.error();
                return;
            }
            echo_streams(*s, true);
        });
        auto c = session::connect(addr, o);  // v2 sends its paths and does not wait for an answer
        ASSERT_TRUE(c) << c.error().message();
        if (m == memory_mode::memfd) {
            auto st = c->open_stream();
            ASSERT_TRUE(st);
            round_trip(*st, 5000, 1);
            ASSERT_TRUE(st->close());
            ASSERT_TRUE(c->close());
            ASSERT_TRUE(srv.join());
        } else {
            ASSERT_TRUE(srv.join());  // before the client removes its files
            ASSERT_TRUE(c->close());
        }
        if (m == memory_mode::memfd)
            EXPECT_FALSE(seen) << seen.message();
        else
            EXPECT_EQ(seen, errc::unsealed_memory) << seen.message();
    }
}

// Streams a session still keeps (closed ones it forgot are not counted).
size_t kept_streams(const session& s) {
    auto* si = const_cast<detail::session_impl*>(static_cast<const detail::session_impl*>(s.impl_owner()));
    std::lock_guard lk(si->mu);
    return si->streams.size();
}

// A connected pair: a server session s (accepted from l) and its client c.
struct session_pair {
    listener l;
    std::optional<session> s, c;

    explicit session_pair(const session_options& o) {
        auto addr = unique_address();
        auto lr = listener::listen(addr, o);
        EXPECT_TRUE(lr) << lr.error().message();
        if (!lr) return;
        l = std::move(*lr);
        fiber acc = *spawn([&] {
            auto r = l.accept(10s);
            EXPECT_TRUE(r) << r.error().message();
            if (r) s = std::move(*r);
        });
        auto r = session::connect(addr, o);
        EXPECT_TRUE(r) << r.error().message();
        if (r) c = std::move(*r);
        EXPECT_TRUE(acc.join());
    }
    bool ok() const { return s && c; }
};

// A server forgets a stream it closed first once the client closes it too (it used to keep
// every such stream for the session's life).
TEST_P(ipc_session, the_server_forgets_streams_it_closed_first) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    std::optional<session> s;
    fiber acc = *spawn([&] {
        auto r = l->accept(10s);
        ASSERT_TRUE(r) << r.error().message();
        s = std::move(*r);
    });
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(acc.join());
    ASSERT_TRUE(s);
    for (int i = 0; i < 50; ++i) {
        auto st = c->open_stream();
        ASSERT_TRUE(st);
        ASSERT_TRUE(st->send("ping", 4));
        auto ss = s->accept_stream(10s);
        ASSERT_TRUE(ss);
        char b[4];
        ASSERT_TRUE(ss->recv_exactly(b, 4, 10s));
        ASSERT_TRUE(ss->send("pong", 4));
        ASSERT_TRUE(ss->close());  // the server first
        ASSERT_TRUE(st->recv_exactly(b, 4, 10s));
        ASSERT_TRUE(st->close());
    }
    EXPECT_TRUE(eventually([&] { return kept_streams(*s) == 0; })) << kept_streams(*s) << " streams kept";
    EXPECT_EQ(kept_streams(*c), 0u);
    expect_full(*c);
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(s->close());
}

// A client that never closes its streams: the server remembers only the last
// max_pending_streams of those it closed first (it kept every one for the session's life).
TEST_P(ipc_session, the_server_forgets_the_oldest_streams_a_client_never_closes) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.max_pending_streams = 8;
    session_pair p(o);
    ASSERT_TRUE(p.ok());
    std::vector<stream> open;  // the client's, never closed
    for (int i = 0; i < 50; ++i) {
        auto st = p.c->open_stream();
        ASSERT_TRUE(st);
        ASSERT_TRUE(st->send("ping", 4));
        auto ss = p.s->accept_stream(10s);
        ASSERT_TRUE(ss);
        char b[4];
        ASSERT_TRUE(ss->recv_exactly(b, 4, 10s));
        ASSERT_TRUE(ss->close());
        open.push_back(std::move(*st));
    }
    EXPECT_EQ(kept_streams(*p.s), 8u);
    // The latest are still known: the client's data for one of them is dropped, not a stream.
    ASSERT_TRUE(open.back().send("late", 4));
    ASSERT_TRUE(open.front().send("late", 4));  // forgotten: a new stream
    auto again = p.s->accept_stream(10s);
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_EQ(again->id(), open.front().id());
    EXPECT_TRUE(p.s->healthy());
    ASSERT_TRUE(p.c->close());
    ASSERT_TRUE(p.s->close());
}

size_t hot_restarts_kept(const session& s) {
    auto* si = const_cast<detail::session_impl*>(static_cast<const detail::session_impl*>(s.impl_owner()));
    std::lock_guard lk(si->mu);
    return si->hot_restarts.size();
}

// A server records the acknowledgements of the HotRestarts it sent and no other: one entry for
// every epoch a client acknowledged let a client grow the server's memory without end.
TEST_P(ipc_session, the_server_records_acks_only_of_hot_restarts_it_sent) {
    session_pair p(options(memory_mode::memfd, 1u << 20));
    ASSERT_TRUE(p.ok());
    for (uint64_t epoch = 100; epoch < 1100; ++epoch) ASSERT_TRUE(p.c->ack_hot_restart(epoch));
    ASSERT_TRUE(p.s->send_hot_restart(5));
    ASSERT_TRUE(eventually([&] { return p.c->hot_restart_requested() == std::optional<uint64_t>(5); }));
    ASSERT_TRUE(p.c->ack_hot_restart(5));
    // The socket keeps order: once 5 is acknowledged, the acks before it have been read.
    ASSERT_TRUE(eventually([&] { return p.s->hot_restart_acked(5); }));
    EXPECT_FALSE(p.s->hot_restart_acked(100));
    EXPECT_FALSE(p.s->hot_restart_acked(1099));
    EXPECT_EQ(hot_restarts_kept(*p.s), 1u);
    EXPECT_TRUE(p.s->healthy());
    ASSERT_TRUE(p.c->close());
    ASSERT_TRUE(p.s->close());
}

// Control messages after close() fail with the session's error, as every other call does; they
// went to the socket, which close() had taken away, and failed with EBADF.
TEST_P(ipc_session, control_messages_after_close_fail_with_the_sessions_error) {
    session_pair p(options(memory_mode::memfd, 1u << 20));
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(p.c->close());
    ASSERT_TRUE(p.s->close());
    const auto closed = make_error_code(errc::session_closed);
    auto ack = p.c->ack_hot_restart(1);
    ASSERT_FALSE(ack);
    EXPECT_EQ(ack.error(), closed) << ack.error().message();
    auto restart = p.s->send_hot_restart(1);
    ASSERT_FALSE(restart);
    EXPECT_EQ(restart.error(), closed) << restart.error().message();
}

// A reader interrupted while data is on its way gets the data, and the interrupt stays pending
// for its next call (the contract of gluon/runtime/fiber.h). read_view took the interrupt and
// returned the data: a fiber interrupted to stop reading read on and waited again.
TEST_P(ipc_session, an_interrupt_that_meets_data_stays_pending) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.poll_linger = 0ns;  // the server's reader yields once after a message, then sleeps
    session_pair p(o);
    ASSERT_TRUE(p.ok());
    auto a = *p.c->open_stream();
    auto b = *p.c->open_stream();
    ASSERT_TRUE(a.send("0", 1));
    auto sa = p.s->accept_stream(10s);
    ASSERT_TRUE(sa);
    char x;
    ASSERT_TRUE(sa->recv_exactly(&x, 1, 10s));
    std::optional<result<std::span<const uint8_t>>> first, second;
    bool pending = false;
    fiber r = *spawn([&] {
        first = sa->read_view(10s);
        if (*first) sa->consume((*first)->size());
        pending = this_fiber::interrupt_pending();
        second = sa->read_view(5s);
    });
    this_fiber::yield();  // r waits for data
    // The server's reader wakes this fiber for stream b, then yields behind it: the next message
    // is in the queue and r's interrupt queues r behind the reader, which delivers the message
    // before r runs.
    ASSERT_TRUE(b.send("1", 1));
    ASSERT_TRUE(p.s->accept_stream(10s));
    ASSERT_TRUE(a.send("2", 1));
    ASSERT_TRUE(r.interrupt());
    ASSERT_TRUE(r.join());
    ASSERT_TRUE(first && *first) << "the interrupt came first: " << (*first).error().message();
    EXPECT_TRUE(pending) << "the interrupt was taken by a read that returned data";
    ASSERT_TRUE(second);
    ASSERT_FALSE(*second);
    EXPECT_EQ(second->error(), std::errc::operation_canceled) << second->error().message();
    ASSERT_TRUE(p.c->close());
    ASSERT_TRUE(p.s->close());
}

// The registry of client regions a server session was accepted with (its listener's).
std::shared_ptr<detail::region_registry> registry_of(const session& s) {
    return static_cast<const detail::session_impl*>(s.impl_owner())->registry;
}

size_t registry_size(detail::region_registry& r) {
    std::lock_guard lk(r.mu);
    return r.size();
}

// A listener forgets the regions of clients that came and went (it kept an entry for each
// client ever seen, for its whole life).
TEST_P(ipc_session, the_listener_forgets_regions_of_clients_gone) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    constexpr size_t k_clients = 100;
    std::shared_ptr<detail::region_registry> registry;
    size_t most = 0;
    for (size_t i = 0; i < k_clients; ++i) {
        std::optional<session> s;
        fiber acc = *spawn([&] {
            auto r = l->accept(10s);
            ASSERT_TRUE(r) << r.error().message();
            s = std::move(*r);
        });
        auto c = session::connect(addr, o);  // a region of its own: a new memfd each time
        ASSERT_TRUE(c) << c.error().message();
        ASSERT_TRUE(acc.join());
        ASSERT_TRUE(s);
        if (!registry) registry = registry_of(*s);
        most = std::max(most, registry_size(*registry));
        ASSERT_TRUE(c->close());
        ASSERT_TRUE(s->close());
    }
    // One client at a time: entries of gone clients are purged as new ones come (16 at least
    // are let accumulate first), not one kept per client.
    EXPECT_LE(most, 32u);
}

// With fallback_after, a writer that waited that long for space sends over the socket instead.
TEST_P(ipc_session, fallback_after_waiting_for_space) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.slices = {{65532, 100}};
    o.fallback_after = 20ms;
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    std::vector<uint8_t> got;
    counting_semaphore sent(0);
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        ASSERT_TRUE(s);
        auto st = s->accept_stream(10s);
        ASSERT_TRUE(st);
        ASSERT_TRUE(sent.acquire(10s));  // reads nothing until the client has sent it all

        uint8_t b[65536];
        for (;;) {
            auto n = st->recv_some(b, sizeof b, 10s);
            if (!n) break;
            got.insert(got.end(), b, b + *n);
        }
    });
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c);
    auto st = c->open_stream();
    auto chunk = pattern(60000, 4);
    for (int i = 0; i < 30; ++i) ASSERT_TRUE(st->send(chunk.data(), chunk.size(), 5s)) << i;
    EXPECT_TRUE(st->in_fallback());
    EXPECT_GE(c->counters().fallbacks_sent, 1u);
    ASSERT_TRUE(st->shutdown(5s));
    sent.release();
    ASSERT_TRUE(srv.join());
    ASSERT_EQ(got.size(), 30u * 60000);  // every byte, in order
    for (int i = 0; i < 30; ++i) ASSERT_EQ(std::memcmp(got.data() + i * 60000, chunk.data(), 60000), 0) << i;
    expect_full(*c);
    ASSERT_TRUE(c->close());
}

// The socket of a session (to make its peer see a hang-up without the session's clean-up).
int socket_of(const session& s) { return static_cast<const detail::session_impl*>(s.impl_owner())->sock.get(); }

// Yields (this vCPU's other fibers run, its engine is polled) until pred holds, for 10 s at
// most: for a condition that must be seen within microseconds, which a sleep would miss.
template <typename P>
bool spin_until(P pred) {
    const deadline_t until = deadline_after(10s);
    while (!pred() && mono_now_ns() < until) this_fiber::yield();
    return pred();
}

// A send on another vCPU that found the session up while the peer hung up and this side closed
// it: the element it put after close() had drained the send queue held its slices for the
// region's life (and the send reported success). Each round ends the session while a large
// message is being copied into its slices on the other vCPU, between the send's check of the
// session and its put.
TEST_P(ipc_session, a_send_on_another_vcpu_puts_nothing_after_close_drained_the_queue) {
    auto o = options(memory_mode::memfd, 32u << 20);
    o.slices = {{4194300, 100}};  // messages of 8 MB: a copy of a millisecond or so
    o.poll_linger = 0ns;
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    const std::vector<uint8_t> big(8'000'000, 7);
    for (int round = 0; round < 10; ++round) {
        SCOPED_TRACE(round);
        session_pair p(o);
        ASSERT_TRUE(p.ok());
        auto st = p.c->open_stream();
        ASSERT_TRUE(st);
        std::atomic<int> sent{0};
        fiber writer = *spawn([&] {
            ASSERT_TRUE((*rt)->run(0, [&] {
                while (st->send(big.data(), big.size(), 10s)) ++sent;
            }));
        });
        fiber reader = *spawn([&] {
            auto ss = p.s->accept_stream(10s);
            if (!ss) return;
            while (auto v = ss->read_view()) ss->consume(v->size());
        });
        ASSERT_TRUE(eventually([&] { return sent >= 1; }));
        // Once a send has ended, the next one is copying its message. This vCPU keeps running
        // (yielding) from here, so that it notices the end of the session in a few
        // microseconds, well within that copy.
        const int seen = sent;
        ASSERT_TRUE(spin_until([&] { return sent != seen; }));
        // The server hangs up as a crashed one would: its session, closed only at the end,
        // takes nothing from the queue meanwhile.
        ASSERT_EQ(::shutdown(socket_of(*p.s), SHUT_RDWR), 0);
        ASSERT_TRUE(spin_until([&] { return !p.c->healthy(); }));
        ASSERT_TRUE(p.c->close());
        ASSERT_TRUE(writer.join());
        EXPECT_EQ(p.c->queued().first, 0) << "a message was put after close() drained the queue";
        ASSERT_TRUE(reader.join());
        ASSERT_TRUE(p.s->close());
    }
}

// The state of a session (for tests that reach into its queues).
detail::session_impl& impl_of(const session& s) {
    return *static_cast<detail::session_impl*>(const_cast<void*>(s.impl_owner()));
}

// A queue has one consumer at a time, also while the sessions end. The server's close() shut its
// socket down before it emptied its receive queue, and the client, which took that hang-up for
// a peer gone, emptied the same queue (its send queue) in its own close() at the same time:
// slices given back twice or never. Here the server's reader is never woken (the client found
// its flag set), so the server's close() has thousands of elements to give back while the
// client's close(), on another vCPU, follows the hang-up within microseconds.
TEST_P(ipc_session, a_queue_is_emptied_by_one_side_at_a_time_when_both_close) {
    auto o = options(memory_mode::memfd, 16u << 20);
    o.slices = {{1020, 100}};
    o.queue_cap = 4096;
    o.poll_linger = 0ns;
    auto rt = runtime::start(test::test_runtime(1, GetParam()));  // the server's vCPU
    ASSERT_TRUE(rt);
    const std::vector<uint8_t> msg(2040, 3);  // two slices each
    for (int round = 0; round < 50; ++round) {
        SCOPED_TRACE(round);
        auto addr = unique_address();
        std::optional<listener> l;
        std::optional<session> s;
        std::atomic<bool> accepted{false}, server_closed{false};
        ASSERT_TRUE((*rt)->run(0, [&] { l.emplace(*listener::listen(addr, o)); }));
        ASSERT_TRUE((*rt)->post(0, [&] {
            if (auto r = l->accept(10s)) s = std::move(*r);
            accepted = true;
        }));
        auto c = session::connect(addr, o);
        ASSERT_TRUE(c) << c.error().message();
        ASSERT_TRUE(eventually([&] { return accepted.load(); }));
        ASSERT_TRUE(s);
        impl_of(*c).send_q.mark_working();  // as if the server's reader ran: no Polling is sent
        auto st = c->open_stream();
        ASSERT_TRUE(st);
        for (uint32_t i = 0; i < o.queue_cap; ++i) ASSERT_TRUE(st->send(msg.data(), msg.size(), 5s)) << i;
        ASSERT_EQ(c->queued().first, int64_t(o.queue_cap));
        ASSERT_TRUE((*rt)->post(0, [&] {
            (void)s->close();
            server_closed = true;
        }));
        ASSERT_TRUE(spin_until([&] { return !c->healthy(); }));
        ASSERT_TRUE(c->close());
        ASSERT_TRUE(eventually([&] { return server_closed.load(); }));
        EXPECT_EQ(c->queued().first, 0);
        for (const auto& list : c->occupancy())
            ASSERT_EQ(list.free, int32_t(list.capacity)) << "list of " << list.slice_size;
        ASSERT_TRUE((*rt)->run(0, [&] {
            s.reset();
            l.reset();
        }));
    }
}

// Both sides close at once: the client's close() begins before its reader has seen the server
// hang up. What the client put after the server's last look at its receive queue was given
// back by neither side (the client took the hang-up for its own close's), and its slices stayed
// out of the region for good. Here the client's reader is on a vCPU held while the server closes
// and the client puts one more message.
TEST_P(ipc_session, what_is_put_while_both_close_comes_back) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto rt = runtime::start(test::test_runtime(1, GetParam()));  // the client's reader's vCPU
    ASSERT_TRUE(rt);
    std::atomic<bool> held{false}, go{false};
    struct unhold {
        std::atomic<bool>& go;
        ~unhold() { go = true; }  // before the runtime ends, whatever failed
    } unhold_vcpu{go};
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    std::optional<session> s, c;
    fiber acc = *spawn([&] {
        if (auto r = l->accept(10s)) s = std::move(*r);
    });
    ASSERT_TRUE((*rt)->run(0, [&] {
        if (auto r = session::connect(addr, o)) c = std::move(*r);
    }));
    ASSERT_TRUE(acc.join());
    ASSERT_TRUE(s && c);
    auto st = c->open_stream();
    ASSERT_TRUE(st);
    ASSERT_TRUE((*rt)->post(0, [&] {
        held = true;
        while (!go) std::this_thread::yield();
    }));
    ASSERT_TRUE(eventually([&] { return held.load(); }));
    ASSERT_TRUE(s->close());  // its receive queue emptied, it hangs up
    impl_of(*c).send_q.mark_working();  // no Polling (it would fail on the closed socket)
    const std::vector<uint8_t> msg(2040, 5);
    ASSERT_TRUE(st->send(msg.data(), msg.size(), 5s));  // the client has not seen the hang-up
    ASSERT_EQ(c->queued().first, 1);
    fiber release = *spawn([&] { go = true; });  // runs once close() waits for the reader
    ASSERT_TRUE(c->close());
    ASSERT_TRUE(release.join());
    EXPECT_EQ(c->queued().first, 0);
    expect_full(*c);
}

// close() on one vCPU while a write on another is in a send on the session's socket: close()
// closed the fd under the writer, whose send could then go to a file that took the number
// (on epoll it waited on: the fd's registration went with the close). Here the writer waits in
// a send (the server's vCPU is held, so nothing reads the socket), and its own vCPU is held until
// close() has joined the reader: the writer is still in its send when close() comes to the fd.
TEST_P(ipc_session, close_waits_for_a_send_in_progress_on_another_vcpu) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto rt = runtime::start(test::test_runtime(2, GetParam()));  // 0: the writer, 1: the server
    ASSERT_TRUE(rt);
    std::atomic<bool> server_held{false}, server_go{false}, writer_held{false}, writer_go{false};
    struct unhold {
        std::atomic<bool>&a, &b;
        ~unhold() { a = b = true; }  // before the runtime ends, whatever failed
    } unhold_all{server_go, writer_go};
    // Holds vCPU i's thread (none of its fibers runs) until `go`.
    auto hold = [&](unsigned i, std::atomic<bool>& held, std::atomic<bool>& go) {
        ASSERT_TRUE((*rt)->post(i, [&] {
            held = true;
            while (!go) std::this_thread::yield();
        }));
        ASSERT_TRUE(eventually([&] { return held.load(); }));
    };
    auto addr = unique_address();
    std::optional<listener> l;
    std::optional<session> s;
    std::atomic<bool> accepted{false};
    ASSERT_TRUE((*rt)->run(1, [&] { l.emplace(*listener::listen(addr, o)); }));
    ASSERT_TRUE((*rt)->post(1, [&] {
        if (auto r = l->accept(10s)) s = std::move(*r);
        accepted = true;
    }));
    auto c = session::connect(addr, o);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(eventually([&] { return accepted.load(); }));
    ASSERT_TRUE(s);
    hold(1, server_held, server_go);
    auto st = c->open_stream();
    ASSERT_TRUE(st);
    const std::vector<uint8_t> big(4u << 20, 1);  // beyond the region: FallbackData on the socket
    std::atomic<bool> written{false};
    ASSERT_TRUE((*rt)->post(0, [&] {
        EXPECT_FALSE(st->send(big.data(), big.size(), 5s));  // the session ends under it
        written = true;
    }));
    auto& impl = *static_cast<detail::session_impl*>(const_cast<void*>(c->impl_owner()));
    auto writer_in_send = [&] {
        if (!impl.write_mu.try_lock()) return true;
        impl.write_mu.unlock();
        return false;
    };
    ASSERT_TRUE(eventually(writer_in_send));
    hold(0, writer_held, writer_go);  // the writer waits in its send, its vCPU held
    bool in_send_after_close = true;
    fiber closer = *spawn([&] {
        ASSERT_TRUE(c->close());
        in_send_after_close = writer_in_send();
    });
    ASSERT_TRUE(eventually([&] { return impl.reader_done.load(); }));
    writer_go = true;
    ASSERT_TRUE(closer.join());
    EXPECT_FALSE(in_send_after_close) << "close() returned while a send on another vCPU was in progress on its socket";
    ASSERT_TRUE(eventually([&] { return written.load(); }));
    server_go = true;
    ASSERT_TRUE((*rt)->run(1, [&] {
        (void)s->close();
        (void)l->close();
    }));
}

// A stream the server closes while it sits in the manager's pool is not handed out again: the
// next get_stream() gave it, and its first request went nowhere (the server drops data for a
// stream it closed; the answer's read ended with ENODATA).
TEST_P(ipc_session, session_manager_passes_over_a_pooled_stream_the_server_closed) {
    auto o = options(memory_mode::memfd, 1u << 20);
    auto addr = unique_address();
    auto l = listener::listen(addr, o);
    ASSERT_TRUE(l);
    std::optional<session> s;
    fiber acc = *spawn([&] {
        auto r = l->accept(10s);
        ASSERT_TRUE(r) << r.error().message();
        s = std::move(*r);
    });
    auto m = session_manager::connect(manager_to(addr, o));
    ASSERT_TRUE(m) << m.error().message();
    ASSERT_TRUE(acc.join());
    ASSERT_TRUE(s);
    auto a = m->get_stream();
    auto b = m->get_stream();
    ASSERT_TRUE(a && b);
    const uint32_t a_id = a->id();
    ASSERT_TRUE(a->send("a", 1));
    ASSERT_TRUE(b->send("b", 1));
    auto sa = s->accept_stream(10s);
    auto sb = s->accept_stream(10s);
    ASSERT_TRUE(sa && sb);
    ASSERT_EQ(sa->id(), a_id);
    char x;
    ASSERT_TRUE(sa->recv_exactly(&x, 1, 10s));
    ASSERT_TRUE(sb->recv_exactly(&x, 1, 10s));
    ASSERT_TRUE(sa->send("A", 1));
    ASSERT_TRUE(a->recv_exactly(&x, 1, 10s));
    m->put_back(std::move(*a));  // open both ways: pooled
    ASSERT_TRUE(sa->close());    // the server closes it in the pool
    // One queue, read in order: once b's answer is here, a's close has been read too.
    ASSERT_TRUE(sb->send("B", 1));
    ASSERT_TRUE(b->recv_exactly(&x, 1, 10s));
    auto again = m->get_stream();
    ASSERT_TRUE(again) << again.error().message();
    EXPECT_TRUE(again->is_open());
    EXPECT_NE(again->id(), a_id) << "the stream the server closed came out of the pool";
    ASSERT_TRUE(again->close());
    ASSERT_TRUE(b->close());
    ASSERT_TRUE(m->close());
    ASSERT_TRUE(s->close());
}

// close() stops a lingering reader at once: the linger only yielded, never looking for the
// interrupt, so close(), which joins the reader, waited out all of poll_linger.
TEST_P(ipc_session, close_cuts_the_readers_linger_short) {
    auto o = options(memory_mode::memfd, 1u << 20);
    o.poll_linger = 20s;
    session_pair p(o);
    ASSERT_TRUE(p.ok());
    auto st = p.c->open_stream();
    ASSERT_TRUE(st);
    ASSERT_TRUE(st->send("x", 1));
    auto ss = p.s->accept_stream(10s);
    ASSERT_TRUE(ss);
    char x;
    ASSERT_TRUE(ss->recv_exactly(&x, 1, 10s));  // delivered: the server's reader lingers now
    const int64_t t0 = mono_now_ns();
    ASSERT_TRUE(p.s->close());
    EXPECT_LT(std::chrono::nanoseconds(mono_now_ns() - t0), 5s);
    ASSERT_TRUE(p.c->close());
}

}  // namespace
}  // namespace gluon::ipc
