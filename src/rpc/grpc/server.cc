#include <cstring>
#include <memory>
#include <exception>
#include <utility>
#include <vector>

#include "framing.h"
#include "gluon/common/ascii.h"
#include "gluon/common/log.h"
#include "gluon/rpc/grpc/server.h"
#include "gluon/runtime/waiter.h"

namespace gluon::rpc::grpc {

struct server_context::impl {
    http::request& req;
    http::response& res;
    const server_options& opts;
    std::string_view method;
    detail::message_reader in;
    bool in_done = false;
    bool head_sent = false;
    bool told_encodings = false;  // grpc-accept-encoding is in the head
    std::unique_ptr<char[]> out;  // a framed message (not zeroed: written before it is sent)
    size_t out_cap = 0, out_len = 0;
    // Trailing metadata added before the head: given to the response, which checks each field,
    // once it is known whether they go in the head (trailers-only) or in the trailers.
    std::vector<std::pair<std::string, std::string>> trailers;
    server_context ctx{*this};

    impl(http::request& rq, http::response& rs, const server_options& o)
        : req(rq), res(rs), opts(o), method(rq.path()), in(o.max_message_bytes) {}

    duration left() const noexcept { return time_left(ctx.deadline_); }
    void start_head();  // the response head, once, before the first message
    // gRPC's answer to compression this side does not offer goes with the encodings it takes.
    void tell_encodings() {
        if (!std::exchange(told_encodings, true)) ctx.add_metadata("grpc-accept-encoding", "identity");
    }
    void set_deadline(deadline_t d) noexcept { ctx.deadline_ = d; }
};

namespace {

int errno_of(const std::error_code& e) { return e.value(); }

constexpr const char* k_handler_threw = "Unexpected error in RPC handling";

void answer(server_context::impl& im, const status& s) {
    std::string code = std::to_string(static_cast<int>(s.code));
    std::string msg = detail::percent_encode(s.message);
    if (im.head_sent) {  // a stream already open: the status goes in the trailers
        im.res.trailer("grpc-status", code);
        if (!msg.empty()) im.res.trailer("grpc-message", msg);
        (void)im.res.finish();
        return;
    }
    // Trailers-only: the status in the only HEADERS frame.
    im.res.status(200);
    im.res.content_type("application/grpc");
    im.res.header("grpc-status", code);
    if (!msg.empty()) im.res.header("grpc-message", msg);
    for (const auto& [key, value] : im.trailers) im.res.header(key, value);
}

}  // namespace

std::string_view server_context::method() const noexcept { return im_.method; }

// A stream error as the call's: a reset is the client's cancel, and the interrupt that its
// deadline sent the handler (which may come before the read's own timeout) is the deadline's.
int server_context::call_error(int e) const noexcept {
    if (e == ECONNRESET) return ECANCELED;
    if (e == ECANCELED && deadline_passed()) return ETIMEDOUT;
    return e;
}

std::string_view server_context::metadata(std::string_view key) const noexcept { return im_.req.header(key); }

bool server_context::deadline_passed() const noexcept {
    return deadline_ != k_no_deadline && time_left(deadline_) == duration::zero();
}

bool server_context::cancelled() const noexcept { return deadline_passed() || im_.req.abandoned(); }

bool server_context::wait_cancelled(duration timeout) {
    if (cancelled()) return true;
    duration left = time_left(deadline_);
    bool deadline_first = left <= timeout;
    auto r = im_.req.wait_abandoned(deadline_first ? left : timeout);
    if (r) return true;
    if (r.error() == std::errc::timed_out) return deadline_first;
    // The call's interrupt (its cancel or deadline) is what this waited for; another is the
    // caller's to see.
    if (cancelled()) return true;
    if (r.error() == std::errc::operation_canceled) restore_interrupt();
    return false;
}

void server_context::add_metadata(std::string_view key, std::string_view value) {
    if (!im_.head_sent) im_.res.header(key, value);
}

void server_context::add_trailing_metadata(std::string_view key, std::string_view value) {
    if (im_.head_sent) {
        im_.res.trailer(key, value);
    } else {
        im_.trailers.emplace_back(key, value);
    }
}

result<bool> server_context::read(std::string_view& msg) {
    constexpr size_t k_chunk = 16 * 1024;
    for (;;) {
        switch (im_.in.next(msg)) {
            case detail::message_reader::step::message: return true;
            case detail::message_reader::step::more: break;
            case detail::message_reader::step::bad: return errno_error(EPROTO);
            case detail::message_reader::step::compressed:
                im_.tell_encodings();
                return errno_error(ENOTSUP);
            case detail::message_reader::step::too_large: return errno_error(EMSGSIZE);
        }
        if (im_.in_done) {
            if (im_.in.pending()) return errno_error(EPROTO);  // a message cut short
            return false;
        }
        if (deadline_ != k_no_deadline && time_left(deadline_) == duration::zero()) return errno_error(ETIMEDOUT);
        // Waits no longer than the deadline, and for ever without one (a call has no
        // body_timeout): a client that sent its head and then nothing ends with its deadline.
        auto n = im_.req.read_body(im_.in.space(k_chunk), k_chunk, time_left(deadline_));  // straight into the reader
        if (!n) return errno_error(call_error(errno_of(n.error())));
        if (*n == 0) im_.in_done = true;
        else im_.in.filled(*n);
    }
}

result<bool> server_context::read(std::string& msg) {
    std::string_view v;
    auto r = read(v);
    if (r && *r) msg.assign(v);
    return r;
}

void server_context::impl::start_head() {
    if (head_sent) return;
    res.status(200);
    res.content_type("application/grpc");
    head_sent = true;
    // Trailing metadata added before the head goes with the status.
    for (const auto& [key, value] : trailers) res.trailer(key, value);
}

char* server_context::begin_write(size_t n) {
    if (im_.out_cap < 5 + n) {
        im_.out.reset(new char[5 + n]);
        im_.out_cap = 5 + n;
    }
    im_.out_len = 5 + n;
    detail::put_prefix(im_.out.get(), n);
    return im_.out.get() + 5;
}

result<void> server_context::end_write() {
    im_.start_head();
    auto r = im_.res.write({im_.out.get(), im_.out_len});
    if (!r) return errno_error(call_error(errno_of(r.error())));
    return {};
}

result<void> server_context::write(std::string_view msg) {
    return write_with(msg.size(), [msg](char* p) {
        std::memcpy(p, msg.data(), msg.size());
        return true;
    });
}

http::handler server::as_handler() const {
    return [this](http::request& req, http::response& res) {
        if (req.version_major() != 2) {
            res.status(505);
            res.body("gRPC needs HTTP/2\n");
            return;
        }
        std::string_view ct = req.header("content-type");
        if (req.method() != http::method::post || ct.substr(0, 16) != "application/grpc") {
            res.status(415);
            res.body("not a gRPC request\n");
            return;
        }
        // A call's request is a stream of messages, each bounded by max_message_bytes (its own
        // RESOURCE_EXHAUSTED): the server's limit on a whole body cut streams of small messages
        // off with 413 (the client saw UNKNOWN). Flow control bounds what waits unread.
        req.max_body_bytes(UINT64_MAX);
        // A stream may rightly stay quiet for hours: only the call's deadline, if it has one,
        // bounds a wait for its next message (body_timeout's 408 ended it, seen as UNKNOWN).
        req.body_timeout(forever);
        server_context::impl im(req, res, opts_);
        bool bad_timeout = false;
        if (std::string_view t = req.header("grpc-timeout"); !t.empty()) {
            duration d;
            if (detail::parse_timeout(t, d)) im.set_deadline(deadline_after(d));
            else bad_timeout = true;
        }
        status s;
        auto it = methods_.find(req.path());
        std::string_view encoding = req.header("grpc-encoding");
        if (bad_timeout) {
            // The client meant a deadline that cannot be read: running without one could hold
            // the call for ever. grpc-go answers INTERNAL, and gRPC C++ fails the stream.
            s = {code::internal, "malformed grpc-timeout"};
        } else if (it == methods_.end()) {
            s = {code::unimplemented, "unknown method " + std::string(req.path())};
        } else if (!encoding.empty() && !ascii_iequals(encoding, "identity")) {
            // Its messages may be compressed with it: refused before the handler runs, as
            // grpc-go does, rather than when a compressed one comes.
            im.tell_encodings();
            s = {code::unimplemented, "grpc-encoding " + std::string(encoding) + " is not supported"};
        } else {
            // The handler's blocking calls end when nobody waits for its answer any more.
            (void)req.interrupt_when_abandoned(im.ctx.deadline());
            // An exception's text is the server's business (a query, a path, a key): it is
            // logged, and the client gets what gRPC C++ sends, UNKNOWN with a fixed message.
            try {
                s = it->second(im.ctx);
            } catch (const std::exception& e) {
                GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: grpc handler for {} threw: {}",
                                       req.path(), e.what());
                s = {code::unknown, k_handler_threw};
            } catch (...) {
                GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: grpc handler for {} threw",
                                       req.path());
                s = {code::unknown, k_handler_threw};
            }
        }
        if (s.ok() && im.ctx.deadline() != k_no_deadline && time_left(im.ctx.deadline()) == duration::zero())
            s = {code::deadline_exceeded, "deadline exceeded"};
        answer(im, s);
    };
}

}  // namespace gluon::rpc::grpc
