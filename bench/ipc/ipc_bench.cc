// The gluon side of the IPC benchmark (B6): an echo server and a ping-pong client, over gluon's
// shmipc sessions or over a plain Unix socket. Messages are framed as shmipc-peer's (a u32
// little-endian length, then the payload), so either side can face bench/peers/shmipc-go.
//
//   ipc_bench server --addr PATH [--uds] [--linger-us N]
//   ipc_bench client --addr PATH [--uds] [--linger-us N] [--size N] [--streams N]
//                    [--duration SECONDS | --count N] [--verbose]
//
// The server prints "listening" once ready; the client prints
// "ok rtts=N ns=TOTAL p50=NS p99=NS" after checking every reply's length and bytes.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gluon/ipc/listener.h"
#include "gluon/ipc/session.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

struct config {
    bool server = false, uds = false;
    std::string addr;
    size_t size = 64;
    unsigned streams = 1;
    double duration = 1;
    long count = 0;
    long linger_us = 30;
    bool verbose = false;  // the client's session counters on stderr
};

ipc::session_options shm_options(const config& c) {
    ipc::session_options o;
    o.path_prefix = "/dev/shm/gluon-ipc-bench";
    o.buffer_size = 64u << 20;  // room for 16 streams of 4 MiB messages
    o.poll_linger = std::chrono::microseconds(c.linger_us);
    return o;
}

// Any byte stream: a shmipc stream or a Unix socket.
template <typename S>
result<void> write_frame(S& s, const uint8_t* p, size_t n);
template <>
result<void> write_frame(ipc::stream& s, const uint8_t* p, size_t n) { return s.send(p, n); }
template <>
result<void> write_frame(net::stream& s, const uint8_t* p, size_t n) { return s.write_all(p, n); }
// Reads the reply and checks it against what was sent: from the read views over shared
// memory (no copy), or copied out of the socket.
bool reply_matches(ipc::stream& s, const uint8_t* want, size_t n, std::vector<uint8_t>&) {
    while (n > 0) {
        auto v = s.read_view();
        if (!v) return false;
        size_t k = std::min(v->size(), n);
        if (std::memcmp(v->data(), want, k) != 0) return false;
        s.consume(k);
        want += k;
        n -= k;
    }
    return true;
}
bool reply_matches(net::stream& s, const uint8_t* want, size_t n, std::vector<uint8_t>& in) {
    return s.read_exactly(in.data(), n) && std::memcmp(in.data(), want, n) == 0;
}

// Copies len bytes from the stream's read views to out.
bool copy_views(ipc::stream& st, uint8_t* out, size_t len) {
    while (len > 0) {
        auto v = st.read_view();
        if (!v) return false;
        size_t k = std::min(v->size(), len);
        std::memcpy(out, v->data(), k);
        st.consume(k);
        out += k;
        len -= k;
    }
    return true;
}

// Echoes frames until the peer goes, one copy each: a frame that fits a slice is written into a
// reserved slice (one message, as shmipc-go's Flush sends); a larger one is sent from the read
// views piece by piece.
void echo_shm(ipc::stream st) {
    constexpr size_t k_one_slice = 131052;  // the largest slice of the default region
    for (;;) {
        uint32_t len;
        if (!st.recv_exactly(&len, 4)) break;
        if (4 + size_t(len) <= k_one_slice) {
            auto out = st.reserve(4 + size_t(len));
            if (!out) break;
            std::memcpy(out->data(), &len, 4);
            if (!copy_views(st, out->data() + 4, len) || !st.commit(4 + size_t(len))) break;
            continue;
        }
        if (!st.send(&len, 4)) break;
        for (size_t left = len; left > 0;) {
            auto v = st.read_view();
            if (!v) return;
            size_t k = std::min(v->size(), left);
            if (!st.send(v->data(), k)) return;
            st.consume(k);
            left -= k;
        }
    }
    (void)st.close();
}

void echo_uds(net::stream s) {
    std::vector<uint8_t> frame;
    for (;;) {
        uint32_t len;
        if (!s.read_exactly(&len, 4)) break;
        frame.resize(4 + size_t(len));
        std::memcpy(frame.data(), &len, 4);
        if (!s.read_exactly(frame.data() + 4, len) || !s.write_all(frame.data(), frame.size())) break;
    }
}

