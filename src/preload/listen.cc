// Listener mode (GLUON_PRELOAD=listen, docs/preload.md): each worker (a process or thread) that
// watches a listening socket gets its own SO_REUSEPORT listener on the same address, and a
// classic-BPF program on the port's reuseport group sends each connection to the listener of
// the worker on the CPU that handled its SYN. The program's own socket stays as it was (its
// getsockname, close and inheritance work unchanged) and is the fallback: connections for a CPU
// without a worker land there, and every worker accepts from it when its own listener is empty.
#include "listen.h"

#include <linux/filter.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/select.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <pthread.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gluon/sys/mm.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"
#include "preload.h"

namespace gluon::preload::listen {
namespace {

constexpr int k_max_cpus = 256;
constexpr int k_max_groups = 8;
constexpr int k_max_socks = 512;  // listeners in one port's group
constexpr int k_max_fds = 1 << 16;  // listening sockets above this fd number are not steered

// One port's reuseport group as the workers of all processes see it. A socket's index in the
// group is the order in which it called listen(): the program's socket is 0, the workers'
// listeners follow, and when one closes the kernel moves the last into its slot (closing()
// mirrors that; a worker killed before it closes its listener leaves the table wrong).
struct group {
    int family;
    uint16_t port;    // network order; 0: free slot
    int16_t count;    // listeners in the group, the program's included
    uint32_t next_id;
    int16_t index_of_cpu[k_max_cpus];  // the newest listener of each CPU (0: none)
    int16_t cpu_at[k_max_socks];       // whose listener is at each index (from 1)
    uint32_t id_at[k_max_socks];       // and which one (a worker that replaced another wins)
};

// Shared by the processes a program forks (mapped before its first fork: at its first bind).
struct shared_state {
    std::atomic<int> lock;
    std::atomic<unsigned> next_cpu;  // round-robin for workers not pinned to one CPU
    group groups[k_max_groups];
};

std::atomic<shared_state*> g_shared{nullptr};

// The process id, without a system call per accept, epoll_ctl and close (glibc keeps no cache):
// read at load and again in every child a fork makes.
long g_pid = [] {
    (void)pthread_atfork(nullptr, nullptr, [] { g_pid = sys::getpid(); });
    return sys::getpid();
}();

// Sockets the program put in the listening state in this process or a parent it was forked
// from (the table's memory is inherited), so that the epoll_ctl of every new connection costs
// no getsockopt to tell it from a listener.
std::atomic<uint8_t> g_listening[k_max_fds];

shared_state* shared() {
    if (shared_state* s = g_shared.load(std::memory_order_acquire)) return s;
    void* p = sys::mmap(nullptr, sizeof(shared_state), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sys::is_error(p)) return nullptr;
    auto* fresh = new (p) shared_state{};
    shared_state* expected = nullptr;
    if (!g_shared.compare_exchange_strong(expected, fresh)) {
        (void)sys::munmap(p, sizeof(shared_state));
        return expected;
    }
    return fresh;
}

struct locked {
    shared_state* s;
    explicit locked(shared_state* st) : s(st) {
        while (s->lock.exchange(1, std::memory_order_acquire)) (void)sys::sched_yield();
    }
    ~locked() { s->lock.store(0, std::memory_order_release); }
};

// This worker's listener for a program socket (by the program socket's fd number). Per thread:
// a worker is a thread with its own event loop (or the one thread of a worker process).
constexpr int k_none = -2;  // mine::fd: tried, and this thread has no listener for the socket
struct mine {
    int fd = -1;
    long pid = 0;  // made in this process (a forked child makes its own)
    int group = -1;
    uint32_t id = 0;
};
thread_local std::vector<mine> t_mine;

mine* find(int fd) {
    if (fd < 0 || static_cast<size_t>(fd) >= t_mine.size()) return nullptr;
    mine& m = t_mine[static_cast<size_t>(fd)];
    return m.fd >= 0 && m.pid == g_pid ? &m : nullptr;
}

bool is_tcp_listener(int fd) {
    if (fd < 0 || fd >= k_max_fds || !g_listening[fd].load(std::memory_order_relaxed)) return false;
    int v = 0;
    socklen_t l = sizeof v;
    if (sys::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) < 0 || !v) return false;
    l = sizeof v;
    return sys::getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &v, &l) == 0 && v;
}

