// An HTTP/2 server connection on nghttp2 (ADR 0016). The connection's fiber reads and feeds
// nghttp2; a writer fiber sends whatever nghttp2 has queued, woken when anything was submitted,
// so that the frames produced by one batch of input (many streams' responses, window updates,
// acknowledgements) leave in one send. Each stream's handler runs on a fiber of its own: worker
// fibers that take streams from a queue, spawned when every worker is busy (up to
// h2_max_concurrent_streams of them) and kept for the next streams while few are idle (a fiber
// per stream would cost its creation, and its stack's page faults, on every request).
#pragma once

#include <nghttp2/nghttp2.h>

#include <deque>
#include <string>
#include <string_view>

#include "gluon/common/intrusive_list.h"
#include "gluon/http/server.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/sync/semaphore.h"
#include "fields.h"
#include "stream.h"

namespace gluon::http::detail {

class h2_session {
public:
    /// `buf` is the connection's receive buffer (cap bytes), reused for reading.
    h2_session(net::byte_stream& s, const handler& h, const server_options& opts, const bool* stopping,
               bool* idle, char* buf, size_t cap);
    ~h2_session();
    h2_session(const h2_session&) = delete;
    h2_session& operator=(const h2_session&) = delete;

    /// Serves until the connection ends. `preread`: bytes already read (the preface).
    void run(std::string_view preread);

    /// A graceful stop began while streams are open: no stream after those is served.
    void refuse_new_streams() noexcept;
    /// Something was submitted: the writer will send it.
    void want_write() noexcept {
        if (!write_wanted_) {
            write_wanted_ = true;
            wr_.set();
        }
    }
    nghttp2_session* ng() const noexcept { return ng_; }
    net::byte_stream& stream() noexcept { return s_; }
    std::string_view client_ip() { return client_ip_.get(s_); }
    const handler& handler_fn() const noexcept { return h_; }
    const server_options& options() const noexcept { return opts_; }
    bool gone() const noexcept { return gone_; }
    /// A cleared list for building a response head (its memory kept from one to the next).
    nv_list& scratch_fields() noexcept {
        nv_.clear();
        return nv_;
    }
    /// A handler finished: the stream may be freed.
    void handler_finished(h2_stream& st) noexcept;

    // nghttp2 callbacks' work.
    int begin_headers(int32_t id);
    int on_header(int32_t id, std::string_view name, std::string_view value);
    int on_frame(const nghttp2_frame& f);
    int on_stream_close(int32_t id, uint32_t error_code);
    long on_send(const uint8_t* data, size_t len);
    int on_send_data(const nghttp2_frame& f, const uint8_t* framehd, size_t len, h2_stream& st);

private:
    bool feed(const char* p, size_t n);
    void start_handlers();
    void drop_reset_pending() noexcept;  // frees the queued streams reset before a worker took them
    void drop_request_rest(h2_stream& st) noexcept;  // an answered stream's request lingers
    struct worker {
        list_hook hook;
        fiber f;
    };
    void work(worker* w);
    void writer();
    bool flush();
    void free_stream(h2_stream& st) noexcept;
    bool check_stalls(int64_t now);
    bool check_heads(int64_t now);
    void check_lingering(int64_t now) noexcept;
    duration until_next_check(int64_t now) const noexcept;  // the stall, head or lingering check

    net::byte_stream& s_;
    const handler& h_;
    const server_options& opts_;
    const bool* stopping_;
    bool* idle_;
    char* buf_;
    size_t cap_;
    nghttp2_session* ng_ = nullptr;
    intrusive_list<h2_stream, &h2_stream::hook> streams_;  // every live stream object
    intrusive_list<h2_stream, &h2_stream::hook> spare_;    // finished ones, for reuse
    size_t spare_count_ = 0;
    std::vector<int32_t> ready_;  // streams whose head arrived in the input being fed
    std::deque<h2_stream*> pending_;  // streams waiting for a worker
    intrusive_list<worker, &worker::hook> workers_;
    size_t worker_count_ = 0, idle_workers_ = 0, spawning_ = 0;
    counting_semaphore work_{0};
    event workers_done_;
    event wr_;
    bool write_wanted_ = false;
    bool writer_done_ = false;
    oneshot writer_exited_;
    bool gone_ = false;  // the connection failed or ended: no more I/O
    bool goaway_sent_ = false;  // refuse_new_streams' GOAWAY
    int64_t data_sent_at_;          // mono_coarse_ns of the last DATA frame (or the start)
    int64_t next_stall_check_ = 0;  // mono_now_ns when a response may next be stalled
    int64_t next_linger_check_ = INT64_MAX;  // mono_now_ns when a lingering stream may be due
    int64_t next_head_check_ = INT64_MAX;    // mono_now_ns when an unended head may be due
    std::string out_;
    nv_list nv_;
    peer_ip_cache client_ip_;
};

}  // namespace gluon::http::detail
