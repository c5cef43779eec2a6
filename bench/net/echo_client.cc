// TCP echo load generator: single thread, epoll, non-blocking sockets.
//
// streaming: every connection keeps up to kMaxInflight bytes in flight,
//            sending in large batches and reading back independently.
// pingpong:  every connection sends one message and waits for its echo; the round trips
//            measured are reported as p50/p99 latency.
//
// Byte i of a connection's stream is (i * 131 + conn_id) & 0xff; every echoed
// byte is checked.  Any mismatch, EOF or socket error aborts with exit code 1.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "load_support.h"
#include "options.h"

namespace echo_bench {
namespace {

constexpr std::size_t kChunk = 64 * 1024;         // max bytes per read/write call
constexpr std::uint64_t kMaxInflight = 256 * 1024;  // streaming: per connection
constexpr int kConnectAttempts = 50;              // 100 ms apart
constexpr int kMaxEvents = 512;

// pattern[i] = (i * 131) & 0xff.  131 is odd, hence invertible mod 256, so
// connection c's byte at offset o equals pattern[(o + shift_c) & 0xff] with
// shift_c = c * 131^-1 mod 256: sends and checks are plain pointer offsets.
alignas(64) std::uint8_t pattern[kChunk + 256];
alignas(64) std::uint8_t rbuf[kChunk];

struct Conn {
    int fd = -1;
    std::uint32_t id = 0;
    std::uint32_t shift = 0;
    std::uint64_t sent = 0;   // stream offset of the next byte to send
    std::uint64_t recvd = 0;  // stream offset of the next byte to receive
    std::uint64_t sent_ns = 0;  // pingpong: when the current message's first byte was sent
    bool writable = true;
};

std::uint64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

using bench_net::fail;
using bench_net::now_s;
using bench_net::process_cpu_s;
using bench_net::raise_fd_limit;

// The generator's own sockets use CUBIC (Debian's default; Reno where CUBIC is refused), not
// whatever the machine defaults to. With BBR the generator paces its streaming sends with a
// timer per burst and settles, with any server, into a state of half the throughput (4M
// against 9M messages per second over loopback); which state a run lands in then decides the
// row. The servers' sockets keep the machine's default: they are what is measured.
void pin_congestion_control(int fd) {
    for (const char* cc : {"cubic", "reno"})
        if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, std::strlen(cc)) == 0) return;
}

int connect_one(const addrinfo* ai) {
    for (int attempt = 1;; ++attempt) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) fail("socket: %s", std::strerror(errno));
        timeval tv{5, 0};  // bounds a blocking connect too
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        pin_congestion_control(fd);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            return fd;
        }
        int e = errno;
        close(fd);
        bool transient = e == ECONNREFUSED || e == EINPROGRESS || e == ETIMEDOUT ||
                         e == EAGAIN || e == EINTR;
        if (!transient || attempt >= kConnectAttempts)
            fail("connect failed after %d attempt(s): %s", attempt, std::strerror(e));
        usleep(100 * 1000);
    }
}

class Client {
public:
    explicit Client(const Options& o) : opt_(o), size_(o.size) {}

    void run();

private:
    void send_some(Conn& c);
    void recv_some(Conn& c);
    void on_event(Conn& c, std::uint32_t events);
    void report(double wall_s, double msgs, double cpu_s);

    const Options& opt_;
    const std::uint64_t size_;
    std::uint64_t msgs_done_ = 0;  // completed messages, all connections
    bool recording_ = false;       // pingpong: round trips completed now are measured
    std::vector<std::uint32_t> rtt_ns_;
    std::vector<Conn> conns_;
};

// Sends while the socket accepts data and the mode's window allows it.
void Client::send_some(Conn& c) {
    while (c.writable) {
        std::uint64_t limit = opt_.mode == Mode::streaming
                                  ? c.recvd + kMaxInflight
                                  : (c.recvd / size_ + 1) * size_;  // end of current message
        if (c.sent >= limit) return;
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(limit - c.sent, kChunk));
        if (opt_.mode == Mode::streaming) {  // end batches on a message boundary
            std::uint64_t end = c.sent + n, aligned = end - end % size_;
            if (aligned > c.sent) n = static_cast<std::size_t>(aligned - c.sent);
        } else if (c.sent % size_ == 0) {
            c.sent_ns = mono_ns();
        }
        ssize_t w = write(c.fd, pattern + ((c.sent + c.shift) & 0xff), n);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN) {
                c.writable = false;
                return;
            }
            fail("conn %u: write: %s", c.id, std::strerror(errno));
        }
        c.sent += static_cast<std::uint64_t>(w);
        if (static_cast<std::size_t>(w) < n) c.writable = false;  // buffer full: wait for EPOLLOUT
    }
}

