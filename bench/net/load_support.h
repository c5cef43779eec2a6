// What the network load generators share: fatal errors, a monotonic clock in seconds, the CPU
// time of the server process they measure, and room for their connections' fds.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace bench_net {

/// Prints "<program>: FAILED: <message>" and exits with status 1 (bench/run then fails loudly).
[[noreturn]] inline void fail(const char* fmt, ...) {
    std::va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "%s: FAILED: ", program_invocation_short_name);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::exit(1);
}

inline double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// utime + stime of a process (all threads), in seconds.
inline double process_cpu_s(int pid) {
    char path[64], buf[1024];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open %s: %s", path, std::strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) fail("cannot read %s", path);
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');  // comm may contain spaces
    unsigned long long utime = 0, stime = 0;
    // Fields after comm: state(3) ... utime(14) stime(15).
    if (!p || std::sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                          &utime, &stime) != 2)
        fail("cannot parse %s", path);
    return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// Raises the soft fd limit to the hard one if `conns` connections (plus a few) need it.
inline void raise_fd_limit(int conns) {
    rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    const rlim_t need = static_cast<rlim_t>(conns) + 32;
    if (rl.rlim_cur >= need) return;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < need)
        fail("%d connections need %llu file descriptors, hard limit is %llu", conns,
             static_cast<unsigned long long>(need), static_cast<unsigned long long>(rl.rlim_max));
}

}  // namespace bench_net
