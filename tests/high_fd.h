// Moves an fd to a number above 65,536 for the tests of per-fd tables, raising the soft
// RLIMIT_NOFILE when the hard limit allows; restores the limit on destruction.
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace gluon::test {

class high_fds {
public:
    static constexpr int k_first = 70'000;
    high_fds() {
        if (getrlimit(RLIMIT_NOFILE, &saved_) != 0) return;
        if (saved_.rlim_max != RLIM_INFINITY && saved_.rlim_max <= rlim_t{k_first} + 16) return;
        rlimit raised = saved_;
        if (raised.rlim_cur == RLIM_INFINITY || raised.rlim_cur > rlim_t{k_first} + 16) {
            ok_ = true;
            return;
        }
        raised.rlim_cur = rlim_t{k_first} + 1024;
        ok_ = setrlimit(RLIMIT_NOFILE, &raised) == 0;
        restore_ = ok_;
    }
    ~high_fds() {
        if (restore_) (void)setrlimit(RLIMIT_NOFILE, &saved_);
    }
    /// False: the hard limit keeps fds below 65,536 here (the caller skips).
    bool available() const noexcept { return ok_; }
    /// Moves fd to the lowest free number >= k_first (closing the original): the new fd or -1.
    int move_high(int fd) {
        int h = fcntl(fd, F_DUPFD_CLOEXEC, k_first);
        close(fd);
        return h;
    }

private:
    rlimit saved_{};
    bool ok_ = false, restore_ = false;
};

}  // namespace gluon::test
