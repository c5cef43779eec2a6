// Fiber mode's stdio on sockets and pipes: glibc's FILE reads and writes its fd with internal
// system calls that no interposer sees, so fgets on a socket blocked the whole vCPU. fdopen of a
// socket or pipe now makes a FILE (fopencookie) whose reads and writes go through gluon::posix,
// parking the fiber; fileno still gives its fd (docs/preload.md).
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "gluon/posix.h"
#include "gluon/sys/ops.h"
#include "preload.h"

namespace gluon::preload {
namespace {

namespace px = gluon::posix;

struct stream {
    int fd;
};

ssize_t stream_read(void* c, char* buf, size_t n) {
    return keep_errno([&] { return px::read(static_cast<stream*>(c)->fd, buf, n); });
}

// glibc takes a short write as a failed one: write it all.
ssize_t stream_write(void* c, const char* buf, size_t n) {
    const int fd = static_cast<stream*>(c)->fd;
    size_t done = 0;
    while (done < n) {
        const ssize_t w = keep_errno([&] { return px::write(fd, buf + done, n - done); });
        if (w < 0) return done ? static_cast<ssize_t>(done) : -1;
        done += static_cast<size_t>(w);
    }
    return static_cast<ssize_t>(n);
}

// The FILEs made here, and their fds (for fileno).
std::mutex g_mu;  // (libc's: this library's own code)
std::unordered_map<FILE*, int>& files() {
    static auto* m = new std::unordered_map<FILE*, int>;
    return *m;
}

int stream_close(void* c) {
    auto* s = static_cast<stream*>(c);
    const int fd = s->fd;
    delete s;
    return keep_errno([&] { return px::close(fd); });
}

// fdopen's check: the mode asks for no access the fd was not opened with (EINVAL otherwise).
bool mode_fits(int fd, const char* mode) {
    const long fl = sys::fcntl(fd, F_GETFL);
    if (fl < 0) {
        errno = static_cast<int>(-fl);
        return false;
    }
    const long acc = fl & O_ACCMODE;
    bool read = false, write = false;
    switch (mode[0]) {
        case 'r': read = true; break;
        case 'w': case 'a': write = true; break;
        default: errno = EINVAL; return false;
    }
    for (const char* p = mode + 1; *p; ++p)
        if (*p == '+') read = write = true;
    if ((read && acc == O_WRONLY) || (write && acc == O_RDONLY)) {
        errno = EINVAL;
        return false;
    }
    return true;
}

bool socket_or_pipe(int fd) {
    struct stat st;
    return sys::fstat(fd, &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode));
}

}  // namespace
}  // namespace gluon::preload

using namespace gluon::preload;

extern "C" {

FILE* fdopen(int fd, const char* mode) noexcept {
    if (current_mode() != mode::fibers || !socket_or_pipe(fd)) return GLUON_REAL(fdopen)(fd, mode);
    if (!mode_fits(fd, mode)) return nullptr;
    auto* s = new stream{fd};
    FILE* f = fopencookie(s, mode, cookie_io_functions_t{stream_read, stream_write, nullptr, stream_close});
    if (!f) {
        delete s;
        return GLUON_REAL(fdopen)(fd, mode);
    }
    {
        std::lock_guard g(g_mu);
        files()[f] = fd;
    }
    return f;
}

// A FILE of fdopen's here is the one kind libc has no fd for (its fileno fails): only those
// are looked up.
int fileno(FILE* f) noexcept {
    const int saved = errno;
    const int fd = GLUON_REAL(fileno)(f);
    if (fd >= 0 || current_mode() != mode::fibers) return fd;
    std::lock_guard g(g_mu);
    if (auto it = files().find(f); it != files().end()) {
        errno = saved;
        return it->second;
    }
    return fd;
}
int fileno_unlocked(FILE* f) noexcept { return fileno(f); }

// libc's own FILE closes its fd with a call the facade does not see: the number is closed as
// close() would first (its O_NONBLOCK and timeouts would stay for the next file to get it).
int fclose(FILE* f) {
    const int saved = errno;
    if (current_mode() == mode::fibers) {
        const int fd = GLUON_REAL(fileno)(f);
        errno = saved;
        if (fd >= 0 && !in_signal_handler()) {
            px::closing(fd);
        } else if (fd < 0) {
            std::lock_guard g(g_mu);
            files().erase(f);
        }
    }
    return GLUON_REAL(fclose)(f);
}

}  // extern "C"