// The CPU this worker runs on: the one it is pinned to, or one assigned round-robin (and the
// worker pinned there, so that its accepts and the connections' later work stay on it).
int worker_cpu(shared_state* s) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1) {
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set)) return c;
    }
    const int n = CPU_COUNT(&set);
    if (n <= 0) return -1;
    int pick = static_cast<int>(s->next_cpu.fetch_add(1) % static_cast<unsigned>(n));
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set) || pick-- > 0) continue;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        (void)sys::set_affinity(&one);
        return c;
    }
    return -1;
}

// The group's steering program: the CPU that runs it (the one handling the SYN) picks the index
// of that CPU's worker listener; a CPU without one picks 0, the program's socket.
// The CPU -> index table from the group's layout: each CPU's newest listener.
void recompute(group& g) {
    for (int16_t& i : g.index_of_cpu) i = 0;
    for (int i = 1; i < g.count; ++i) {
        int16_t& best = g.index_of_cpu[g.cpu_at[i]];
        if (best == 0 || g.id_at[i] > g.id_at[best]) best = static_cast<int16_t>(i);
    }
}

long attach_steering(int fd, const group& g) {
    std::vector<sock_filter> prog;
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_CPU)));
    for (int c = 0; c < k_max_cpus; ++c) {
        if (g.index_of_cpu[c] <= 0) continue;
        prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(c), 0, 1));
        prog.push_back(BPF_STMT(BPF_RET | BPF_K, static_cast<uint32_t>(g.index_of_cpu[c])));
    }
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, 0));
    sock_fprog fp{static_cast<unsigned short>(prog.size()), prog.data()};
    return sys::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fp, sizeof fp);
}

void warn(const char* what, long err) {
    std::fprintf(stderr, "gluon preload (listen): %s: %s; this worker accepts from the shared socket only\n",
                 what, std::strerror(static_cast<int>(-err)));
}

// Makes this worker's listener for the program's listening socket `fd` into `out`; false if it
// cannot (the worker then uses the program's socket, as without the preload).
bool make_mine(int fd, mine& out) {
    shared_state* s = g_shared.load(std::memory_order_acquire);
    if (!s) return false;
    sockaddr_storage a{};
    socklen_t al = sizeof a;
    if (sys::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) < 0) return false;
    const int family = a.ss_family;
    if (family != AF_INET && family != AF_INET6) return false;
    const uint16_t port = family == AF_INET ? reinterpret_cast<sockaddr_in*>(&a)->sin_port
                                            : reinterpret_cast<sockaddr_in6*>(&a)->sin6_port;
    const int cpu = worker_cpu(s);
    if (cpu < 0 || cpu >= k_max_cpus) return false;
    long l = sys::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (l < 0) return warn("socket", l), false;
    const int lfd = static_cast<int>(l);
    const int one = 1;
    if (family == AF_INET6) {
        int v6only = 0;
        socklen_t vl = sizeof v6only;
        (void)sys::getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vl);
        (void)sys::setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    long r = sys::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (r >= 0) r = sys::setsockopt(lfd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (r >= 0) r = sys::bind(lfd, reinterpret_cast<sockaddr*>(&a), al);
    if (r < 0) {
        warn("bind", r);
        (void)sys::close(lfd);
        return false;
    }
    locked lk(s);
    group* g = nullptr;
    for (group& x : s->groups)
        if (x.port == port && x.family == family) g = &x;
    for (group& x : s->groups)
        if (!g && x.port == 0) {
            g = &x;
            g->family = family;
            g->port = port;
            g->count = 1;  // the program's socket
        }
    if (!g || g->count >= k_max_socks) {
        (void)sys::close(lfd);
        return false;
    }
    if ((r = sys::listen(lfd, SOMAXCONN)) < 0) {
        warn("listen", r);
        (void)sys::close(lfd);
        return false;
    }
    const int i = g->count++;
    g->cpu_at[i] = static_cast<int16_t>(cpu);
    g->id_at[i] = ++g->next_id;
    recompute(*g);
    if ((r = attach_steering(lfd, *g)) < 0) warn("SO_ATTACH_REUSEPORT_CBPF", r);
    out = {lfd, g_pid, static_cast<int>(g - s->groups), g->id_at[i]};
    return true;
}

