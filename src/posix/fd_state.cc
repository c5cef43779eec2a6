#include "fd_state.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "gluon/common/fd_table.h"
#include "gluon/common/lazy.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"

namespace gluon::posix::detail {
namespace {

// Bits of an entry; 0 means not seen yet.
enum : uint8_t { k_known = 1, k_nonblocking = 2, k_stream = 4 };

// Tables made on first use and kept until exit; not function-local statics (common/lazy.h).
constinit lazy_ptr<fd_table<std::atomic<uint8_t>>> g_table;

fd_table<std::atomic<uint8_t>>& table() {
    return g_table.get([] { return new fd_table<std::atomic<uint8_t>>(sys::fd_limit()); });
}

// The entry for fd, asking the kernel the first time (0 for a bad fd: the call reports it).
uint8_t state(int fd) noexcept {
    std::atomic<uint8_t>* e = table().get(fd);
    if (!e) return 0;
    uint8_t s = e->load(std::memory_order_relaxed);
    if (s) return s;
    long fl = sys::fcntl(fd, F_GETFL);
    struct stat st;
    if (fl < 0 || sys::fstat(fd, &st) < 0) return 0;
    s = k_known | ((fl & O_NONBLOCK) ? k_nonblocking : 0);
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) s |= k_stream;
    e->store(s, std::memory_order_relaxed);
    return s;
}

// SO_RCVTIMEO and SO_SNDTIMEO of each fd, in microseconds (0: none).
struct limits {
    std::atomic<int64_t> receive_us{0}, send_us{0};
};
constinit lazy_ptr<fd_table<limits>> g_limit_table;

fd_table<limits>& limit_table() {
    return g_limit_table.get([] { return new fd_table<limits>(sys::fd_limit()); });
}

}  // namespace

duration wait_limit(int fd, short events) noexcept {
    const limits* l = limit_table().find(fd);
    if (!l) return duration::zero();
    const int64_t us = ((events & POLLIN) ? l->receive_us : l->send_us).load(std::memory_order_relaxed);
    return std::chrono::microseconds(us);
}

void set_wait_limit(int fd, bool receive, duration d) noexcept {
    limits* l = limit_table().get(fd);
    if (!l) return;
    const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    (receive ? l->receive_us : l->send_us).store(us, std::memory_order_relaxed);
}

bool nonblocking(int fd) noexcept { return state(fd) & k_nonblocking; }
bool seekable(int fd) noexcept {
    uint8_t s = state(fd);
    return !s || !(s & k_stream);
}

void set_nonblocking(int fd, bool on) noexcept {
    uint8_t s = state(fd);
    if (!s) return;
    if (std::atomic<uint8_t>* e = table().get(fd))
        e->store(static_cast<uint8_t>(on ? (s | k_nonblocking) : (s & ~k_nonblocking)), std::memory_order_relaxed);
}

void forget(int fd) noexcept {
    if (std::atomic<uint8_t>* e = table().find(fd)) e->store(0, std::memory_order_relaxed);
    if (limits* l = limit_table().find(fd)) {
        l->receive_us.store(0, std::memory_order_relaxed);
        l->send_us.store(0, std::memory_order_relaxed);
    }
}

std::uint8_t state_of(int from) noexcept { return state(from); }

void copy_state(std::uint8_t s, int from, int to) noexcept {
    if (std::atomic<uint8_t>* e = table().get(to)) e->store(s, std::memory_order_relaxed);
    const limits* src = limit_table().find(from);
    limits* dst = src ? limit_table().get(to) : limit_table().find(to);
    if (!dst) return;
    dst->receive_us.store(src ? src->receive_us.load(std::memory_order_relaxed) : 0, std::memory_order_relaxed);
    dst->send_us.store(src ? src->send_us.load(std::memory_order_relaxed) : 0, std::memory_order_relaxed);
}

int fd_table_size() noexcept {
    const long fd = sys::openat(AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return FD_SETSIZE;
    char buf[4096];
    const long got = sys::read(static_cast<int>(fd), buf, sizeof buf - 1, -1);
    (void)sys::close(static_cast<int>(fd));
    if (got <= 0) return FD_SETSIZE;
    buf[got] = '\0';
    const char* at = std::strstr(buf, "\nFDSize:");
    if (!at) return FD_SETSIZE;
    const long size = std::strtol(at + 9, nullptr, 10);
    return size > 0 && size <= INT_MAX ? static_cast<int>(size) : FD_SETSIZE;
}

long set_errno(long r) noexcept {
    if (r >= 0) return r;
    errno = r == -ECANCELED ? EINTR : static_cast<int>(-r);
    return -1;
}

}  // namespace gluon::posix::detail