// Reads until the socket is drained and verifies every byte.
void Client::recv_some(Conn& c) {
    for (;;) {
        ssize_t n = read(c.fd, rbuf, kChunk);
        if (n > 0) {
            const std::size_t len = static_cast<std::size_t>(n);
            if (c.recvd + len > c.sent)
                fail("conn %u: received %llu bytes but only %llu were sent", c.id,
                     static_cast<unsigned long long>(c.recvd + len),
                     static_cast<unsigned long long>(c.sent));
            const std::uint8_t* want = pattern + ((c.recvd + c.shift) & 0xff);
            if (std::memcmp(rbuf, want, len) != 0) {
                std::size_t i = 0;
                while (rbuf[i] == want[i]) ++i;
                fail("conn %u: byte mismatch at stream offset %llu: expected 0x%02x, got 0x%02x",
                     c.id, static_cast<unsigned long long>(c.recvd + i), want[i], rbuf[i]);
            }
            const std::uint64_t completed = (c.recvd + len) / size_ - c.recvd / size_;
            msgs_done_ += completed;
            c.recvd += len;
            if (completed && recording_ && opt_.mode == Mode::pingpong)
                rtt_ns_.push_back(static_cast<std::uint32_t>(std::min<std::uint64_t>(mono_ns() - c.sent_ns, UINT32_MAX)));
            if (len < kChunk) return;  // drained; more data raises a new edge
            continue;
        }
        if (n == 0)
            fail("conn %u: unexpected EOF after %llu bytes", c.id,
                 static_cast<unsigned long long>(c.recvd));
        if (errno == EAGAIN) return;
        if (errno != EINTR) fail("conn %u: read: %s", c.id, std::strerror(errno));
    }
}

void Client::on_event(Conn& c, std::uint32_t events) {
    if (events & EPOLLERR) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        fail("conn %u: socket error: %s", c.id, std::strerror(err));
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) recv_some(c);
    if (events & EPOLLOUT) c.writable = true;
    send_some(c);  // reading may have opened the window
}

void Client::run() {
    for (std::size_t i = 0; i < sizeof pattern; ++i)
        pattern[i] = static_cast<std::uint8_t>(i * 131);
    std::uint32_t inv131 = 0;
    while (((inv131 * 131) & 0xff) != 1) ++inv131;

    raise_fd_limit(opt_.conns);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    std::string port = std::to_string(opt_.port);
    if (int rc = getaddrinfo(opt_.host.c_str(), port.c_str(), &hints, &ai); rc != 0)
        fail("cannot resolve %s: %s", opt_.host.c_str(), gai_strerror(rc));

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) fail("epoll_create1: %s", std::strerror(errno));
    conns_.resize(static_cast<std::size_t>(opt_.conns));
    for (std::size_t i = 0; i < conns_.size(); ++i) {
        Conn& c = conns_[i];
        c.id = static_cast<std::uint32_t>(i);
        c.shift = (c.id * inv131) & 0xff;
        c.fd = connect_one(ai);
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.ptr = &c;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev) != 0)
            fail("epoll_ctl: %s", std::strerror(errno));
    }
    freeaddrinfo(ai);

    if (opt_.cpu_pid) process_cpu_s(opt_.cpu_pid);  // fail early if unreadable
    for (Conn& c : conns_) send_some(c);

    const double warm_end = now_s() + opt_.warmup_s;
    const double end = warm_end + opt_.duration_s;
    bool measuring = false;
    double t0 = 0, cpu0 = 0;
    std::uint64_t msgs0 = 0;
    epoll_event events[kMaxEvents];
    for (;;) {
        double t = now_s();
        if (!measuring && t >= warm_end) {
            measuring = true;
            if (opt_.cpu_pid) cpu0 = process_cpu_s(opt_.cpu_pid);
            msgs0 = msgs_done_;
            recording_ = true;
            rtt_ns_.reserve(1 << 20);
            t0 = now_s();
        }
        if (measuring && t >= end) break;
        double left = (measuring ? end : warm_end) - t;
        int timeout_ms = static_cast<int>(left * 1000) + 1;
        int n = epoll_wait(ep, events, kMaxEvents, timeout_ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("epoll_wait: %s", std::strerror(errno));
        }
        for (int i = 0; i < n; ++i)
            on_event(*static_cast<Conn*>(events[i].data.ptr), events[i].events);
    }
    const double msgs = static_cast<double>(msgs_done_ - msgs0);
    const double cpu_s = opt_.cpu_pid ? process_cpu_s(opt_.cpu_pid) - cpu0 : 0.0;
    const double wall_s = now_s() - t0;

    for (Conn& c : conns_) close(c.fd);
    close(ep);
    report(wall_s, msgs, cpu_s);
}

