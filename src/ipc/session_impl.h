// The state behind ipc::session and ipc::stream (private to src/ipc).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "gluon/ipc/session.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "queue.h"
#include "region.h"
#include "shm.h"
#include "wire.h"

namespace gluon::ipc::detail {

/// A mapped buffer region, shared by the sessions that use it; unmapped (and, for a file this
/// side is to remove, unlinked) when the last one goes.
struct region_ref {
    std::string name;  // what the client sends as the buffer path
    shm_file file;
    mapping map;
    buffer_region region;
};

/// Server side: regions already mapped, by (device, inode), so a client's sessions share one
/// mapping of its region (shmipc-go keys them by path, which two clients can share by mistake).
struct region_registry {
    using identity = std::pair<dev_t, ino_t>;
    gluon::mutex mu;
    std::map<identity, std::weak_ptr<region_ref>> by_identity;
    size_t purge_at = 16;  // by_identity's size that makes slot() purge it

    /// The entry for id, empty if new (under mu). Purges the entries of regions whose sessions
    /// all ended first whenever the map doubled since the last purge: clients that came and went
    /// leave nothing behind, at an amortised constant cost per entry.
    std::weak_ptr<region_ref>& slot(identity id);
    /// Entries, live or not purged yet (under mu).
    size_t size() const noexcept { return by_identity.size(); }
};

/// A received message: slices of the region (checked when received; freed as they are read),
/// or the payload of a FallbackData message.
struct rx_message {
    std::vector<buffer_region::piece> pieces;
    std::vector<uint8_t> heap;
    size_t index = 0;  // current piece
    size_t pos = 0;    // bytes read of the current piece (or of heap)
};

struct stream_impl {
    std::shared_ptr<session_impl> s;
    uint32_t id = 0;
    // Guarded by s->mu.
    std::deque<rx_message> rx;
    size_t readable = 0;
    condition_variable cv;
    bool remote_closed = false;
    bool local_closed = false;
    bool write_closed = false;  // shutdown() or close(): the peer was told
    std::atomic<bool> fallback{false};
    bool announced = false;  // sent something: the peer knows the stream
    // The writer's open reservation.
    uint32_t reserved = buffer_region::k_none;
    std::vector<uint8_t> reserved_heap;
    bool reserving = false;
    size_t reserved_size = 0;
};

struct atomic_counters {
    std::atomic<uint64_t> bytes_sent{0}, bytes_received{0}, messages_sent{0}, messages_received{0};
    std::atomic<uint64_t> fallbacks_sent{0}, fallbacks_received{0}, polls_sent{0}, polls_received{0};
    std::atomic<uint64_t> full_waits{0};
};

struct session_impl : std::enable_shared_from_this<session_impl> {
    bool client = false;
    uint8_t version = 3;
    session_options opts;
    net::stream sock;
    std::shared_ptr<region_ref> region;
    shm_file queue_file;
    mapping queue_map;
    queue_view send_q, recv_q;
    std::shared_ptr<region_registry> registry;

    gluon::mutex mu;  // everything below up to send_mu
    condition_variable accept_cv;
    condition_variable space_cv;
    std::atomic<int> space_waiters{0};  // writers in wait_space (give_back skips the lock without)
    std::deque<std::shared_ptr<stream_impl>> accepted;
    std::unordered_map<uint32_t, std::shared_ptr<stream_impl>> streams;
    // Server: ids of streams it closed first, oldest first (some the client closed since), at
    // most opts.max_pending_streams: they stay in `streams` until the client closes them too.
    std::deque<uint32_t> closed_first;
    size_t fallback_buffered = 0;  // FallbackData bytes received and not yet read or dropped
    std::error_code err;
    bool peer_gone = false;      // the peer hung up (set by finish_queues)
    bool closing = false;
    bool reader_ending = false;  // the reader is in its last steps: fail() no longer interrupts it
    fiber reader;                // empty once close() has taken it to join it
    std::optional<uint64_t> hot_restart_epoch;
    // Server: the epochs of the HotRestarts sent, each true once acknowledged. Only those: an
    // entry per epoch the client names would let it grow this without limit.
    std::map<uint64_t, bool> hot_restarts;

    gluon::mutex send_mu;   // the one producer of send_q
    gluon::mutex write_mu;  // whole control messages on the socket
    std::atomic<uint32_t> next_id{1};
    atomic_counters stats;
    std::atomic<bool> reader_done{false};
    std::atomic<bool> wake_pending{false};  // a wake-up fiber waits for the socket (wake_peer)
    int64_t linger_ns = 0;  // how long the reader lingers (opts.poll_linger)

