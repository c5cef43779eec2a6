// Shared-memory IPC sessions that speak CloudWeGo shmipc's wire protocol (v2: /dev/shm files,
// v3: memfds passed over the socket), so a gluon program talks to shmipc-go services in either
// role. One session is one Unix-socket connection plus a queue pair; messages travel in slices
// of a buffer region the client creates and both sides allocate from. See docs/adr/0017.
//
// Calls park only the calling fiber. A stream is a byte stream (message boundaries are not kept,
// as in shmipc). Errors: EAGAIN-free: a full region or queue blocks the writer until space frees
// up or the timeout passes (ETIMEDOUT). The end of a stream the peer closed is ENODATA. When the
// peer goes away (its socket hangs up) every waiter wakes with ECONNRESET; a peer that breaks
// the protocol gets its session closed and every call returns the ipc::errc that said why. A
// write whose timeout or interrupt cuts a message on the socket short (FallbackData) ends the
// session with that ETIMEDOUT or ECANCELED: the peer could no longer tell where the next begins.
// A write waits for the socket no longer than its timeout: a queued message's wake-up for the
// peer that cannot go by then is sent by a fiber of the session, and the write succeeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/ipc/error.h"
#include "gluon/net/address.h"
#include "gluon/net/byte_stream.h"
#include "gluon/net/socket.h"

namespace gluon::ipc {

namespace detail {
struct session_impl;
struct stream_impl;
struct region_registry;
}  // namespace detail

/// How a client shares its memory: memfds passed with SCM_RIGHTS (protocol v3, the default) or
/// files under /dev/shm whose paths are sent (v2, what shmipc-go clients use by default).
enum class memory_mode { memfd, dev_shm };

/// One list of the buffer region: slices of `size` data bytes (a multiple of 4) taking
/// `percent` of it.
struct slice_size {
    uint32_t size;
    uint32_t percent;
};

struct session_options {
    memory_mode mode = memory_mode::memfd;
    /// Client: names of the shared memory; "_<pid>_<n>" is appended, then "_buffer" or
    /// "_queue_<n>". Real paths in dev_shm mode, labels for memfds.
    std::string path_prefix = "/dev/shm/gluon-ipc";
    /// Client: the buffer region (shmipc-go's default: 32 MiB in slices of 8172, 32748 and
    /// 131052 bytes at 50/30/20 %).
    size_t buffer_size = 32u << 20;
    std::vector<slice_size> slices = {{8172, 50}, {32748, 30}, {131052, 20}};
    /// Client: elements per queue (a multiple of 16 keeps the second queue's counters inside
    /// one cache line).
    uint32_t queue_cap = 8192;
    /// Both: the whole handshake, counted from connect or accept.
    duration handshake_timeout = std::chrono::seconds(5);
    /// Server: accept only memory sealed against shrinking (a memfd with F_SEAL_SHRINK, as gluon
    /// clients make), so that no client can make this process take SIGBUS by shrinking its
    /// memory under the mapping. shmipc-go clients do not seal (their memfds are made without
    /// MFD_ALLOW_SEALING) and /dev/shm files cannot be sealed: with this set, both are refused
    /// (ipc::errc::unsealed_memory).
    bool require_sealed = false;
    /// Both: the largest FallbackData message accepted from the peer, and the largest sent (a
    /// larger write goes as several messages, so set it alike on both sides).
    uint32_t max_fallback = 64u << 20;
    /// Both: FallbackData bytes received and not read yet, over all streams of the session (at
    /// least max_fallback). Slices are bounded by the region; these are heap memory, so a peer
    /// that sends more ends the session (ipc::errc::backlog_exceeded).
    size_t max_buffered_fallback = 256u << 20;
    /// Server: streams the client started that accept_stream has not taken yet (shmipc-go's
    /// server queues 1024); one more ends the session (ipc::errc::backlog_exceeded). Also how
    /// many streams this side closed first it remembers until the client closes them too, so
    /// that the client's late data for them is dropped: past that, the oldest is forgotten (data
    /// for it would then start a new stream).
    uint32_t max_pending_streams = 1024;
    /// Both: how long the reader keeps looking at an empty queue before clearing its working
    /// flag. While the flag is set the peer sends no wake-up, so a peer that answers within the
    /// linger costs neither side a system call; the price is up to this much CPU after each
    /// burst of messages. 0: clear at once (as shmipc-go does, after one yield). close() cuts a
    /// linger short.
    duration poll_linger = std::chrono::microseconds(20);
    /// Both: how long stream::close() waits to tell the peer (a close element, or StreamClose
    /// over the socket when the queue is full) for a peer that takes neither its queue nor its
    /// socket; close() takes no timeout of its own. Also how long session::close() (or the end
    /// of the session) waits for the peer to hang up when messages it has not taken are left
    /// in the send queue, to give their slices back.
    duration close_timeout = std::chrono::seconds(5);
    /// Both: when shared memory stays full for this long, a message goes over the socket as
    /// FallbackData instead of waiting on (forever: never; the writer waits for its timeout).
    duration fallback_after = forever;
};

/// What a session has done, readable at any time.
struct session_counters {
    uint64_t bytes_sent = 0, bytes_received = 0;
    uint64_t messages_sent = 0, messages_received = 0;
    uint64_t fallbacks_sent = 0, fallbacks_received = 0;
    uint64_t polls_sent = 0, polls_received = 0;
    uint64_t full_waits = 0;  // writes that waited for region or queue space
};

/// One list of the buffer region: slices in total and free now.
struct list_occupancy {
    uint32_t slice_size;
    uint32_t capacity;
    int32_t free;
};

class session;

/// A stream of a session. One fiber reads a stream at a time, and one writes at a time. It is a
/// net::byte_stream too (read_some, write_all, read_exactly, shutdown, close ...; ADR 0014), so
/// protocols written against byte_stream& (HTTP) run over shared memory unchanged.
class stream final : public net::byte_stream {
public:
    stream() noexcept = default;
    uint32_t id() const noexcept;
    bool valid() const noexcept { return impl_ != nullptr; }