result<void> serve(const config& c) {
    auto addr = GLUON_TRY(net::address::unix_path(c.addr));
    if (c.uds) {
        ::unlink(c.addr.c_str());
        auto l = GLUON_TRY(net::listener::listen(addr));
        std::printf("listening\n");
        std::fflush(stdout);
        for (;;) {
            auto s = GLUON_TRY(l.accept());
            (void)GLUON_TRY(spawn([s = std::move(s)]() mutable { echo_uds(std::move(s)); })).detach();
        }
    }
    auto l = GLUON_TRY(ipc::listener::listen(addr, shm_options(c), true));
    std::printf("listening\n");
    std::fflush(stdout);
    for (;;) {
        auto s = GLUON_TRY(l.accept());
        (void)GLUON_TRY(spawn([s = std::move(s)]() mutable {
            std::vector<fiber> fs;
            while (auto st = s.accept_stream()) fs.push_back(*spawn(echo_shm, std::move(*st)));
            for (auto& f : fs) (void)f.join();
        })).detach();
    }
}

template <typename S>
void ping_pong(S& s, const config& c, unsigned seed, deadline_t until, std::vector<int64_t>& lat, bool& bad) {
    std::vector<uint8_t> out(4 + c.size), in(out.size());
    uint32_t len = uint32_t(c.size);
    std::memcpy(out.data(), &len, 4);
    for (size_t i = 0; i < c.size; ++i) out[4 + i] = uint8_t(i * 31 + seed);
    for (long k = 0; c.count ? k < c.count : mono_now_ns() < until; ++k) {
        int64_t t0 = mono_now_ns();
        if (!write_frame(s, out.data(), out.size()) || !reply_matches(s, out.data(), out.size(), in)) {
            bad = true;
            return;
        }
        lat.push_back(mono_now_ns() - t0);
    }
}

result<void> client(const config& c) {
    auto addr = GLUON_TRY(net::address::unix_path(c.addr));
    std::vector<std::vector<int64_t>> lats(c.streams);
    bool bad = false;
    std::vector<fiber> fs;
    ipc::session sess;
    std::vector<net::stream> socks;
    if (!c.uds) sess = GLUON_TRY(ipc::session::connect(addr, shm_options(c)));
    int64_t start = mono_now_ns();
    deadline_t until = start + int64_t(c.duration * 1e9);
    for (unsigned i = 0; i < c.streams; ++i) {
        if (c.uds) {
            auto s = GLUON_TRY(net::stream::connect(addr));
            fs.push_back(GLUON_TRY(spawn([&, i, s = std::move(s)]() mutable { ping_pong(s, c, i, until, lats[i], bad); })));
        } else {
            auto st = GLUON_TRY(sess.open_stream());
            fs.push_back(GLUON_TRY(spawn([&, i, st]() mutable {
                ping_pong(st, c, i, until, lats[i], bad);
                (void)st.close();
            })));
        }
    }
    for (auto& f : fs) (void)f.join();
    int64_t total = mono_now_ns() - start;
    if (bad) {
        std::printf("error: a reply was short or differed\n");
        return errno_error(EIO);
    }
    std::vector<int64_t> all;
    for (auto& l : lats) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    auto p = [&](double q) { return all.empty() ? 0 : all[size_t(double(all.size() - 1) * q)]; };
    std::printf("ok rtts=%zu ns=%lld p50=%lld p99=%lld\n", all.size(), (long long)total, (long long)p(0.5),
                (long long)p(0.99));
    if (!c.uds && c.verbose) {
        auto k = sess.counters();
        std::fprintf(stderr, "messages sent %llu received %llu; wake-ups sent %llu received %llu\n",
                     (unsigned long long)k.messages_sent, (unsigned long long)k.messages_received,
                     (unsigned long long)k.polls_sent, (unsigned long long)k.polls_received);
    }
    if (!c.uds) (void)sess.close();
    return {};
}

int usage() {
    std::fprintf(stderr, "usage: ipc_bench server|client --addr PATH [--uds] [--linger-us N] [--size N] "
                         "[--streams N] [--duration S | --count N] [--verbose]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    config c;
    if (!std::strcmp(argv[1], "server"))
        c.server = true;
    else if (std::strcmp(argv[1], "client"))
        return usage();
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        bool v = i + 1 < argc;
        if (a == "--uds") c.uds = true;
        else if (a == "--verbose") c.verbose = true;
        else if (a == "--addr" && v) c.addr = argv[++i];
        else if (a == "--size" && v) c.size = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--streams" && v) c.streams = unsigned(std::atoi(argv[++i]));
        else if (a == "--duration" && v) c.duration = std::atof(argv[++i]);
        else if (a == "--count" && v) c.count = std::atol(argv[++i]);
        else if (a == "--linger-us" && v) c.linger_us = std::atol(argv[++i]);
        else return usage();
    }
    if (c.addr.empty()) return usage();
    init_options o;
    o.log_engine = false;
    auto r = run(o, [&] { return c.server ? serve(c) : client(c); });
    if (!r) {
        std::fprintf(stderr, "ipc_bench: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}
