// A peer that breaks the protocol gets its session closed with an error that says why, and
// never makes the server read outside its mappings: a hand-made client (the private layout
// classes, no session code) sends bad offsets, chains, queue indices, statuses, headers and fds.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <vector>

#include "gluon/ipc/listener.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "ipc/queue.h"
#include "ipc/region.h"
#include "ipc/shm.h"
#include "ipc/wire.h"
#include "test_support.h"

namespace gluon::ipc {
namespace {

using namespace std::chrono_literals;
constexpr uint32_t k_cap = 64;

struct raw_client {
    shm_file buf, q;
    mapping bm, qm;
    buffer_region region;
    queue_view send_q;
    net::stream s;
    size_t sparse_queue = 0;  // non-zero: a queue memfd of this many bytes, all of them a hole

    void header(wire::type t, uint32_t len = 8) {
        uint8_t h[8];
        wire::encode_header(h, len, 3, t);
        ASSERT_TRUE(s.write_all(h, 8, 5s));
    }
    void expect(wire::type t) {
        uint8_t h[8];
        ASSERT_TRUE(s.read_exactly(h, 8, 5s));
        ASSERT_EQ(h[7], uint8_t(t));
    }
    // A memfd of n zero bytes without seals, as shmipc-go makes them.
    static shm_file unsealed_memfd(size_t n) {
        int fd = ::memfd_create("shmipc-unsealed", MFD_CLOEXEC);
        EXPECT_GE(fd, 0);
        EXPECT_EQ(::ftruncate(fd, off_t(n)), 0);
        return *shm_file::adopt(fd);
    }
    // Up to the fds; `fds` of them are sent. sealed: memfds sealed as gluon's; acked: the
    // server is expected to take them.
    void connect(const net::address& a, int fds = 2, bool sealed = true, bool acked = true) {
        buf = sealed ? *shm_file::create_memfd("bad-buffer", 1u << 20) : unsealed_memfd(1u << 20);
        bm = *buf.map();
        const slice_class c[] = {{4092, 100}};
        region = *buffer_region::format(bm.data(), bm.size(), c);
        q = sealed ? *shm_file::create_memfd("bad-queue", 2 * queue_bytes(k_cap)) : unsealed_memfd(2 * queue_bytes(k_cap));
        qm = *q.map();
        queue_view::format(qm.data(), k_cap);
        queue_view::format(qm.data() + queue_bytes(k_cap), k_cap);
        send_q = queue_view(qm.data(), k_cap);
        if (sparse_queue) q = unsealed_memfd(sparse_queue);
        s = *net::stream::connect(a, 5s);
        header(wire::type::exchange_proto_version);
        expect(wire::type::exchange_proto_version);
        auto m = wire::encode_paths(wire::type::share_memory_by_memfd, 3, "q", "b");
        ASSERT_TRUE(s.write_all(m->data(), m->size(), 5s));
        expect(wire::type::ack_ready_recv_fd);
        const uint8_t zero = 0;
        const int both[2] = {buf.fd(), q.fd()};
        ASSERT_TRUE(s.send_fds(&zero, 1, std::span<const int>(both, size_t(fds)), 5s));
        if (fds == 2 && acked) expect(wire::type::ack_share_memory);
    }
    // FallbackData of n bytes for stream id, once for each id in ids, in one write (which may
    // fail: the server hangs up once it has seen too much).
    void fallback(const std::vector<uint32_t>& ids, size_t n) {
        std::vector<uint8_t> all;
        for (uint32_t id : ids) {
            uint8_t prefix[16];
            wire::encode_fallback_prefix(prefix, 3, id, n);
            all.insert(all.end(), prefix, prefix + 16);
            all.resize(all.size() + n, 'x');
        }
        (void)s.write_all(all.data(), all.size(), 5s);
    }
    void put(uint32_t id, uint32_t off, uint32_t status = 0) {
        ASSERT_EQ(send_q.put({id, off, status}), queue_view::outcome::ok);
        header(wire::type::polling);
    }
    uint32_t message(const char* text) {
        uint32_t abs = *region.pop(0);
        size_t n = std::strlen(text);
        std::memcpy(region.data(abs), text, n);
        region.set_field(abs, buffer_region::k_size, uint32_t(n));
        return abs;
    }
};

// The server side of a v3 handshake, by hand: it maps the client's memfds, then does nothing
// but what the test does with its socket and memory.
struct raw_server {
    net::address addr;
    net::listener l;
    net::stream s;
    mapping bm, qm;
    buffer_region region;
    queue_view recv_q;  // client -> server