    /// Zero-copy write, step one: n contiguous writable bytes in one slice of shared memory (or,
    /// for n above the largest slice, a heap buffer sent as FallbackData). Waits while the
    /// region is full. Errors: ETIMEDOUT, EINVAL (a reservation is already open), EPIPE (this
    /// stream was closed), ECONNRESET (the peer is gone), ipc::errc.
    result<std::span<uint8_t>> reserve(size_t n, duration timeout = forever);
    /// Step two: sends the first n reserved bytes as one message (n may be less than reserved;
    /// 0 gives the reservation back). Errors: EINVAL (nothing reserved, n too large), those of
    /// reserve.
    result<void> commit(size_t n, duration timeout = forever);
    /// Copies n bytes into shared memory (a chain of slices if needed) and sends them as one
    /// message. Errors: those of reserve.
    result<void> send(const void* buf, size_t n, duration timeout = forever);

    /// Zero-copy read: a view of the next received bytes, valid until consume() or the
    /// stream's end. Waits for data. Errors: ENODATA (the peer closed the stream and all was
    /// read), ETIMEDOUT, ECANCELED, ECONNRESET, ipc::errc.
    result<std::span<const uint8_t>> read_view(duration timeout = forever);
    /// Marks n bytes of the current view read (the slice goes back to its list once all read).
    void consume(size_t n) noexcept;
    /// Copies up to n received bytes (at least one). Errors: those of read_view.
    result<size_t> recv_some(void* buf, size_t n, duration timeout = forever);
    /// Copies exactly n bytes. Errors: those of read_view.
    result<void> recv_exactly(void* buf, size_t n, duration timeout = forever);
    /// Bytes received and not read yet.
    size_t readable() const noexcept;
    /// True while neither side has closed the stream and its session is up.
    bool is_open() const noexcept;

    // close() (from byte_stream): tells the peer this side is done (a close element, or
    // StreamClose when the queue is full; once), waiting for that no longer than
    // session_options::close_timeout, and gives back what was unread; later calls fail with
    // EPIPE. shutdown(timeout): tells the peer the same (within the timeout) but goes on
    // reading. Errors: ETIMEDOUT (the peer may never learn of it), ECONNRESET, ipc::errc (the
    // session is down); the stream is closed locally anyway.
    /// True once the stream sent FallbackData (then its later messages go on the socket too, to
    /// keep bytes in order). Receiving FallbackData does not move this side to the socket.
    bool in_fallback() const noexcept;

