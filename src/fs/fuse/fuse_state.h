// A mount's state, shared by its readers, its request fibers and the fuse_mount handle. The
// only place (with fuse_ops.cc and fuse_mount.cc) that sees libfuse. Private to fs/fuse.
#pragma once

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#include <atomic>
#include <utility>
#include <vector>

#include "gluon/fs/fuse.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "inode_table.h"

namespace gluon::fs {

struct fuse_mount::state {
    std::shared_ptr<filesystem> fs;
    fuse_options opts;
    fuse_session* se = nullptr;
    int fd = -1;
    size_t bufsize = 0;  // a read of /dev/fuse needs room for the largest request
    detail::inode_table inodes;
    double attr_timeout = 1, entry_timeout = 1;

    std::atomic<uint64_t> requests{0}, in_flight{0}, bytes_read{0}, bytes_written{0};
    std::atomic<bool> stopping{false};

    mutex m;                     // guards what follows
    condition_variable changed;  // readers ending, requests draining
    std::vector<fiber> readers;  // their handles, to interrupt them on stop
    int readers_alive = 0;
    bool ended = false;  // every reader has ended (stop or an unmount from outside)
    bool stopped = false;

    /// A request fiber is done.
    void request_done() noexcept;
};

namespace detail {
const fuse_lowlevel_ops& fuse_ops() noexcept;

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline char tsan_device;
inline void device_written() noexcept { __tsan_release(&tsan_device); }
inline void device_read() noexcept { __tsan_acquire(&tsan_device); }
#else
inline void device_written() noexcept {}
inline void device_read() noexcept {}
#endif

/// Answers req with libfuse's fn. What a request's fiber did before answering happens before
/// every request the kernel sends after the answer (the release of a file another vCPU opened):
/// ThreadSanitizer sees the answer leave through libfuse's writev but not the next request
/// arrive through the engine, so every answer releases and every read of the device acquires.
template <typename... P, typename... A>
int reply(int (*fn)(fuse_req_t, P...), fuse_req_t req, A&&... a) {
    device_written();
    return fn(req, std::forward<A>(a)...);
}
inline void reply(void (*fn)(fuse_req_t), fuse_req_t req) {
    device_written();
    fn(req);
}
}  // namespace detail

}  // namespace gluon::fs
