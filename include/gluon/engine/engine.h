// The event engine: one per vCPU, completion-shaped. An operation is submitted, completes later
// (or at once), and its completion callback runs on the engine's thread from inside wait().
// io_uring implements this natively; epoll emulates it (try the non-blocking syscall, on EAGAIN
// wait for readiness, retry). The runtime parks fibers on top of this; nothing here knows fibers.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gluon/common/intrusive_list.h"
#include "gluon/common/result.h"

namespace gluon::engine {

enum class opcode : uint8_t {
    nop,
    read,      // fd, buf, len, offset (-1: current position)
    write,     // fd, buf, len, offset
    readv,     // fd, iov, iovcnt, offset
    writev,    // fd, iov, iovcnt, offset
    recv,      // fd, buf, len, flags
    send,      // fd, buf, len, flags
    recvmsg,   // fd, msg, flags
    sendmsg,   // fd, msg, flags
    accept,    // fd, addr, addrlen, flags (SOCK_CLOEXEC...); result is the new fd
    connect,   // fd, addr (const), addrlen value; result 0. EAGAIN (a Unix listener's full
               // backlog, on an O_NONBLOCK socket) is a result: no readiness says when the
               // backlog has room (gluon::run_connect tries again after a pause)
    poll,      // fd, poll_events; result is the revents mask
    fsync,     // fd, flags (IORING_FSYNC_DATASYNC-style: 1 = data only)
    send_zc,   // as send, zero-copy where the engine can (io_uring SEND_ZC); completes only
               // once the kernel no longer reads the buffer. Elsewhere: a plain send.
    recv_pooled,  // fd, flags: a recv into a buffer of the engine's pool, taken only when data
                  // has arrived (io_uring: a provided-buffer ring), so a connection waiting for
                  // input holds no buffer. Result: the byte count, with op.buf the buffer (null
                  // unless the result is > 0); hand it back with engine::give_back().
    // File and metadata operations (the io module's engines; blocking syscalls on epoll).
    openat,      // fd = dirfd, buf = path, flags = open flags, len = mode; result is the new fd
    close,       // fd
    statx,       // fd = dirfd, buf = path, flags = AT_* flags, len = mask, buf2 = struct statx*
    unlinkat,    // fd = dirfd, buf = path, flags (AT_REMOVEDIR)
    renameat,    // fd = old dirfd, buf = old path, fd2 = new dirfd, buf2 = new path, flags
    mkdirat,     // fd = dirfd, buf = path, len = mode
    fallocate,   // fd, flags = mode, offset, len
    ftruncate,   // fd, offset = new length
    read_fixed,  // read into a registered buffer: fd, buf, len, offset, flags = buffer index
    write_fixed, // write from a registered buffer: fd, buf, len, offset, flags = buffer index
};
constexpr unsigned k_opcode_count = static_cast<unsigned>(opcode::write_fixed) + 1;

struct io_op;
using completion_fn = void (*)(io_op* op, long result);

/// One operation. It must stay alive and unmoved until its completion has been delivered.
///
/// Build it with the typed constructors (io_op::read, io_op::accept, io_op::statx, ...): the raw
/// operand fields below change meaning by opcode (len is a byte count, an iovec count, a mode
/// or a mask; flags a buffer index or fsync's datasync bit; offset a length) and are read by the
/// engines only.
struct io_op {
    // ---- typed constructors -------------------------------------------------------------------
    /// read/write/recv/send/send_zc of n bytes (at `off` for files, -1: the current position).
    /// One moves at most 0x7ffff000 bytes, as read(2) and send(2) do, on every engine: a longer
    /// one comes back short (io_uring cuts it there: its SQE holds the length in 32 bits).
    static io_op transfer(opcode c, int fd, void* buf, size_t n, int64_t off = -1, int flags = 0) noexcept {
        io_op op;
        op.code = c;
        op.fd = fd;
        op.buf = buf;
        op.len = n;
        op.offset = off;
        op.flags = flags;
        return op;
    }
    /// readv/writev of cnt buffers.
    static io_op vectored(opcode c, int fd, const iovec* iov, int cnt, int64_t off = -1) noexcept {
        return transfer(c, fd, const_cast<iovec*>(iov), static_cast<size_t>(cnt), off);
    }
    /// recvmsg/sendmsg.
    static io_op message(opcode c, int fd, msghdr* m, int flags) noexcept { return transfer(c, fd, m, 0, -1, flags); }
    /// read_fixed/write_fixed into or from registered buffer `index`.
    static io_op fixed(opcode c, int fd, void* buf, size_t n, int64_t off, int index) noexcept {
        return transfer(c, fd, buf, n, off, index);
    }
    /// recv_pooled: up to engine::pooled_buffer_size bytes into a buffer of the engine's pool.
    static io_op recv_pooled(int fd, int flags = 0) noexcept {
        return transfer(opcode::recv_pooled, fd, nullptr, 0, -1, flags);
    }
    static io_op accept(int fd, sockaddr* addr, socklen_t* addrlen, int flags) noexcept {
        io_op op = transfer(opcode::accept, fd, addr, 0, -1, flags);
        op.addrlen = addrlen;
        return op;
    }
    static io_op connect(int fd, const sockaddr* addr, socklen_t len) noexcept {
        return transfer(opcode::connect, fd, const_cast<sockaddr*>(addr), len);
    }
    static io_op poll(int fd, short events) noexcept {
        io_op op = transfer(opcode::poll, fd, nullptr, 0);
        op.poll_events = static_cast<uint16_t>(events);
        return op;
    }
    static io_op fsync(int fd, bool datasync) noexcept { return transfer(opcode::fsync, fd, nullptr, 0, -1, datasync ? 1 : 0); }
    static io_op fallocate(int fd, int mode, int64_t off, int64_t len) noexcept {
        return transfer(opcode::fallocate, fd, nullptr, static_cast<size_t>(len), off, mode);
    }
    static io_op ftruncate(int fd, int64_t len) noexcept { return transfer(opcode::ftruncate, fd, nullptr, 0, len); }
    static io_op openat(int dir, const char* path, int flags, unsigned mode) noexcept {
        return transfer(opcode::openat, dir, const_cast<char*>(path), mode, -1, flags);
    }
    static io_op close(int fd) noexcept { return transfer(opcode::close, fd, nullptr, 0); }
    static io_op statx(int dir, const char* path, int flags, unsigned mask, void* out) noexcept {
        io_op op = transfer(opcode::statx, dir, const_cast<char*>(path), mask, -1, flags);
        op.buf2 = out;
        return op;
    }
    static io_op unlinkat(int dir, const char* path, int flags) noexcept {
        return transfer(opcode::unlinkat, dir, const_cast<char*>(path), 0, -1, flags);
    }
    static io_op renameat(int old_dir, const char* old_path, int new_dir, const char* new_path, unsigned flags) noexcept {
        io_op op = transfer(opcode::renameat, old_dir, const_cast<char*>(old_path), 0, -1, static_cast<int>(flags));
        op.fd2 = new_dir;
        op.buf2 = const_cast<char*>(new_path);
        return op;
    }
    static io_op mkdirat(int dir, const char* path, unsigned mode) noexcept {
        return transfer(opcode::mkdirat, dir, const_cast<char*>(path), mode);
    }