// Closes this worker's listener, and makes the table and the steering follow the kernel, which
// moves the group's last listener into the closed one's slot. `fd` is the program's socket,
// still open and in the group: the new program is attached through it.
void drop_mine(int fd, mine& m) {
    shared_state* s = g_shared.load(std::memory_order_acquire);
    if (!s || m.group < 0) {
        (void)sys::close(m.fd);
        return;
    }
    locked lk(s);
    (void)sys::close(m.fd);
    group& g = s->groups[m.group];
    for (int i = 1; i < g.count; ++i) {
        if (g.id_at[i] != m.id) continue;
        const int last = g.count - 1;
        g.cpu_at[i] = g.cpu_at[last];
        g.id_at[i] = g.id_at[last];
        --g.count;
        recompute(g);
        (void)attach_steering(fd, g);
        break;
    }
}

// This thread's listener for the program's listening socket fd, made on first use; nullptr if
// fd is not one of the program's TCP listeners or no listener could be made (not tried again
// for fd until it is closed).
mine* mine_for(int fd) {
    if (mine* m = find(fd)) return m;
    if (fd < 0 || fd >= k_max_fds || !g_listening[fd].load(std::memory_order_relaxed)) return nullptr;
    const auto i = static_cast<size_t>(fd);
    if (i < t_mine.size() && t_mine[i].fd == k_none && t_mine[i].pid == g_pid) return nullptr;
    if (i >= t_mine.size()) t_mine.resize(i + 1);
    mine made;
    if (!is_tcp_listener(fd) || !make_mine(fd, made)) {
        t_mine[i] = {k_none, g_pid, -1, 0};
        return nullptr;
    }
    t_mine[i] = made;
    return &t_mine[i];
}

}  // namespace

void before_bind(int fd) noexcept {
    int type = 0;
    socklen_t l = sizeof type;
    if (sys::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 || type != SOCK_STREAM) return;
    sockaddr_storage a{};
    socklen_t al = sizeof a;
    if (sys::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) < 0) return;
    if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return;
    if (!shared()) return;
    const int one = 1;
    (void)sys::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
}

long epoll_ctl(int ep, int op, int fd, epoll_event* ev) noexcept {
    long r = sys::epoll_ctl(ep, op, fd, ev);
    if (r < 0) return r;
    mine* m = op == EPOLL_CTL_ADD ? mine_for(fd) : find(fd);
    if (m) (void)sys::epoll_ctl(ep, op, m->fd, ev);  // the same events and data as the program's
    return r;
}

long poll(pollfd* fds, nfds_t n, int timeout_ms) noexcept {
    // The entries waiting for a program listener's input, and this thread's listener for each.
    thread_local std::vector<pollfd> all;
    thread_local std::vector<nfds_t> owner;
    owner.clear();
    for (nfds_t i = 0; i < n; ++i)
        if ((fds[i].events & POLLIN) && fds[i].fd >= 0 && fds[i].fd < k_max_fds &&
            g_listening[fds[i].fd].load(std::memory_order_relaxed))
            if (mine* m = mine_for(fds[i].fd)) {
                if (owner.empty()) all.assign(fds, fds + n);
                all.push_back({m->fd, POLLIN, 0});
                owner.push_back(i);
            }
    timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
    const timespec* tsp = timeout_ms < 0 ? nullptr : &ts;
    if (owner.empty()) return sys::ppoll(fds, n, tsp);
    long r = sys::ppoll(all.data(), all.size(), tsp);
    if (r < 0) return r;
    for (size_t j = 0; j < owner.size(); ++j)
        if (all[n + j].revents & POLLIN) all[owner[j]].revents |= POLLIN;
    long ready = 0;
    for (nfds_t i = 0; i < n; ++i) ready += (fds[i].revents = all[i].revents) != 0;
    return ready;
}

