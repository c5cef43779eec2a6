#!/usr/bin/env bash
# Fails if a gluon library (the static archives given) imports one of libc's system-call
# wrappers: gluon enters the kernel through sys:: only (ADR 0013). The exceptions are listed,
# each with its reason, in the ADR.
set -euo pipefail
command -v nm >/dev/null || { echo "no nm: skipped"; exit 77; }

denied=(
  read write readv writev pread pread64 pwrite pwrite64 preadv preadv64 preadv2 pwritev
  pwritev64 pwritev2 recv recvfrom recvmsg recvmmsg send sendto sendmsg sendmmsg
  socket socketpair bind listen accept accept4 connect close shutdown setsockopt getsockopt
  getsockname getpeername epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait
  epoll_pwait2 poll ppoll select pselect eventfd timerfd_create timerfd_settime signalfd
  pipe pipe2 open open64 openat openat64 creat fstat fstat64 stat stat64 lstat fstatat statx
  fstatfs statfs fstatvfs statvfs fsync fdatasync ftruncate truncate fallocate unlink unlinkat
  rename renameat renameat2 mkdir mkdirat rmdir link linkat symlink symlinkat readlink
  readlinkat access faccessat utimensat mmap mmap64 munmap mprotect madvise sendfile
  sendfile64 splice tee ioctl fcntl fcntl64 lseek lseek64 dup dup2 dup3 getdents64 syscall
  io_setup io_submit io_getevents io_cancel io_destroy sched_yield nanosleep clock_nanosleep
  usleep sleep sigaltstack sigprocmask pthread_sigmask getrlimit setrlimit prlimit gettid
  sched_setaffinity pthread_setaffinity_np membarrier fopen getrandom
)
# A function-local static's first use takes the C++ runtime's guard lock, whose contended path
# enters the kernel through libc's syscall(2) (two vCPUs touching it at once): gluon keeps none,
# it uses common/lazy.h instead.
denied+=(__cxa_guard_acquire)
# The C++ runtime's code inlined into a gluon library (ADR 0013, exceptions): libstdc++'s
# <stop_token> yields and waits on a futex when a stop_callback is removed while another
# thread runs it.
declare -A allowed=([libgluon_task.a]="sched_yield syscall")
pattern="^($(IFS='|'; echo "${denied[*]}"))(@.*)?\$"
bad=0
for lib in "$@"; do
  hits=$(nm -u "$lib" | awk '{print $NF}' | grep -E "$pattern" | sort -u || true)
  for ok in ${allowed[$(basename "$lib")]:-}; do hits=$(grep -vx "$ok" <<<"$hits" || true); done
  if [[ -n "$hits" ]]; then
    echo "$(basename "$lib") imports libc system-call wrappers: $(echo $hits)"
    bad=1
  fi
done
[[ $bad == 0 ]] && echo "no libc system-call wrappers imported by $# libraries"
exit $bad
