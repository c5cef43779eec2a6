// Connection-rate load generator (B7): single thread, epoll, non-blocking connects.
//
// Keeps --inflight connections under way; each one connects, sends `GET / HTTP/1.0\r\n\r\n`,
// reads the response until the server closes, checks it (status 200, body "ok\n") and closes.
// The server closes first, so the client's sockets never enter TIME_WAIT (the server's do);
// connections rotate over --dst-addrs destination addresses 127.0.0.1, 127.0.0.2, ... (the
// server listens on the wildcard address) so that a 4-tuple comes back rarely while the
// server still holds it in TIME_WAIT. Any failed connection aborts with exit code 1.
//
//   connrate_client --port N [--inflight K] [--dst-addrs N] [--duration S] [--warmup S]
//                   [--json] [--cpu-pid PID[,PID...]]
//
// --cpu-pid: server processes whose utime+stime over the measured interval is reported (summed;
// a process's own threads only, so list every worker of a multi-process server).
// --pid-cpu PID:CPU[,PID:CPU...]: the server answers with the pid of the worker that served the
// connection as its body ("PID\n", nginx's `return 200 "$pid\n"`), and each worker is pinned to
// the given CPU. The client then reports locality: the share of connections served on the CPU
// that handled the SYN, which on loopback is the client's own (pin the client to one CPU).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sched.h>
#include <string>
#include <vector>

#include "load_support.h"

namespace {

constexpr char kRequest[] = "GET / HTTP/1.0\r\n\r\n";
constexpr char kBody[] = "ok\n";
constexpr std::size_t kMaxResponse = 1024;
constexpr int kMaxEvents = 256;

struct Options {
    int port = 0;
    int inflight = 32;
    int dst_addrs = 8;
    double duration_s = 5.0;
    double warmup_s = 1.0;
    bool json = false;
    std::vector<int> cpu_pids;  // server processes whose CPU time is summed
    std::map<long, int> pid_cpu;  // --pid-cpu: the body names the serving worker
};

struct Conn {
    int fd = -1;
    bool sent = false;
    std::size_t got = 0;
    char buf[kMaxResponse];
};

using bench_net::fail;
using bench_net::now_s;
using bench_net::process_cpu_s;

double servers_cpu_s(const std::vector<int>& pids) {
    double s = 0;
    for (int pid : pids) s += process_cpu_s(pid);
    return s;
}

// A complete response: status 200 and exactly the expected body ("ok\n", or with --pid-cpu the
// pid of one of the workers, returned in *worker).
bool response_ok(const char* r, std::size_t n, const Options& o, long* worker) {
    const std::string s(r, n);
    if (s.compare(0, 7, "HTTP/1.") != 0) return false;
    const std::size_t eol = s.find("\r\n");
    if (eol == std::string::npos || s.substr(8, 5) != " 200 ") return false;
    const std::size_t hdr_end = s.find("\r\n\r\n");
    if (hdr_end == std::string::npos) return false;
    const std::string body = s.substr(hdr_end + 4);
    if (o.pid_cpu.empty()) return body == kBody;
    char* end = nullptr;
    *worker = std::strtol(body.c_str(), &end, 10);
    return end && std::strcmp(end, "\n") == 0 && o.pid_cpu.count(*worker);
}

class Client {
public:
    explicit Client(const Options& o) : opt_(o) {}
    void run();

private:
    void open_one(Conn& c);
    void on_event(Conn& c, std::uint32_t events);

    const Options& opt_;
    int ep_ = -1;
    std::uint64_t done_ = 0;
    std::uint64_t local_ = 0;  // --pid-cpu: served on this client's CPU
    int my_cpu_ = -1;
    std::uint32_t next_dst_ = 0;
    std::vector<Conn> conns_;
};

void Client::open_one(Conn& c) {
    c.sent = false;
    c.got = 0;
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) fail("socket: %s", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(opt_.port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK + next_dst_);
    next_dst_ = (next_dst_ + 1) % static_cast<std::uint32_t>(opt_.dst_addrs);
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno != EINPROGRESS)
        fail("connect: %s", std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.ptr = &c;
    if (epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev) != 0) fail("epoll_ctl: %s", std::strerror(errno));
}

