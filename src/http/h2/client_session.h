// An HTTP/2 client connection on nghttp2 (ADR 0016): many fibers' requests multiplexed over one
// connection, each a stream. A reader fiber feeds nghttp2 and hands each stream's response to
// the fiber waiting for it; a writer fiber sends what nghttp2 queued. All on the vCPU that
// opened it: its calls must come from fibers of that vCPU (close() excepted).
#pragma once

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/common/result.h"
#include "gluon/http/client.h"
#include "gluon/net/byte_stream.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sync/semaphore.h"

namespace gluon::http::detail {

class h2_client_session;

/// One request and its response, as a stream: the request body written in pieces, the response
/// read in pieces. For the client and for protocols on HTTP/2 (gRPC).
class h2_call {
public:
    explicit h2_call(std::shared_ptr<h2_client_session> s) noexcept : sess_(std::move(s)) {}
    ~h2_call();
    h2_call(const h2_call&) = delete;
    h2_call& operator=(const h2_call&) = delete;

    /// Sends the request head. `fields`: regular fields (names any case; connection-specific
    /// ones are dropped). `body`: a body follows (write/finish), else the request ends here.
    /// Errors: EPIPE (the connection is gone), EPROTO (nghttp2 refused it), ENOMEM.
    result<void> start(std::string_view method, std::string_view scheme, std::string_view authority,
                       std::string_view path, const std::vector<std::pair<std::string, std::string>>& fields,
                       bool body);
    /// Queues request body bytes; waits while 64 KiB are queued unsent, each wait for at most
    /// timeout.gap and the whole call until timeout.deadline (a gRPC call's deadline: a peer
    /// opening its window a little at a time does not stretch it). Errors: ECONNRESET (the
    /// stream was reset or closed, answered_early() included), EPIPE, ETIMEDOUT, ECANCELED.
    result<void> write(std::string_view data, stall_timeout timeout);
    /// Ends the request body.
    result<void> finish();
    /// Waits for the response head (interim 1xx skipped), for at most timeout in all.
    /// Errors: ECONNRESET, ENODATA (the connection ended), EPROTO (a head or trailer section
    /// over the session's limits: the stream is reset), ETIMEDOUT, ECANCELED.
    result<void> wait_head(duration timeout);
    int status() const noexcept { return status_; }
    const std::vector<std::pair<std::string, std::string>>& headers() const noexcept { return headers_; }
    /// The next piece of the response body (0: it ended), waiting for at most timeout in all.
    /// Errors: those of wait_head.
    result<size_t> read(char* buf, size_t n, duration timeout);
    /// Trailer fields, once read() returned 0.
    const std::vector<std::pair<std::string, std::string>>& trailers() const noexcept { return trailers_; }
    /// The RST_STREAM code the server ended the stream with (0: none, or NO_ERROR).
    uint32_t reset_code() const noexcept { return reset_code_; }
    /// The server answered whole and closed the stream before the request's end (RST_STREAM
    /// NO_ERROR, RFC 9113 8.1: the rest of the request is not wanted, and the answer stands).
    bool answered_early() const noexcept {
        return closed_ && reset_code_ == NGHTTP2_NO_ERROR && head_done_ && in_done_ && !too_big_;
    }
    /// The server refused the stream before processing it: RST_STREAM REFUSED_STREAM, or a
    /// stream above the last one a GOAWAY names (RFC 9113 8.7, 6.8). The request may be sent
    /// again, whatever its method.
    bool refused() const noexcept { return closed_ && reset_code_ == NGHTTP2_REFUSED_STREAM && !head_done_; }
    /// Resets the stream (CANCEL) if it is still open.
    void cancel() noexcept;

    // For the session's callbacks.
    /// False: the header block is over the limits (the stream is to be reset).
    bool on_header(bool interim_or_head, std::string_view name, std::string_view value);
    void on_head_end(bool end_stream);
    void on_data(const uint8_t* p, size_t n);
    void on_end() noexcept;
    void on_close(uint32_t code) noexcept;
    void on_gone() noexcept;
    long next_data(uint8_t* buf, size_t length, uint32_t* flags);
    list_hook hook;  // in the session's list of open calls

private:
    int wait(duration timeout);
    result<void> wait_head(step_timeouts& left);
    void give_back(size_t n) noexcept;  // flow-control credit for bytes read
    void wake() noexcept {
        if (waiting_) ev_.set();
    }

