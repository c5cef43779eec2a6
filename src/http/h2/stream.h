// One HTTP/2 stream on the server: the request its handler reads and the response it writes.
// Lives until both its handler has returned and nghttp2 has closed the stream (the response's
// body may still be sending after the handler returned; the peer may reset the stream while the
// handler runs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../exchange.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/sync/semaphore.h"

namespace gluon::http::detail {

class h2_session;

class h2_stream final : public exchange {
public:
    h2_stream(h2_session& s, int32_t id) noexcept;

    result<size_t> read_body(void* buf, size_t n, duration timeout) override;
    net::byte_stream& stream() noexcept override;
    result<void> write_body(response& r, std::string_view data) override;
    result<void> finish_body(response& r, bool short_body) override;
    result<std::string_view> upgrade(response&, std::string_view) override { return errno_error(EPROTONOSUPPORT); }
    result<void> wait_abandoned(duration timeout) override;
    bool abandoned() const noexcept override;
    result<void> interrupt_when_abandoned(deadline_t at) override;
    std::string_view client_ip() override;

    /// Builds the request head from the received fields; 0, or the status to refuse it with.
    int make_request();
    /// Runs the handler and submits what it answered.
    void serve();
    void fail_response();
    /// Hands received body bytes on; false: the stream refuses them (they are consumed).
    void on_data(const uint8_t* data, size_t len);
    /// nghttp2 closed the stream: wakes the handler's waits, and interrupts it if it asked
    /// (interrupt_when_abandoned) and the close ended its answer early.
    void on_close(uint32_t error_code) noexcept;
    /// The request is given up (a reset, the connection's end, the time given passed): the
    /// handler's fiber is interrupted, once, if the handler asked for it.
    void interrupt_handler() noexcept;
    /// How many response body bytes the next DATA frame carries (at most length), with its
    /// flags (a nghttp2_data_source_read_callback's work); emit_data then appends them to the
    /// output (false: the body could not be read, the stream is reset).
    long next_data(size_t length, uint32_t* flags);
    bool emit_data(std::string& to, size_t n);

    /// The response cannot go on (send_timeout passed with its bytes held back): the stream is
    /// reset and the handler's writes fail with ETIMEDOUT, so the client cannot take the part
    /// that was sent for a whole body.
    void give_up() noexcept;
    /// Body bytes are ready and only the peer's flow-control window can hold them back (a
    /// streamed body waiting for its handler's next write is not).
    bool awaits_window() const noexcept {
        return sending && !closed && !out_error && !(res.streaming_ && out.size() == out_pos && !out_eof);
    }
    /// Closes the response's file and drops its body's owner (a body cut off before its end).
    void release_body() noexcept { res.release(); }
    /// Makes a finished stream object serve stream new_id (keeping its buffers' capacity).
    void reuse(int32_t new_id) noexcept;
    /// Sets e if the handler waits on it (all on one vCPU: no race with the wait).
    void wake(event& e) noexcept {
        if (waiting_ == &e) e.set();
    }

    h2_session& sess;
    int32_t id;
    request req;
    response res;
    list_hook hook;

    // The request head, as received: names and values back to back in hbuf.
    struct field_ref {
        uint32_t name, name_len, value, value_len;
    };
    std::string hbuf;
    std::vector<field_ref> refs;
    std::vector<header> fields;
    size_t head_bytes = 0;
    int refuse = 0;  // 431 when the head was over the limits
    int64_t head_until = 0;  // mono_now_ns by which its head must have ended (0: it has)

    // The request body: received bytes not yet read, [in_pos, in.size()).
    std::string in;
    size_t in_pos = 0;
    uint64_t in_total = 0;
    bool in_done = false;
    int in_error = 0;
    event in_ready;

    // The response.
    bool submitted = false;  // its head went to nghttp2
    bool deferred = false;   // nghttp2 waits for resume_data
    bool out_eof = false;    // a streamed body has ended
    std::string out;         // a streamed body's bytes not yet framed, from out_pos
    size_t out_pos = 0;
    uint64_t body_off = 0;   // of a whole body, bytes already framed
    int out_error = 0;       // ETIMEDOUT once given up: later writes fail
    bool sending = false;    // a body goes to nghttp2, not yet to its end
    int64_t lingering_since = 0;  // answered, request still open: mono_now_ns of its last DATA
    int64_t linger_end = 0;       // mono_now_ns past which it lingers no more, DATA or not
    int64_t sent_at = 0;     // mono_coarse_ns of its head's submission or its last DATA frame
    event out_room;

    bool closed = false;
    bool reset = false;  // closed before the response ended, or by an RST_STREAM
    bool handler_done = false;
    bool handler_started = false;
    fiber* handler_fiber = nullptr;  // the worker running the handler (the session sets it)

private:
    result<void> submit(bool streaming);
    void default_limits() noexcept;  // the request's body limits, the server's
    bool body_over_limit() const noexcept;
    uint64_t body_length() const noexcept;
    event* waiting_ = nullptr;
    int wait(event& e, duration timeout);
    void end_interrupts() noexcept;  // the handler returned: see interrupt_when_abandoned
    struct interrupt_timer : vcpu_timer {
        h2_stream* st = nullptr;
    };
    interrupt_timer interrupt_at_;
    bool interrupt_armed_ = false;
    bool interrupted_ = false;
};

}  // namespace gluon::http::detail
