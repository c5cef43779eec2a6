// Child processes and free ports for tests that run real peers (openssl, curl, nginx).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::test {

/// The full path of a program found in PATH or the sbin directories ("" if none).
inline std::string find_program(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin:/usr/local/sbin");
    for (std::string d; std::getline(dirs, d, ':');)
        if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
    return {};
}

/// A loopback TCP port that was free a moment ago (a peer that loses the race to bind it exits,
/// and the caller tries again).
inline uint16_t free_port() {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    uint16_t port = 0;
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    ::close(s);
    return port;
}

/// A loopback TCP socket on a port of its own (bound to port 0), closed with this object;
/// listening with `backlog` when that is given. Held for a test's length, its port cannot go to
/// anything else (a free_port() number is free for the process's next bind too: a proxy's own
/// listener took it and the proxy forwarded to itself).
class bound_port {
public:
    explicit bound_port(int backlog = -1) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            (backlog < 0 || ::listen(fd_, backlog) == 0) &&
            ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
            port_ = ntohs(a.sin_port);
    }
    ~bound_port() { ::close(fd_); }
    bound_port(const bound_port&) = delete;
    bound_port& operator=(const bound_port&) = delete;
    int fd() const noexcept { return fd_; }
    /// 0 if the socket could not be set up.
    uint16_t port() const noexcept { return port_; }

private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

/// A port where connecting is refused: bound, never listening.
struct refusing_port : bound_port {
    refusing_port() : bound_port(-1) {}
};

/// A listener that never accepts: the kernel completes TCP connections into its queue and
/// nobody ever answers them.
struct silent_listener : bound_port {
    silent_listener() : bound_port(16) {}
};

/// True if something accepts connections on the loopback port (a blocking connect: for use
/// outside fibers, while a peer starts).
inline bool can_connect(uint16_t port) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(s);
    return ok;
}

/// A child process: stdin from a file (or /dev/null), stdout and stderr to files (or
/// /dev/null; stderr defaults to out + ".err"). Killed when destroyed while running, and with the
/// test process if that dies first.
class child {
public:
    child(std::vector<std::string> args, const std::string& in = "/dev/null",
          const std::string& out = "/dev/null", const std::string& err = "") {
        if (args.empty()) return;
        std::string prog = args[0].find('/') == std::string::npos ? find_program(args[0]) : args[0];
        if (prog.empty()) return;
        const std::string e = err.empty() ? (out == "/dev/null" ? out : out + ".err") : err;
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        // fork, then only async-signal-safe calls until exec (the test process has threads).
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed test
            int fds[3] = {::open(in.c_str(), O_RDONLY), ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644),
                          ::open(e.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)};
            for (int i = 0; i < 3; ++i)
                if (fds[i] < 0 || ::dup2(fds[i], i) < 0) ::_exit(126);
            ::execv(prog.c_str(), argv.data());
            ::_exit(127);
        }
    }
    child(const child&) = delete;
    child& operator=(const child&) = delete;
    ~child() { kill(); }

    bool started() const { return pid_ > 0; }
    pid_t pid() const { return pid_; }
    /// True while it runs (reaps it if it ended).
    bool running() {
        if (pid_ <= 0) return false;
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) != pid_) return true;
        pid_ = -1;
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return false;
    }
    /// The exit status once it ends, -1 on a timeout. On a vCPU only the fiber waits.
    int wait(duration timeout) {
        if (pid_ <= 0) return status_;
        int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
        if (pfd < 0) return -1;
        bool ready;
        if (is_vcpu()) {
            ready = static_cast<bool>(fd::poll(pfd, POLLIN, timeout));
        } else {
            pollfd p{pfd, POLLIN, 0};
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
            ready = ::poll(&p, 1, timeout == forever ? -1 : static_cast<int>(ms)) == 1;
        }
        // On a vCPU the engine may keep state for the fd (epoll registers it): close it through
        // the runtime, or a later fd with the same number inherits a stale registration.
        if (is_vcpu())
            (void)fd::close(pfd);
        else
            ::close(pfd);
        if (!ready || running()) return -1;
        return status_;
    }
    void kill() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }

private:
    pid_t pid_ = -1;
    int status_ = -1;
};

}  // namespace gluon::test