    explicit stream(std::shared_ptr<detail::stream_impl> s) noexcept : impl_(std::move(s)) {}
    /// The session this stream belongs to (an identity, for pools).
    const void* owner() const noexcept;

private:
    result<size_t> do_read_some(void* buf, size_t n, duration timeout) override;
    result<size_t> do_write_some(const void* buf, size_t n, duration timeout) override;
    result<void> do_shutdown(duration timeout) override;
    result<void> do_close() noexcept override;

    std::shared_ptr<detail::stream_impl> impl_;
};

/// A session: client (connect) or server (accept). Move-only; destroying it closes it.
class session {
public:
    session() noexcept = default;
    session(session&&) noexcept;
    session& operator=(session&&) noexcept;
    ~session();

    /// Client: creates the shared memory, connects to a shmipc server at addr (a Unix socket)
    /// and runs the handshake. Errors: those of net::stream::connect, of creating shared memory
    /// (ENOSPC, EMFILE, ...), EINVAL (bad options), ETIMEDOUT, ipc::errc::handshake_failed.
    static result<session> connect(const net::address& addr, const session_options& opts = {});
    /// Server: runs the handshake on an accepted connection. Errors: ETIMEDOUT,
    /// ipc::errc::handshake_failed / unsupported_version / bad_region / bad_queue /
    /// unsealed_memory, those of opening and mapping the client's memory (EPERM: a file outside
    /// the shared-memory directory or not the client's).
    static result<session> accept(net::stream sock, const session_options& opts = {});

    /// Client: a new stream (nothing is sent until its first message). Errors: EPERM (server
    /// side: shmipc servers cannot open streams), those of a closed session.
    result<stream> open_stream();
    /// Server: the next stream the client started. Errors: ETIMEDOUT, ECANCELED, ECONNRESET,
    /// ipc::errc, EPERM (client side).
    result<stream> accept_stream(duration timeout = forever);

    /// Closes the session: streams and calls in other fibers fail with
    /// ipc::errc::session_closed, slices this side held go back, and this side's files are
    /// removed (the mappings go with the last stream). Messages the peer has not taken go back
    /// once it hangs up, which close() waits for, at most session_options::close_timeout, only
    /// if there are any. Errors: none so far (kept for the future); closing twice is harmless.
    result<void> close();
    /// No error so far. The error that ended the session otherwise.
    bool healthy() const noexcept;
    std::error_code error() const noexcept;
    bool is_client() const noexcept;
    /// The negotiated protocol version (2 or 3).
    int version() const noexcept;
    session_counters counters() const noexcept;
    /// The buffer region's lists (free == capacity when nothing is in flight).
    std::vector<list_occupancy> occupancy() const;
    /// The queues: elements waiting (send, receive).
    std::pair<int64_t, int64_t> queued() const noexcept;

    /// Server: asks the client to move to a new server (HotRestart with epoch). Errors:
    /// ECONNRESET, EPIPE, ipc::errc.
    result<void> send_hot_restart(uint64_t epoch);
    /// Server: true once the client acknowledged that epoch, sent by send_hot_restart (an
    /// acknowledgement of an epoch never sent is ignored).
    bool hot_restart_acked(uint64_t epoch) const noexcept;
    /// Client: the epoch of a HotRestart the server sent, if any.
    std::optional<uint64_t> hot_restart_requested() const noexcept;
    /// Client: acknowledges it (after connecting to the new server). Errors: as send_hot_restart.
    result<void> ack_hot_restart(uint64_t epoch);

    explicit session(std::shared_ptr<detail::session_impl> s) noexcept;
    /// This session's identity, as stream::owner() gives it.
    const void* impl_owner() const noexcept { return impl_.get(); }

private:
    friend class listener;
    std::shared_ptr<detail::session_impl> impl_;
};

}  // namespace gluon::ipc