void Client::on_event(Conn& c, std::uint32_t events) {
    if (!c.sent && (events & (EPOLLOUT | EPOLLERR))) {
        ssize_t w = send(c.fd, kRequest, sizeof kRequest - 1, MSG_NOSIGNAL);
        if (w != static_cast<ssize_t>(sizeof kRequest - 1)) {
            int err = errno;
            if (w < 0 && err == EAGAIN) return;
            if (events & EPOLLERR) {
                socklen_t len = sizeof err;
                getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
            }
            fail("send: %s", w < 0 ? std::strerror(err) : "short write");
        }
        c.sent = true;
    }
    if (!c.sent || !(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
    for (;;) {
        ssize_t n = read(c.fd, c.buf + c.got, kMaxResponse - c.got);
        if (n > 0) {
            c.got += static_cast<std::size_t>(n);
            if (c.got == kMaxResponse) fail("response longer than %zu bytes", kMaxResponse);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n < 0) fail("read: %s", std::strerror(errno));
        break;  // EOF: the server closed after its response
    }
    long worker = 0;
    if (!response_ok(c.buf, c.got, opt_, &worker))
        fail("bad response (%zu bytes): %.*s", c.got, static_cast<int>(c.got), c.buf);
    if (!opt_.pid_cpu.empty() && opt_.pid_cpu.at(worker) == my_cpu_) ++local_;
    close(c.fd);  // also leaves the epoll set
    ++done_;
    open_one(c);
}

void Client::run() {
    bench_net::raise_fd_limit(opt_.inflight);
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) fail("epoll_create1: %s", std::strerror(errno));
    servers_cpu_s(opt_.cpu_pids);  // fail early if unreadable
    my_cpu_ = sched_getcpu();
    conns_.resize(static_cast<std::size_t>(opt_.inflight));
    for (Conn& c : conns_) open_one(c);

    const double warm_end = now_s() + opt_.warmup_s;
    const double end = warm_end + opt_.duration_s;
    bool measuring = false;
    double t0 = 0, cpu0 = 0;
    std::uint64_t done0 = 0, local0 = 0;
    epoll_event events[kMaxEvents];
    for (;;) {
        double t = now_s();
        if (!measuring && t >= warm_end) {
            measuring = true;
            cpu0 = servers_cpu_s(opt_.cpu_pids);
            done0 = done_;
            local0 = local_;
            t0 = now_s();
        }
        if (measuring && t >= end) break;
        int timeout_ms = static_cast<int>(((measuring ? end : warm_end) - t) * 1000) + 1;
        int n = epoll_wait(ep_, events, kMaxEvents, timeout_ms);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("epoll_wait: %s", std::strerror(errno));
        }
        for (int i = 0; i < n; ++i)
            on_event(*static_cast<Conn*>(events[i].data.ptr), events[i].events);
    }
    const double conns = static_cast<double>(done_ - done0);
    const double cpu_s = servers_cpu_s(opt_.cpu_pids) - cpu0;
    const double wall_s = now_s() - t0;
    for (Conn& c : conns_) close(c.fd);
    close(ep_);

    const double rate = conns / wall_s;
    char locality[64] = "";
    if (!opt_.pid_cpu.empty() && conns > 0)
        std::snprintf(locality, sizeof locality, ",\"local_share\":%.4f", static_cast<double>(local_ - local0) / conns);
    if (opt_.json) {
        char cpu[200] = "\"server_cpu_s\":null,\"server_util\":null,\"conns_per_cpu_s\":null,\"server_us_per_conn\":null";
        if (!opt_.cpu_pids.empty() && cpu_s > 0)
            std::snprintf(cpu, sizeof cpu,
                          "\"server_cpu_s\":%.3f,\"server_util\":%.3f,\"conns_per_cpu_s\":%.0f,"
                          "\"server_us_per_conn\":%.2f",
                          cpu_s, cpu_s / wall_s, conns / cpu_s, cpu_s * 1e6 / conns);
        std::printf("{\"inflight\":%d,\"conns\":%.0f,\"wall_s\":%.3f,\"conns_per_s\":%.0f,%s%s}\n",
                    opt_.inflight, conns, wall_s, rate, cpu, locality);
    } else {
        std::printf("inflight=%d conns=%.0f conns_per_s=%.0f", opt_.inflight, conns, rate);
        if (!opt_.cpu_pids.empty() && cpu_s > 0)
            std::printf(" server_cpu_s=%.3f server_util=%.3f server_us_per_conn=%.2f", cpu_s,
                        cpu_s / wall_s, cpu_s * 1e6 / conns);
        std::printf("%s\n", locality);
    }
    std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const bool has = i + 1 < argc;
        if (!std::strcmp(a, "--json")) o.json = true;
        else if (!std::strcmp(a, "--port") && has) o.port = std::atoi(argv[++i]);
        else if (!std::strcmp(a, "--inflight") && has) o.inflight = std::atoi(argv[++i]);
        else if (!std::strcmp(a, "--dst-addrs") && has) o.dst_addrs = std::atoi(argv[++i]);
        else if (!std::strcmp(a, "--duration") && has) o.duration_s = std::atof(argv[++i]);
        else if (!std::strcmp(a, "--warmup") && has) o.warmup_s = std::atof(argv[++i]);
        else if (!std::strcmp(a, "--cpu-pid") && has) {
            for (char* p = argv[++i]; *p;) {  // PID[,PID...]
                char* end = nullptr;
                long pid = std::strtol(p, &end, 10);
                if (end == p || pid <= 0) return false;
                o.cpu_pids.push_back(static_cast<int>(pid));
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') return false;
            }
        }
        else if (!std::strcmp(a, "--pid-cpu") && has) {
            for (char* p = argv[++i]; *p;) {  // PID:CPU[,PID:CPU...]
                char* end = nullptr;
                long pid = std::strtol(p, &end, 10);
                if (end == p || pid <= 0 || *end != ':') return false;
                p = end + 1;
                long cpu = std::strtol(p, &end, 10);
                if (end == p || cpu < 0) return false;
                o.pid_cpu[pid] = static_cast<int>(cpu);
                if (*end && *end != ',') return false;
                p = *end == ',' ? end + 1 : end;
            }
        }
        else return false;
    }
    return o.port > 0 && o.port < 65536 && o.inflight > 0 && o.dst_addrs > 0 && o.dst_addrs < 255 &&
           o.duration_s > 0 && o.warmup_s >= 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse(argc, argv, o)) {
        std::fputs("usage: connrate_client --port N [--inflight K] [--dst-addrs N] [--duration S]\n"
                   "                       [--warmup S] [--json] [--cpu-pid PID[,PID...]]\n"
                   "                       [--pid-cpu PID:CPU[,PID:CPU...]]\n",
                   stderr);
        return 2;
    }
    Client(o).run();
    return 0;
}