    ~session_impl();

    // session.cc
    void start_reader();
    /// Ends the session with e (the first error wins), wakes every waiter and interrupts the
    /// reader, which then hangs up (finish_queues).
    void fail(std::error_code e) noexcept;
    std::error_code error_locked() const noexcept { return err; }
    /// Ends the session (session_closed), joins the reader, gives back the slices this side
    /// holds and closes the socket once no writer is in a send on it (once; later calls return
    /// at once).
    void shutdown_and_join() noexcept;
    void release_all() noexcept;
    /// The session's last steps on its queues (the reader's, once the session has failed): see
    /// session.cc. peer_hung_up: the reader saw the peer hang up.
    void finish_queues(bool peer_hung_up) noexcept;
    /// Pops every element of q and gives its slices back to the region.
    void give_back(queue_view& q) noexcept;
    /// Reads (and drops) what the peer still sends until it hangs up: true then; false at dl or
    /// on another error.
    bool wait_hang_up(deadline_t dl) noexcept;

    // reader.cc
    void read_loop() noexcept;
    std::error_code drain_queue() noexcept;
    std::error_code on_element(const queue_element& e) noexcept;
    std::error_code on_message(const wire::message& m) noexcept;
    /// The peer closed stream id (a close element or StreamClose): wakes its reader, and
    /// forgets the stream if this side closed it too.
    void remote_close(uint32_t id) noexcept;
    /// Stream id (under mu); if unknown and create, a new one the client started, queued for
    /// accept_stream. nullptr if none. Errors (in ec): ipc::errc::backlog_exceeded
    /// (opts.max_pending_streams not yet accepted).
    std::shared_ptr<stream_impl> stream_for(uint32_t id, bool create, std::error_code& ec);
    void free_pieces(const std::vector<buffer_region::piece>& p) noexcept;

    // writer.cc
    /// Errors: the session's, if it has ended.
    result<void> check_up();
    /// Sends one whole control message by dl (the wait for write_mu included). Errors: the
    /// session's (checked first), those of write_rest.
    result<void> write_control(const uint8_t* p, size_t n, deadline_t dl = k_no_deadline);
    /// write_control under write_mu.
    result<void> write_locked(const uint8_t* p, size_t n, deadline_t dl);
    /// Under write_mu: writes the rest of a control message of which `sent` bytes went out.
    /// Errors: ETIMEDOUT, ECANCELED (the session fails too if part of the message went out),
    /// ECONNRESET, EPIPE and the like (the session fails with ECONNRESET).
    result<void> write_rest(iovec* iov, int cnt, size_t sent, deadline_t dl);
    /// Sends n bytes of stream id as FallbackData: messages of at most opts.max_fallback bytes.
    /// Errors: the session's (checked before each message), those of write_rest.
    result<void> write_fallback(uint32_t id, const uint8_t* p, size_t n, duration timeout);
    /// Puts e on the send queue (waiting while it is full) and wakes the peer if needed.
    /// Errors: the session's (also one that ended it while the caller filled its slices: the
    /// element is then not put, and the caller gives its slices back), ipc::errc::bad_queue,
    /// those of wait_space.
    result<void> enqueue(const queue_element& e, deadline_t dl);
    /// Waits a little for space (region or queue) to free up. Errors: ETIMEDOUT, the session's.
    result<void> wait_space(deadline_t dl);
    /// Sends the peer a Polling if its reader sleeps. One that cannot go by dl is sent by a
    /// fiber of its own (the message is queued: the writer need not wait).
    void wake_peer(deadline_t dl = k_no_deadline) noexcept;
};

std::shared_ptr<stream_impl> make_stream(const std::shared_ptr<session_impl>& s, uint32_t id);

/// Handshakes (handshake.cc).
result<std::shared_ptr<session_impl>> client_handshake(const net::address& addr, const session_options& opts,
                                                       std::shared_ptr<region_ref> shared_region);
result<std::shared_ptr<session_impl>> server_handshake(net::stream sock, const session_options& opts,
                                                       std::shared_ptr<region_registry> registry);
/// Creates a client's buffer region. Errors: those of creating and mapping shared memory, EINVAL.
result<std::shared_ptr<region_ref>> create_region(const session_options& opts, const std::string& name);
/// "<prefix>_<pid>_<n>", n counting the process's clients and session managers: file names of
/// two live regions never repeat (a shmipc-go server caches mappings by path and would reuse a
/// stale one).
std::string unique_prefix(const std::string& prefix);

}  // namespace gluon::ipc::detail