    std::shared_ptr<h2_client_session> sess_;
    int32_t id_ = -1;
    bool open_ = false;  // nghttp2 has the stream
    // Request body.
    std::string out_;
    size_t out_pos_ = 0;
    bool out_eof_ = false, deferred_ = false;
    // Response.
    int status_ = 0;
    bool head_done_ = false, in_done_ = false, closed_ = false, gone_ = false;
    bool too_big_ = false;                   // a header block went over the limits
    size_t block_bytes_ = 0, block_fields_ = 0;  // of the header block being received
    uint32_t reset_code_ = 0;
    std::vector<std::pair<std::string, std::string>> headers_, trailers_;
    std::string in_;
    size_t in_pos_ = 0;
    event ev_;
    bool waiting_ = false;
};

class h2_client_session : public std::enable_shared_from_this<h2_client_session> {
public:
    /// Starts HTTP/2 on s (TLS with "h2" negotiated, or clear text by prior knowledge) from the
    /// calling vCPU. Errors: ENOMEM, EPERM (not on a vCPU).
    /// `head_limits` bound each header block of a response (head, interim, trailers), counted
    /// as RFC 9113 6.5.2 measures a field list (HPACK lets a few bytes stand for a long field).
    /// `ping_after`: once calls have waited that long with nothing at all read, the session
    /// sends a PING, and if nothing comes within `ping_timeout` either it is dead: no longer
    /// usable, its calls fail with ETIMEDOUT. forever: no PINGs (one more fiber otherwise).
    static result<std::shared_ptr<h2_client_session>> start(std::unique_ptr<net::byte_stream> s,
                                                            duration send_timeout,
                                                            const limits& head_limits = {},
                                                            duration ping_after = forever,
                                                            duration ping_timeout = forever);
    ~h2_client_session();

    /// False once the connection ended, the server sent GOAWAY (no new streams) or left a PING
    /// unanswered.
    bool usable() const noexcept { return !gone_ && !goaway_ && !dead_; }
    /// Closes the connection; calls in flight fail. Any thread may call it: from another thread
    /// than the session's vCPU it asks the session's writer, which closes it there (after this
    /// returns). A pool that keeps a session per vCPU closes them all this way.
    void close() noexcept;
    /// Runs a whole exchange for http::client: the request (body from `body` or `source`), then
    /// the response into out (or its body to on_body). `started`: the response head came;
    /// `refused`: the call failed because the server refused its stream unprocessed
    /// (h2_call::refused), so it may go again. Errors: those of h2_call, EMSGSIZE, ECANCELED
    /// (on_body said stop).
    result<void> exchange(std::string_view method, const url& u, const client_request& req, bool with_body,
                          const std::vector<std::pair<std::string, std::string>>& fields, uint64_t max_body,
                          duration read_timeout, deadline_t total,
                          const std::function<bool(std::string_view)>* on_body, client_response& out, bool& started,
                          bool& refused);

    // For h2_call.
    nghttp2_session* ng() const noexcept { return ng_; }
    bool gone() const noexcept { return gone_; }
    /// The connection was ended for a PING left unanswered (see start()).
    bool dead() const noexcept { return dead_; }
    const limits& head_limits() const noexcept { return head_limits_; }
    void want_write() noexcept {
        if (!write_wanted_) {
            write_wanted_ = true;
            wr_.set();
        }
    }

    struct private_tag {};
    h2_client_session(private_tag, std::unique_ptr<net::byte_stream> s, duration send_timeout,
                      const limits& head_limits, duration ping_after, duration ping_timeout);

private:
    void reader(std::shared_ptr<h2_client_session> self);
    void writer(std::shared_ptr<h2_client_session> self);
    void watchdog(std::shared_ptr<h2_client_session> self);
    bool flush();

    std::unique_ptr<net::byte_stream> s_;
    duration send_timeout_;
    limits head_limits_;
    nghttp2_session* ng_ = nullptr;
    event wr_;
    bool write_wanted_ = false;
    bool gone_ = false;
    bool goaway_ = false;
    bool closing_ = false;
    bool dead_ = false;  // a PING went unanswered
    duration ping_after_, ping_timeout_;
    uint64_t reads_ = 0;        // reads that brought bytes
    int64_t last_read_ns_ = 0;  // when the last of them did (coarse clock)
    event dog_;                 // the watchdog's sleep; set once the connection has ended
    gluon::detail::vcpu* home_;             // the vCPU that started it
    std::atomic<bool> close_asked_{false};  // close() from another thread, for the writer
    std::string out_;
    char buf_[16 * 1024];

public:
    intrusive_list<h2_call, &h2_call::hook> calls;  // calls with an open stream
    // nghttp2 callbacks' work.
    int on_frame(const nghttp2_frame& f);
};

}  // namespace gluon::http::detail