    raw_server() {
        static std::atomic<int> n{0};
        addr = *net::address::unix_abstract("gluon-ipc-raw-server-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(n++));
        l = *net::listener::listen(addr);
    }
    void header(wire::type t) {
        uint8_t h[8];
        wire::encode_header(h, 8, 3, t);
        ASSERT_TRUE(s.write_all(h, 8, 5s));
    }
    // Reads one header of type t; its body (length - 8 bytes) is read too.
    void expect(wire::type t) {
        uint8_t h[8];
        ASSERT_TRUE(s.read_exactly(h, 8, 5s));
        ASSERT_EQ(h[7], uint8_t(t));
        std::vector<uint8_t> body(wire::get_u32(h) - 8);
        ASSERT_TRUE(s.read_exactly(body.data(), body.size(), 5s));
    }
    void handshake() {
        s = *l.accept(5s);
        expect(wire::type::exchange_proto_version);
        header(wire::type::exchange_proto_version);
        expect(wire::type::share_memory_by_memfd);
        header(wire::type::ack_ready_recv_fd);
        uint8_t one;
        int fds[2] = {-1, -1};
        auto got = s.recv_fds(&one, 1, fds, 5s);
        ASSERT_TRUE(got);
        ASSERT_EQ(got->fds, 2u);
        auto b = *shm_file::adopt(fds[0]);
        auto q = *shm_file::adopt(fds[1]);
        bm = *b.map();
        region = *buffer_region::attach(bm.data(), bm.size());
        qm = *q.map();
        recv_q = queue_view(qm.data(), queue_view::stored_cap(qm.data()));
        header(wire::type::ack_share_memory);
    }
    // Takes every message the client queued without looking at the socket, and clears the
    // working flag as a reader that went back to sleep does: the next message sends a Polling.
    void take_all() {
        queue_element e;
        while (recv_q.pop(e) == queue_view::outcome::ok) {
            if ((e.status & 0xff) != 0) continue;
            ASSERT_TRUE(region.push(e.offset));
        }
        ASSERT_TRUE(recv_q.mark_not_working());
    }
};

// Options of a gluon client whose region (1 MiB of 4 KiB slices) sends anything larger than it
// as FallbackData.
session_options small_client() {
    session_options o;
    o.path_prefix = "/dev/shm/gluon-ipc-bad-peer";
    o.buffer_size = 1u << 20;
    o.slices = {{4092, 100}};
    o.queue_cap = 64;
    return o;
}

class ipc_bad_peer : public test::engine_test {
protected:
    // A gluon client session to srv, whose handshake srv answers by hand. Its close waits for a
    // hang-up the raw peer never sends no longer than 200 ms.
    session connect_to(raw_server& srv) {
        fiber hs = *spawn([&] { srv.handshake(); });
        auto o = small_client();
        o.close_timeout = 200ms;
        auto c = session::connect(srv.addr, o);
        EXPECT_TRUE(hs.join());
        EXPECT_TRUE(c) << c.error().message();
        return std::move(*c);
    }
    // Should the call under test wait for srv's socket, srv reads it after 5 s, unless `done`
    // is released first: the test then fails instead of hanging.
    static fiber valve(raw_server& srv, counting_semaphore& done) {
        return *spawn([&] {
            if (done.acquire(5s)) return;
            uint8_t sink[64 << 10];
            while (auto r = srv.s.read_some(sink, sizeof sink, 5s))
                if (*r == 0) break;
        });
    }
    // Runs `attack` against a listener and returns the error the server's session ended with.
    std::error_code session_error(const std::function<void(raw_client&)>& attack, int fds = 2,
                                  const session_options& opts = {}, bool sealed = true) {
        static std::atomic<int> n{0};
        auto addr = *net::address::unix_abstract("gluon-ipc-bad-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        auto l = listener::listen(addr, opts);
        EXPECT_TRUE(l);
        std::error_code seen;
        fiber srv = *spawn([&] {
            auto s = l->accept(10s);
            if (!s) {
                seen = s.error();
                return;
            }
            for (;;) {
                auto st = s->accept_stream(10s);
                if (!st) break;
                uint8_t b[64];
                (void)st->recv_some(b, sizeof b, 10s);
            }
            seen = s->error();
        });
        raw_client c;
        const bool refused = opts.require_sealed && !sealed;
        c.connect(addr, fds, sealed, !refused);
        if (fds == 2 && !refused) attack(c);
        EXPECT_TRUE(srv.join());
        return seen;
    }
};
GLUON_ENGINE_TEST_SUITE(ipc_bad_peer);

// A v2 client that names files of its choosing: the error the server's accept ends with.
std::error_code paths_error(const std::string& queue, const std::string& buffer) {
    static std::atomic<int> n{0};
    auto addr = *net::address::unix_abstract("gluon-ipc-paths-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    auto l = listener::listen(addr);
    EXPECT_TRUE(l);
    std::error_code seen;
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        seen = s ? s->error() : s.error();
    });
    auto s = net::stream::connect(addr, 5s);
    EXPECT_TRUE(s);
    auto m = wire::encode_paths(wire::type::share_memory_by_file_path, 2, queue, buffer);
    EXPECT_TRUE(s->write_all(m->data(), m->size(), 5s));
    EXPECT_TRUE(srv.join());
    return seen;
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

// A file of `size` zero bytes at path.
void make_file(const std::string& path, size_t size) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::ftruncate(fd, off_t(size)), 0);
    ::close(fd);
}

// The server removes the files a v2 client names once it has mapped them, so it must open
// nothing but plain names in its shared-memory directory, and remove nothing that failed.
TEST_P(ipc_bad_peer, file_paths_outside_the_shared_memory_directory) {
    const std::string tag = "gluon-ipc-victim-" + std::to_string(::getpid());
    std::string tmp = ::testing::TempDir();
    if (!tmp.ends_with('/')) tmp += '/';
    const std::string victim = tmp + tag;
    make_file(victim, 4096);
    const std::string link = "/dev/shm/" + tag + "-link";
    ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
    const std::string junk = "/dev/shm/" + tag + "-junk";
    make_file(junk, 4096);

    auto e = paths_error(victim, victim);  // elsewhere
    EXPECT_EQ(e, std::errc::operation_not_permitted) << e.message();
    e = paths_error("/dev/shm/.." + victim, "/dev/shm/.." + victim);  // out through ".."
    EXPECT_EQ(e, std::errc::operation_not_permitted) << e.message();
    e = paths_error(link, link);  // out through a symbolic link
    EXPECT_EQ(e, std::errc::too_many_symbolic_link_levels) << e.message();
    EXPECT_TRUE(exists(victim));
    EXPECT_TRUE(exists(link));
    // A plain name in /dev/shm that is no queue: refused, and left in place.
    e = paths_error(junk, junk);
    EXPECT_EQ(e, errc::bad_queue) << e.message();
    EXPECT_TRUE(exists(junk));

    ::unlink(victim.c_str());
    ::unlink(link.c_str());
    ::unlink(junk.c_str());
}

TEST_P(ipc_bad_peer, an_offset_inside_a_slice) {
    auto e = session_error([](raw_client& c) { c.put(2, c.message("hello") + 8); });
    EXPECT_EQ(e, errc::bad_offset) << e.message();
}

TEST_P(ipc_bad_peer, an_offset_outside_the_region) {
    auto e = session_error([](raw_client& c) { c.put(2, 0xfffffff0u); });
    EXPECT_EQ(e, errc::bad_offset) << e.message();
}

TEST_P(ipc_bad_peer, a_size_beyond_the_slice) {
    auto e = session_error([](raw_client& c) {
        uint32_t abs = c.message("x");
        c.region.set_field(abs, buffer_region::k_size, 1u << 20);
        c.put(2, abs);
    });
    EXPECT_EQ(e, errc::bad_offset) << e.message();
}

TEST_P(ipc_bad_peer, a_chain_with_a_cycle) {
    auto e = session_error([](raw_client& c) {
        uint32_t a = c.message("a"), b = c.message("b");
        c.region.link(a, b);
        c.region.link(b, a);
        c.put(2, a);
    });
    EXPECT_EQ(e, errc::bad_chain) << e.message();
}

TEST_P(ipc_bad_peer, queue_indices_out_of_range) {
    auto e = session_error([](raw_client& c) {
        int64_t wild = 1 << 20;
        std::memcpy(c.qm.data() + k_queue_native.tail, &wild, 8);
        c.header(wire::type::polling);
    });
    EXPECT_EQ(e, errc::bad_queue) << e.message();
}

TEST_P(ipc_bad_peer, an_unknown_status) {
    auto e = session_error([](raw_client& c) { c.put(2, c.message("x"), 7); });
    EXPECT_EQ(e, errc::bad_queue) << e.message();
}

TEST_P(ipc_bad_peer, a_bad_magic) {
    auto e = session_error([](raw_client& c) {
        uint8_t h[8] = {0, 0, 0, 8, 0x12, 0x34, 3, 1};
        ASSERT_TRUE(c.s.write_all(h, 8, 5s));
    });
    EXPECT_EQ(e, errc::bad_header) << e.message();
}

TEST_P(ipc_bad_peer, a_handshake_message_in_the_data_phase) {
    auto e = session_error([](raw_client& c) { c.header(wire::type::ack_share_memory); });
    EXPECT_EQ(e, errc::unexpected_message) << e.message();
}

TEST_P(ipc_bad_peer, one_fd_instead_of_two) {
    auto e = session_error([](raw_client&) {}, 1);
    EXPECT_EQ(e, errc::handshake_failed) << e.message();
}

// Memory the client could shrink under the server's mapping (a SIGBUS when touched) is refused
// when sealed memory is required, and taken otherwise (as shmipc-go clients make it).
TEST_P(ipc_bad_peer, unsealed_memory_where_sealed_memory_is_required) {
    session_options o;
    o.require_sealed = true;
    auto e = session_error([](raw_client&) {}, 2, o, false);
    EXPECT_EQ(e, errc::unsealed_memory) << e.message();
    e = session_error([](raw_client& c) { c.put(2, c.message("hello") + 8); }, 2, {}, false);
    EXPECT_EQ(e, errc::bad_offset) << e.message();  // a session, ended by the bad offset
}

// A queue memfd that is one large hole (no queue): refused without the server allocating its
// pages first (mapping it with MAP_POPULATE filled the hole, whatever its size).
TEST_P(ipc_bad_peer, a_sparse_queue_far_larger_than_a_queue) {
    static std::atomic<int> n{0};
    auto addr = *net::address::unix_abstract("gluon-ipc-sparse-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    auto l = listener::listen(addr);
    ASSERT_TRUE(l);
    std::error_code seen;
    fiber srv = *spawn([&] {
        auto s = l->accept(10s);
        seen = s ? s->error() : s.error();
    });
    raw_client c;
    c.sparse_queue = 64u << 20;
    c.connect(addr, 2, true, false);
    ASSERT_TRUE(srv.join());
    EXPECT_EQ(seen, errc::bad_queue) << seen.message();
    struct stat st {};
    ASSERT_EQ(::fstat(c.q.fd(), &st), 0);
    EXPECT_LT(uint64_t(st.st_blocks) * 512, 1u << 20) << "bytes of the hole allocated";
}

// A message of one empty slice, then the stream's end: the reader meets no byte, returns
// ENODATA, and the slice still goes back to its list (it was lost on that return).
TEST_P(ipc_bad_peer, an_empty_slice_before_the_end_of_a_stream) {
    auto e = session_error([](raw_client& c) {
        const int32_t all = c.region.free_count(0);
        c.put(2, c.message(""));
        c.put(2, 0, 1);
        bool back = false;
        for (int i = 0; i < 5000 && !back; ++i) {
            back = c.region.free_count(0) == all;
            if (!back) (void)this_fiber::sleep_for(1ms);
        }
        EXPECT_TRUE(back) << c.region.free_count(0) << " of " << all << " slices free";
        ASSERT_TRUE(c.s.close());  // the server's session ends only now: its clean-up came after
    });
    EXPECT_EQ(e, std::errc::connection_reset) << e.message();
}

// FallbackData is held on the heap until read: a peer that sends more than the server reads
// ends its session instead of exhausting the server's memory.
TEST_P(ipc_bad_peer, more_fallback_data_than_the_reader_takes) {
    session_options o;
    o.max_fallback = 64u << 10;
    o.max_buffered_fallback = 256u << 10;
    auto e = session_error([](raw_client& c) { c.fallback({2, 2, 2, 2, 2, 2}, 64u << 10); }, 2, o);
    EXPECT_EQ(e, errc::backlog_exceeded) << e.message();
}

// Every new stream id costs the server memory until it is accepted: a client that starts more
// streams than the server has accepted ends its session.
TEST_P(ipc_bad_peer, more_new_streams_than_the_server_accepts) {
    session_options o;
    o.max_pending_streams = 8;
    auto e = session_error(
        [](raw_client& c) {
            std::vector<uint32_t> ids;
            for (uint32_t id = 2; id < 2 + 2 * 64; id += 2) ids.push_back(id);
            c.fallback(ids, 1);
        },
        2, o);
    EXPECT_EQ(e, errc::backlog_exceeded) << e.message();
}

TEST_P(ipc_bad_peer, a_fallback_larger_than_allowed) {
    auto e = session_error([](raw_client& c) { c.header(wire::type::fallback_data, 0x7fffffff); });
    EXPECT_EQ(e, errc::message_too_large) << e.message();
}

// A peer that does not read its socket: a FallbackData message that the writer's timeout cuts
// short ends the session. The peer would read the next message on the socket as the rest of
// this one (the session stayed up, and a Polling landed inside the payload).
TEST_P(ipc_bad_peer, a_fallback_message_cut_short_by_its_timeout) {
    raw_server srv;
    auto c = connect_to(srv);
    ASSERT_FALSE(HasFailure());
    auto st = *c.open_stream();
    std::vector<uint8_t> big(8u << 20, 'x');  // far more than the socket buffers hold
    auto w = st.send(big.data(), big.size(), 100ms);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error(), std::errc::timed_out) << w.error().message();
    EXPECT_EQ(c.error(), std::errc::timed_out) << c.error().message();
    // The peer finds the socket ended after part of the message, and nothing after it.
    std::vector<uint8_t> got;
    bool eof = false;
    uint8_t buf[64 << 10];
    while (!eof) {
        auto r = srv.s.read_some(buf, sizeof buf, 5s);
        ASSERT_TRUE(r) << r.error().message();
        got.insert(got.end(), buf, buf + *r);
        eof = *r == 0;
    }
    ASSERT_GE(got.size(), 16u);
    EXPECT_EQ(got[7], uint8_t(wire::type::fallback_data));
    EXPECT_EQ(wire::get_u32(got.data()), 16 + big.size());
    EXPECT_LT(got.size(), 16 + big.size());
}

// A peer that takes the messages from the queue but does not read its socket: once the socket
// is full, a send's wake-up (a Polling) cannot go, and the send still returns within its
// timeout (it waited for the socket without end). Once the peer reads again, the wake-up comes.
TEST_P(ipc_bad_peer, a_peer_that_stops_reading_its_socket) {
    raw_server srv;
    auto c = connect_to(srv);
    ASSERT_FALSE(HasFailure());
    auto st = *c.open_stream();
    counting_semaphore sends_done;
    fiber reader = valve(srv, sends_done);
    // Each message makes a Polling of 8 bytes; the socket holds a few hundred of them (each
    // costs the sender's buffer far more than 8 bytes): sends until one finds it full.
    const uint64_t polls = c.counters().polls_sent;
    int64_t longest = 0;
    size_t sent = 0;
    for (bool full = false; sent < 20000 && !full; ++sent) {
        const int64_t t0 = mono_now_ns();
        auto w = st.send("x", 1, 20ms);
        ASSERT_TRUE(w) << w.error().message() << " after " << sent << " sends";
        longest = std::max(longest, mono_now_ns() - t0);
        full = mono_now_ns() - t0 >= 20'000'000;
        srv.take_all();
    }
    // One more while the wake-up still waits for the socket: it needs none of its own.
    const int64_t t0 = mono_now_ns();
    ASSERT_TRUE(st.send("y", 1, 20ms));
    longest = std::max(longest, mono_now_ns() - t0);
    sends_done.release();
    ASSERT_TRUE(reader.join());
    EXPECT_LT(longest, 1'000'000'000) << "ns for a send with a 20 ms timeout";
    EXPECT_LT(sent, 20000u) << "the socket never filled";
    EXPECT_TRUE(c.healthy());
    // The peer reads again: one Polling for each send but the last, the one that could not go
    // among them.
    uint8_t buf[64 << 10];
    size_t read = 0;
    while (read < 8 * sent) {
        auto r = srv.s.read_some(buf, sizeof buf, 5s);
        ASSERT_TRUE(r) << r.error().message() << " with " << read << " of " << 8 * sent << " bytes read";
        ASSERT_GT(*r, 0u);
        read += *r;
    }
    EXPECT_EQ(read, 8 * sent);
    EXPECT_EQ(c.counters().polls_sent, polls + sent);
}

// A peer that takes neither its queue nor its socket: close() cannot tell it, and gives up
// after close_timeout (it waited without end, for the socket the wake-up fiber held). The
// stream is closed here anyway, and the session, of which nothing went out cut short, stays up.
TEST_P(ipc_bad_peer, close_gives_up_on_a_peer_that_takes_nothing) {
    raw_server srv;
    auto c = connect_to(srv);
    ASSERT_FALSE(HasFailure());
    auto st = *c.open_stream();
    counting_semaphore closed;
    fiber reader = valve(srv, closed);
    // Pollings until the socket is full (a send then waits its whole timeout: the wake-up is
    // left to a fiber that waits for the socket), then messages until the queue is full.
    bool full = false;
    for (size_t sent = 0; sent < 20000 && !full; ++sent) {
        const int64_t t0 = mono_now_ns();
        ASSERT_TRUE(st.send("x", 1, 20ms)) << "after " << sent << " sends";
        full = mono_now_ns() - t0 >= 20'000'000;
        srv.take_all();
    }
    ASSERT_TRUE(full) << "the socket never filled";
    result<void> w;
    for (uint32_t i = 0; i <= k_cap && w; ++i) w = st.send("y", 1, 20ms);
    ASSERT_FALSE(w) << "the queue never filled";
    ASSERT_EQ(w.error(), std::errc::timed_out) << w.error().message();
    const int64_t t0 = mono_now_ns();
    auto r = st.close();
    const int64_t took = mono_now_ns() - t0;
    closed.release();
    ASSERT_TRUE(reader.join());
    EXPECT_LT(took, 2'000'000'000) << "ns for a close with a 200 ms close_timeout";
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
    EXPECT_FALSE(st.is_open());
    auto z = st.send("z", 1, 20ms);
    ASSERT_FALSE(z);
    EXPECT_EQ(z.error(), std::errc::broken_pipe);
    EXPECT_TRUE(c.healthy()) << c.error().message();
}

}  // namespace
}  // namespace gluon::ipc