    // ---- operands (read by the engines) --------------------------------------------------------
    opcode code = opcode::nop;
    int fd = -1;
    void* buf = nullptr;  // or iovec*, msghdr*, sockaddr*
    size_t len = 0;       // byte count, iovcnt, or socklen_t value for connect
    socklen_t* addrlen = nullptr;
    int64_t offset = -1;
    int flags = 0;
    int fd2 = -1;           // renameat's new dirfd
    void* buf2 = nullptr;   // renameat's new path, statx's result
    /// fd is an index into the engine's registered files (io_uring only).
    bool fixed_file = false;
    /// accept (without addr): may be served by one multishot accept shared by the listener's
    /// accepts (io_uring), which takes connections from the kernel before anyone asks. Only for
    /// a caller that owns the listener and never waits for its readability instead of accepting.
    bool shared_accept = false;
    /// recv (flags 0): may be served by one multishot receive kept armed on the socket
    /// (io_uring with provided-buffer rings), which takes data into the engine's pool buffers as
    /// it arrives; the op copies from there, and what it has no room for is kept for the next.
    /// Only for a caller that makes every read of the socket this way, on one vCPU, and closes
    /// it with fd::close on that vCPU (the armed receive holds the socket open until then).
    bool shared_recv = false;
    uint32_t poll_events = 0;
    completion_fn on_complete = nullptr;
    void* user = nullptr;
    // Engine-private state.
    list_hook hook;
    // Why the op was cancelled (ECANCELED, ETIMEDOUT); 0 = not cancelled. Once it completed, also
    // read by its caller: 0 then says it ended by itself, a cancel too late to stop it included,
    // which tells a kernel's ETIMEDOUT (a TCP connection given up) from a deadline's cancel.
    int cancel_errno = 0;
    bool engine_busy = false;
    bool engine_counted = false;  // counted among its fd's operations in the kernel (io_uring)
    long engine_result = 0;     // a result held back until a later completion (SEND_ZC)
};

/// A read or write at a file offset: it goes to a device or its page cache (socket transfers
/// have no offset).
inline bool is_positioned_io(const io_op& op) noexcept {
    switch (op.code) {
        case opcode::read:
        case opcode::write:
        case opcode::readv:
        case opcode::writev: return op.offset >= 0;
        case opcode::read_fixed:
        case opcode::write_fixed: return true;
        default: return false;
    }
}

enum class kind { io_uring, epoll };

struct options {
    unsigned queue_depth = 1024;  // io_uring SQ entries
    bool sqpoll = false;
    /// The engine will be driven by polling its fd from another engine (a side ring): no
    /// DEFER_TASKRUN, whose completions only a wait() on the ring itself would post.
    bool pollable = false;
};

class engine {
public:
    /// Returned by submit() when the operation did not complete inline.
    static constexpr long pending = LONG_MIN;

