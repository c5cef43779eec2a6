// One HTTP/1.1 connection: the loop that reads heads, runs the handler, and writes responses.
//
// The receive buffer holds the current request's head for as long as its handler runs (the
// request's views point into it); its body is read into the space after the head, so the head
// never moves while it is in use. Responses are appended to one output buffer that is written
// when the loop would otherwise wait for input: the responses to pipelined requests go out in
// one send.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gluon/common/intrusive_list.h"
#include "gluon/http/server.h"
#include "exchange.h"
#include "gluon/net/byte_stream.h"

namespace gluon::http::detail {

class h2_session;

class connection final : public exchange {
public:
    connection(net::byte_stream& s, const handler& h, const server_options& opts, const bool* stopping);
    ~connection();
    void run();

    /// While the loop waits for a new request (idle keep-alive): a graceful stop closes it.
    bool idle() const noexcept { return idle_; }
    /// A graceful stop began: wakes an idle connection so that it sees it (its read ends), and
    /// tells a busy HTTP/2 one's client to open no more streams (GOAWAY); a busy HTTP/1.1 one
    /// sees it after its response.
    void wake_for_stop() noexcept;
    list_hook hook;

    // exchange
    result<size_t> read_body(void* buf, size_t n, duration timeout) override;
    net::byte_stream& stream() noexcept override;
    result<void> write_body(response& r, std::string_view data) override;
    result<void> finish_body(response& r, bool short_body) override;
    result<std::string_view> upgrade(response& r, std::string_view raw_head) override;
    result<void> wait_abandoned(duration) override { return errno_error(EOPNOTSUPP); }
    bool abandoned() const noexcept override { return false; }
    result<void> interrupt_when_abandoned(deadline_t) override { return errno_error(EOPNOTSUPP); }
    std::string_view client_ip() override { return client_ip_.get(s_); }

private:
    enum class got { head, closed, failed, h2 };
    got read_head();
    void handle();
    void run_h2(std::string_view preread);
    /// An error answer that closes the connection; `parsed`: the request's head was parsed (a
    /// HEAD request's answer then has no body).
    void send_error(int status, const char* why, bool parsed = true);
    void fail_response();
    bool finish_body();
    result<size_t> stalled();
    bool body_over_limit() const noexcept;
    void finish_response();
    void lingering_close();
    void log_access();
    bool flush();
    bool send_file(response& r);
    result<size_t> wait_idle(duration timeout);
    void release_memory() noexcept;
    bool fill(size_t min_free, duration timeout, result<size_t>& got_bytes);
    void grow(size_t want);
    void append_head(response& res, bool chunked, uint64_t length);
    void write_head(response& res);  // of a streamed body
    result<void> write_raw(std::string_view a, std::string_view b = {});
    /// False for HEAD and for statuses without a body (1xx, 204, 304).
    bool body_allowed(const response& r) const noexcept;

    net::byte_stream& s_;
    const handler& h_;
    const server_options& opts_;
    const bool* stopping_;
    h2_session* h2_ = nullptr;  // while the connection speaks HTTP/2
    bool idle_ = false;
    bool keep_alive_ = true;
    bool detached_ = false;  // a handler took the connection over
    bool must_linger_ = false;  // input may still be coming (a refused request, an unread body)
    uint64_t served_ = 0;
    peer_ip_cache client_ip_;

    // Receive buffer: [start_, end_) unread; the head of the current request at [0, head_end_).
    struct block_deleter {  // back to this thread's cache of blocks (connection.cc)
        block_deleter() noexcept : size(0) {}
        explicit block_deleter(size_t n) noexcept : size(n) {}
        size_t size;
        void operator()(char* p) const noexcept;
    };
    std::unique_ptr<char, block_deleter> block_;  // [fields | receive buffer], page-aligned
    size_t block_size_ = 0, fields_bytes_ = 0;
    std::unique_ptr<char[]> grown_;  // a receive buffer outgrown the block's (a large head)
    char* in_ = nullptr;
    size_t cap_ = 0, start_ = 0, end_ = 0, head_end_ = 0;
    std::string out_;

    // The current exchange.
    request req_;
    response res_;
    uint64_t body_left_ = 0;  // framing::length: bytes still to come
    chunked_decoder dec_;
    size_t pending_ = 0;      // chunked: decoded bytes at start_ not yet handed out
    bool body_done_ = true;
    int body_error_ = 0;      // errno of a failed body read (EMSGSIZE, EPROTO, ...)
    bool body_stalled_ = false;  // a read of the body waited out the handler's own timeout
    bool continue_sent_ = false;
    uint64_t response_bytes_ = 0;  // of the last response, for the access log
};

}  // namespace gluon::http::detail
