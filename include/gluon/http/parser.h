// HTTP/1.x message heads and bodies, parsed strictly (RFC 9112) and without copies: every name,
// value and target is a view into the caller's buffer, valid while that buffer is.
//
// A head is parsed only once it is complete (its blank line has arrived): a partial head costs a
// search for the blank line, not a parse, and no parse state has to survive between reads.
// Whatever RFC 9112 calls invalid is an error with the status a server answers it with, and the
// connection must then be closed: bare CR or LF, NUL or other control bytes in a field, obs-fold,
// whitespace before a field's colon, Content-Length beside Transfer-Encoding, two different
// Content-Lengths, a transfer coding other than chunked, a missing or repeated Host in HTTP/1.1, a
// Host that is not uri-host[:port], a request target in none of the four forms of RFC 9112 3.2 or
// in a form its method may not use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gluon::http {

struct header {
    std::string_view name;   // as sent; compare with iequals
    std::string_view value;  // leading and trailing whitespace removed
};

enum class method : uint8_t { get, head, post, put, delete_, connect, options, trace, patch, other };

/// How a message's body is delimited.
enum class framing : uint8_t {
    none,      // no body
    length,    // content_length bytes
    chunked,   // Transfer-Encoding: chunked
    to_close,  // a response read until the connection closes
};

struct limits {
    size_t max_head_bytes = 16 * 1024;  // start line and fields; over it: 431 (414 for a long target)
    size_t max_headers = 100;           // over it: 431
};

/// The parse outcome: a complete head of `consumed` bytes, not yet complete, or invalid (the
/// status to answer with).
struct parse_result {
    enum kind : uint8_t { complete, incomplete, invalid } state;
    uint16_t status = 0;     // for invalid: 400, 414, 417, 431, 501 or 505
    size_t consumed = 0;     // for complete: the head's length, blank line included
    const char* why = "";    // for invalid: a short reason, for logs and tests
};

/// Common to requests and responses.
struct message_head {
    header* headers = nullptr;  // the fields in order; room for limits::max_headers, the caller's
    size_t header_count = 0;
    uint8_t version_major = 1;  // 1, or 2 for a request that came over HTTP/2
    uint8_t version_minor = 1;  // HTTP/1.<minor>: 0 or 1 (0 for HTTP/2)
    framing body = framing::none;
    uint64_t content_length = 0;  // for framing::length
    bool keep_alive = true;       // after this message (Connection and version)
    bool upgrade = false;         // Connection: upgrade with an Upgrade field

    /// The first field of that name (case-insensitive), or an empty view.
    std::string_view find(std::string_view name) const noexcept;
};

struct request_head : message_head {
    method verb = method::other;
    std::string_view method_name;
    std::string_view target;  // as sent (origin-form, absolute-form, authority-form or "*")
    /// The target's path, before '?': origin-form's and absolute-form's ("/" when the URI has
    /// none), the whole target for authority-form and "*".
    std::string_view path;
    std::string_view query;             // after the target's '?', or empty
    std::string_view target_authority;  // an absolute-form target's authority, or empty
    /// The absolute-form target's authority (the Host field is then ignored, RFC 9112 3.2.2),
    /// or the Host field's value.
    std::string_view host;
    bool expect_continue = false;
};

struct response_head : message_head {
    uint16_t status = 0;
    std::string_view reason;
};

/// Parses a request head at the start of buf. out.headers must point at room for
/// lim.max_headers fields. `scanned` (in/out, start at 0) remembers how far an incomplete buffer
/// was searched for the blank line, so that reading a head in many pieces costs linear time.
/// Errors (an invalid result with its status): 400 for a target that is not origin-form ("/p?q"),
/// absolute-form with an http or https URI, authority-form ("host:port", which CONNECT must use
/// and no other method may) or "*" (OPTIONS only), or that holds '#'; the statuses of
/// parse_result for the rest of what the comment at the top lists.
parse_result parse_request(std::string_view buf, request_head& out, const limits& lim,
                           size_t& scanned) noexcept;

/// Parses a response head; `request_verb` decides the framing (HEAD and CONNECT answers, and
/// 1xx/204/304, have no body). Statuses on invalid input are for the client's own error
/// reporting (502 is what a proxy would answer).
parse_result parse_response(std::string_view buf, response_head& out, const limits& lim,
                            size_t& scanned, method request_verb = method::get) noexcept;

/// Decodes a chunked body incrementally, without copying: each call consumes a prefix of the
/// input and may return a view of body bytes inside it.
class chunked_decoder {
public:
    struct step {
        size_t consumed = 0;    // input bytes used (including data's)
        std::string_view data;  // body bytes, a view into the input (may be empty)
        bool done = false;      // the last chunk and the trailer section were consumed
        bool error = false;     // invalid framing: the connection must be closed (400)
        const char* why = "";
    };
    /// max_line bounds a chunk-size line with its extensions and each trailer line.
    explicit chunked_decoder(size_t max_line = 4096, size_t max_trailer_bytes = 16 * 1024) noexcept
        : max_line_(max_line), max_trailer_(max_trailer_bytes) {}

    /// Consumes what it can of `in`. A step with consumed == 0 and no data needs more input.
    step next(std::string_view in) noexcept;
    bool done() const noexcept { return state_ == state::done; }
    /// Body bytes decoded so far.
    uint64_t total() const noexcept { return total_; }

private:
    enum class state : uint8_t { size, data, data_crlf, trailer, done, failed };
    state state_ = state::size;
    uint64_t remaining_ = 0;
    uint64_t total_ = 0;
    size_t max_line_;
    size_t max_trailer_;
    size_t trailer_bytes_ = 0;
};

/// ASCII case-insensitive equality.
bool iequals(std::string_view a, std::string_view b) noexcept;

/// The method's canonical name ("GET", ...); "" for method::other.
std::string_view method_name(method m) noexcept;
/// The method a name stands for (case-sensitive, as RFC 9110 says); method::other if unknown.
method method_from_name(std::string_view name) noexcept;

}  // namespace gluon::http