    virtual ~engine() = default;
    virtual kind type() const noexcept = 0;
    virtual const char* name() const noexcept = 0;

    /// Starts op. Returns its result (>= 0 or -errno) if it completed at once; otherwise
    /// `pending`, and op->on_complete runs later from wait().
    virtual long submit(io_op& op) noexcept = 0;
    /// Asks a pending op to stop. Its completion still arrives: -err if it was stopped, or its
    /// real result if it had already finished (nothing is lost). err is ECANCELED or ETIMEDOUT.
    virtual void cancel(io_op& op, int err) noexcept = 0;
    /// Flushes queued submissions, waits up to timeout_ns (-1 forever, 0 poll) for completions
    /// or a notify(), and dispatches every completion available. Returns how many it dispatched.
    virtual int wait(int64_t timeout_ns) noexcept = 0;
    /// A cheap (no syscall) hint that wait(0) would find completions. Only meaningful when
    /// pending_hint_is_exact(); otherwise the caller must poll with wait(0) to know.
    virtual bool has_pending() noexcept { return false; }
    virtual bool pending_hint_is_exact() const noexcept { return false; }
    /// Hands queued submissions to the kernel without waiting or dispatching completions.
    virtual void flush() noexcept {}
    /// Thread-safe: makes a concurrent or the next wait() return promptly.
    virtual void notify() noexcept = 0;
    /// Drops any per-fd state: the fd is about to be closed (closing), or stays open but the
    /// engine will not see it again until it is used anew (libcurl's cached connections).
    /// recv_pooled ops of fd still waiting for a pool buffer complete with EBADF.
    virtual void forget_fd(int fd, bool closing) noexcept {
        (void)fd;
        (void)closing;
    }
    /// True if the engine holds input taken ahead for fd (connections a multishot accept took,
    /// data or the end of the stream a multishot receive took), which a readiness poll of fd
    /// reports at once though the kernel's socket may be empty. On this engine's thread.
    virtual bool holds_input(int fd) const noexcept {
        (void)fd;
        return false;
    }
    /// True if submit() performs op natively and asynchronously. False: the op is carried out
    /// by a blocking syscall on the engine's thread (file ops on epoll), or is unsupported
    /// (EOPNOTSUPP: fixed buffers and files outside io_uring).
    virtual bool native(opcode c) const noexcept { (void)c; return false; }
    /// An fd that is readable when wait(0) would find completions (-1: none). Lets one engine
    /// drive another (an io_uring ring for files on a vCPU whose engine is epoll).
    virtual int pollable_fd() const noexcept { return -1; }
    /// Registers buffers / files with the kernel for read_fixed/write_fixed and fixed_file ops.
    /// Replaces any earlier registration. Errors: EOPNOTSUPP (not io_uring), the kernel's.
    /// The size of each buffer of the pool that recv_pooled draws from.
    static constexpr size_t pooled_buffer_size = 16 * 1024;
    /// How many buffers the pool has (per engine).
    static constexpr unsigned pooled_buffer_count = 256;
    /// Returns a buffer that a recv_pooled completion handed out, on the engine's own thread.
    /// A recv_pooled waiting for a free buffer (all are out) is then run again.
    virtual void give_back(void* buf) noexcept = 0;
    /// How many pool buffers are in use: handed out and not given back yet, or (io_uring without
    /// buffer rings) taken by a receive still waiting for data. For tests and metrics.
    virtual unsigned pooled_buffers_out() const noexcept = 0;
    virtual result<void> register_buffers(const iovec* iov, unsigned n) noexcept;
    virtual result<void> register_files(const int* fds, unsigned n) noexcept;
};

/// Records that fd is being closed (gluon::fd::close and file_io::close call it): engines of other
/// vCPUs that still hold state for the fd number drop it and register the next file that
/// gets the number afresh. Thread-safe.
void note_fd_closed(int fd) noexcept;
/// How many times fd's number has been closed through note_fd_closed (0 for fd < 0, or beyond
/// RLIMIT_NOFILE's hard limit as it was at the first call).
uint32_t fd_generation(int fd) noexcept;

/// Performs op with one blocking syscall on the calling thread (no O_NONBLOCK retry, no
/// timeout). What an engine without native file I/O, and the psync file engine, use.
long execute_blocking(io_op& op) noexcept;

/// Why a given engine was chosen or refused, for the one log line at start-up.
struct selection {
    std::unique_ptr<engine> eng;
    std::string reason;
};

/// Creates the engine of `k` (an error says why it is unavailable). Errors: the kernel's (ENOSYS,
/// EPERM, ENOMEM: no io_uring, refused, short of locked memory), EOPNOTSUPP (io_uring whose
/// opcode probe is refused, or without the operations gluon cannot do without: before 5.6).
result<std::unique_ptr<engine>> create(kind k, const options& opts = {});
/// Probes the kernel and GLUON_ENGINE: io_uring first, epoll as the fallback.
result<selection> select(const options& opts = {});
/// Parses a kind_name() ("io_uring", also "iouring", or "epoll"); nullopt for anything else.
std::optional<kind> parse_kind(std::string_view s) noexcept;
const char* kind_name(kind k) noexcept;
/// True if engines of kind k can be created on this machine (probed once, cached).
bool available(kind k) noexcept;

}  // namespace gluon::engine