long select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) noexcept {
    // Only a read set with a program listener in it is watched differently: through poll().
    bool steered = false;
    for (int fd = 0; rd && fd < nfds && fd < FD_SETSIZE && !steered; ++fd)
        steered = FD_ISSET(fd, rd) && g_listening[fd].load(std::memory_order_relaxed);
    if (!steered) {
        // As Linux's select: microseconds beyond a second carry into the seconds (pselect6 takes
        // them as EINVAL), and the time left comes back in the timeval (pselect6, the system
        // call, writes it into the timespec). The timeout was left as it was, so a worker that
        // loops on one timeval to keep an overall deadline waited the whole timeout every round.
        timespec ts{}, *tsp = nullptr;
        if (timeout && timeout->tv_sec >= 0 && timeout->tv_usec >= 0)
            tsp = &(ts = {timeout->tv_sec + timeout->tv_usec / 1'000'000, (timeout->tv_usec % 1'000'000) * 1000L});
        else if (timeout)
            return -EINVAL;
        const long r = sys::pselect(nfds, rd, wr, ex, tsp);
        if (tsp) *timeout = {ts.tv_sec, static_cast<suseconds_t>(ts.tv_nsec / 1000)};
        return r;
    }
    if (nfds < 0 || nfds > FD_SETSIZE || (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0))) return -EINVAL;
    thread_local std::vector<pollfd> p;  // (kept: a worker selects again and again)
    p.clear();
    for (int fd = 0; fd < nfds; ++fd) {
        short ev = static_cast<short>((rd && FD_ISSET(fd, rd) ? POLLIN : 0) | (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
                                      (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
        if (ev) p.push_back({fd, ev, 0});
    }
    auto wait = [&](int ms) { return listen::poll(p.data(), p.size(), ms); };
    // (Microseconds beyond a second carry into the seconds, as in Linux's select.)
    long long sec = 0;
    if (timeout && __builtin_add_overflow(timeout->tv_sec, timeout->tv_usec / 1'000'000, &sec)) sec = LLONG_MAX;
    const long r = !timeout ? wait(-1) : wait_in_rounds(sec, (timeout->tv_usec % 1'000'000) * 1000L, wait);
    if (r < 0) return r;
    for (const pollfd& x : p)
        if (x.revents & POLLNVAL) return -EBADF;
    if (rd) FD_ZERO(rd);
    if (wr) FD_ZERO(wr);
    if (ex) FD_ZERO(ex);
    long ready = 0;
    for (const pollfd& x : p) {
        if ((x.events & POLLIN) && (x.revents & (POLLIN | POLLHUP | POLLERR))) FD_SET(x.fd, rd), ++ready;
        if ((x.events & POLLOUT) && (x.revents & (POLLOUT | POLLERR))) FD_SET(x.fd, wr), ++ready;
        if ((x.events & POLLPRI) && (x.revents & POLLPRI)) FD_SET(x.fd, ex), ++ready;
    }
    return ready;
}

long accept4(int fd, sockaddr* addr, socklen_t* len, int flags) noexcept {
    mine* m = find(fd);
    if (!m) return sys::accept(fd, addr, len, flags);
    long r = sys::accept(m->fd, addr, len, flags);
    if (r != -EAGAIN) return r;
    return sys::accept(fd, addr, len, flags);  // the fallback: the program's own socket
}

void listening(int fd) noexcept {
    if (fd >= 0 && fd < k_max_fds) g_listening[fd].store(1, std::memory_order_relaxed);
}

void closing(int fd) noexcept {
    if (fd >= 0 && fd < k_max_fds) g_listening[fd].store(0, std::memory_order_relaxed);
    if (fd >= 0 && static_cast<size_t>(fd) < t_mine.size() && t_mine[static_cast<size_t>(fd)].fd == k_none)
        t_mine[static_cast<size_t>(fd)].fd = -1;
    if (mine* m = find(fd)) {
        drop_mine(fd, *m);
        m->fd = -1;
    }
}

}  // namespace gluon::preload::listen
