// One exchange through an upstream connection: the request (head and streamed body) goes up,
// the response comes back down as it arrives.
#pragma once

#include "fields.h"
#include "upstream.h"

namespace gluon::http::detail {

struct relay_outcome {
    enum end_kind : uint8_t {
        done,             // the response was relayed
        client_failed,    // the client's side failed (its body, or writing to it): nothing to answer
        upstream_failed,  // see `error`, `answered` and `retryable`
    } end = done;
    int error = 0;           // for upstream_failed: the errno (ETIMEDOUT: 504; others: 502)
    bool answered = false;   // the response's head had gone to the client: it was aborted
    bool retryable = false;  // a request without a body, and nothing came back
    bool keep = false;       // the connection may go back to the pool
};

/// True for a request whose declared Content-Length is over its body limit
/// (request::max_body_bytes): its body's first read has then failed, and the server answers 413.
/// Asked before an upstream connection is taken, which such a request would only open and
/// close: the limit is checked at the first read, after the handler has started.
bool body_refused(request& req);

/// Sends req to the upstream on c and relays its answer into res.
relay_outcome relay(upstream_conn& c, request& req, response& res, const request_line& line,
                    const proxy_common_options& o);

/// Answers an upstream failure that happened before any of the response was sent: 504 for a
/// timeout, 502 otherwise.
void answer_failure(response& res, int error);

/// Logs an upstream failure (rate limited).
void log_failure(std::string_view upstream, int error);

}  // namespace gluon::http::detail