void Client::report(double wall_s, double msgs, double cpu_s) {
    const double rate = msgs / wall_s;
    char lat[80] = "";
    if (!rtt_ns_.empty()) {
        auto pct = [&](double q) {
            auto k = static_cast<std::size_t>(q * static_cast<double>(rtt_ns_.size() - 1));
            std::nth_element(rtt_ns_.begin(), rtt_ns_.begin() + static_cast<std::ptrdiff_t>(k), rtt_ns_.end());
            return rtt_ns_[k] / 1000.0;
        };
        const double p50 = pct(0.50), p99 = pct(0.99);
        std::snprintf(lat, sizeof lat, opt_.json ? ",\"p50_us\":%.1f,\"p99_us\":%.1f" : " p50_us=%.1f p99_us=%.1f", p50, p99);
    }
    const double mb = rate * static_cast<double>(size_) / 1e6;
    const bool cpu = opt_.cpu_pid != 0;
    char cpu_buf[160] = "";
    if (opt_.json) {
        if (cpu && cpu_s > 0)
            std::snprintf(cpu_buf, sizeof cpu_buf,
                          "\"server_cpu_s\":%.3f,\"server_util\":%.3f,\"msgs_per_cpu_s\":%.0f",
                          cpu_s, cpu_s / wall_s, msgs / cpu_s);
        else if (cpu)
            std::snprintf(cpu_buf, sizeof cpu_buf,
                          "\"server_cpu_s\":0,\"server_util\":0,\"msgs_per_cpu_s\":null");
        else
            std::snprintf(cpu_buf, sizeof cpu_buf,
                          "\"server_cpu_s\":null,\"server_util\":null,\"msgs_per_cpu_s\":null");
        std::printf(
            "{\"mode\":\"%s\",\"conns\":%d,\"size\":%zu,\"msgs_per_s\":%.0f,\"mb_per_s\":%.1f,%s%s}\n",
            mode_name(opt_.mode), opt_.conns, opt_.size, rate, mb, cpu_buf, lat);
    } else {
        if (cpu)
            std::snprintf(cpu_buf, sizeof cpu_buf,
                          " server_cpu_s=%.3f server_util=%.3f msgs_per_cpu_s=%.0f", cpu_s,
                          cpu_s / wall_s, cpu_s > 0 ? msgs / cpu_s : 0.0);
        std::printf("mode=%s conns=%d size=%zu msgs_per_s=%.0f mb_per_s=%.1f%s%s\n",
                    mode_name(opt_.mode), opt_.conns, opt_.size, rate, mb, cpu_buf, lat);
    }
    std::fflush(stdout);
}

}  // namespace
}  // namespace echo_bench

int main(int argc, char** argv) {
    echo_bench::Options opts;
    std::string err;
    if (!echo_bench::parse_options(argc, argv, opts, err)) {
        if (!err.empty()) std::fprintf(stderr, "echo_client: %s\n", err.c_str());
        std::fputs(echo_bench::usage_text(), stderr);
        return 2;
    }
    echo_bench::Client(opts).run();
    return 0;
}
