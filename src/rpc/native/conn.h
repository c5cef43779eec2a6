// The two halves every native RPC connection has, client or server: a buffered frame reader
// that fills messages in place, and a writer fiber that sends whatever frames queued up while
// it was writing in one gather write (pipelining). Both run on the connection's vCPU; the
// connection's fibers and its callers share these structures without locks.
#pragma once

#include "gluon/common/clock.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/net/byte_stream.h"
#include "gluon/rpc/native/message.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "wire.h"

#include <cstdint>
#include <memory>
#include <sys/uio.h>
#include <vector>

namespace gluon::rpc::detail {

/// A frame to send: iov[0] is its header (and usually its fixed part), the rest point into the
/// message. The writer calls done(frame, ok) once it was written, or copied for release()
/// (ok = true), or dropped (ok = false); done may free the frame.
struct out_frame {
    enum class state : uint8_t { idle, queued, writing };
    list_hook hook;
    iov_list iov;
    state st = state::idle;
    void (*done)(out_frame*, bool ok) = nullptr;
};

/// Joins f even if the calling fiber is interrupted meanwhile (the interrupt is kept for its
/// next blocking call): for fibers that use memory the caller is about to free.
void join_fully(fiber& f) noexcept;

class frame_writer {
public:
    explicit frame_writer(net::byte_stream& s);
    ~frame_writer();
    frame_writer(const frame_writer&) = delete;
    frame_writer& operator=(const frame_writer&) = delete;

    /// Starts the writer fiber on the calling vCPU. Errors: those of spawn.
    result<void> start();
    /// Queues f (the writer takes everything queued at once). A broken or stopped writer
    /// drops it: done(f, false) before this returns.
    void push(out_frame& f);
    /// Takes f off the queue if it is still waiting there (true); false if it is being written
    /// or was written already.
    bool unqueue(out_frame& f) noexcept;
    /// Returns once f is no longer being written (not interruptible: f's memory is in use).
    void wait_not_writing(out_frame& f) noexcept;
    /// Like wait_not_writing, at once: a write of f in progress goes on from a copy of what is
    /// left of its batch (the peer may not be reading; the stream cannot be left mid-frame).
    void release(out_frame& f) noexcept;
    /// Stops the fiber (a write in progress is interrupted) and drops what is queued.
    void stop() noexcept;
    bool broken() const noexcept { return broken_; }
    /// Frames written, and the gather writes that carried them.
    uint64_t frames() const noexcept { return frames_; }
    uint64_t writes() const noexcept { return writes_; }
    /// Called once, from the writer fiber, when a write fails.
    void on_broken(void (*fn)(void*), void* ctx) noexcept { broken_fn_ = fn, broken_ctx_ = ctx; }

private:
    void run();
    bool write_batch();
    void drop_all() noexcept;

    net::byte_stream& s_;
    intrusive_list<out_frame, &out_frame::hook> q_;
    std::vector<out_frame*> batch_;
    std::vector<iovec> iov_;
    std::unique_ptr<uint8_t[]> stage_; // small pieces coalesced: fewer, larger iovecs
    event wake_;
    event batch_done_{true};
    fiber fiber_;
    uint64_t frames_ = 0, writes_ = 0;
    bool idle_ = false;
    bool broken_ = false;
    bool stopped_ = false;
    void (*broken_fn_)(void*) = nullptr;
    void* broken_ctx_ = nullptr;
};

class frame_reader {
public:
    frame_reader(net::byte_stream& s, size_t buffer_bytes);

    /// Bounds the wait for the rest of each frame, from its first wait once any of its bytes
    /// (its header's first) has come; waiting for a frame's first byte is not bounded.
    /// forever: no bound but the callers' own deadlines.
    void set_frame_timeout(duration d) noexcept { frame_timeout_ = d; }

    /// The next frame's header. Errors: ENODATA (the stream ended), ETIMEDOUT (the frame
    /// timeout passed after its first byte), the transport's.
    result<wire::header> next_header();
    /// The next n bytes of the frame, contiguous, consumed. Errors: as next_header, ETIMEDOUT
    /// (`until` or the frame timeout passed; what came is kept, frame_left() says what is still
    /// to come).
    result<const uint8_t*> take(size_t n, deadline_t until = k_no_deadline);
    /// Gives the frame's next bytes to the targets: what is buffered is copied, a large rest
    /// for a place sized already is read straight into it, and a field grows as its bytes
    /// arrive. Errors: as take.
    result<void> fill(rx_list& t, deadline_t until = k_no_deadline);
    /// Discards the frame's next n bytes. Errors: as next_header.
    result<void> skip(size_t n);
    /// The bytes of the current frame (since next_header) not consumed yet.
    size_t frame_left() const noexcept { return left_; }

private:
    result<void> ensure(size_t n, deadline_t until, bool frame_begun = true);
    deadline_t bound(deadline_t until) noexcept;

    net::byte_stream& s_;
    std::unique_ptr<uint8_t[]> buf_;
    size_t cap_, pos_ = 0, end_ = 0;
    size_t left_ = 0;
    duration frame_timeout_ = forever;
    deadline_t frame_until_ = k_no_deadline; // the current frame's, once it waited
    bool frame_waited_ = false;
};

} // namespace gluon::rpc::detail
