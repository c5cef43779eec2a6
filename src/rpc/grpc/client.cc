#include "gluon/rpc/grpc/client.h"

#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "../../http/h2/client_session.h"
#include "framing.h"
#include "gluon/common/spinlock.h"
#include "gluon/net/resolver.h"
#include "gluon/net/tls.h"
#include "gluon/sync/mutex.h"

namespace gluon::rpc::grpc {

using http::detail::h2_call;
using http::detail::h2_client_session;
using fields = std::vector<std::pair<std::string, std::string>>;

namespace {

std::string_view find(const fields& f, std::string_view key) noexcept {
    for (const auto& [k, v] : f)
        if (k == key) return v;
    return {};
}

/// The gRPC code for an HTTP status that came without grpc-status (gRPC's http-grpc mapping).
code from_http(int s) noexcept {
    switch (s) {
        case 400: return code::internal;
        case 401: return code::unauthenticated;
        case 403: return code::permission_denied;
        case 404: return code::unimplemented;
        case 429: case 502: case 503: case 504: return code::unavailable;
        default: return code::unknown;
    }
}

/// True for application/grpc and its variants (application/grpc+proto, ...; parameters after
/// ';' allowed).
bool is_grpc_type(std::string_view ct) noexcept {
    constexpr std::string_view base = "application/grpc";
    if (ct.size() < base.size()) return false;
    for (size_t i = 0; i < base.size(); ++i) {
        char c = ct[i] >= 'A' && ct[i] <= 'Z' ? static_cast<char>(ct[i] + 32) : ct[i];  // media types ignore case
        if (c != base[i]) return false;
    }
    return ct.size() == base.size() || ct[base.size()] == '+' || ct[base.size()] == ';';
}

}  // namespace

struct channel::impl {
    std::string host;
    uint16_t port;
    channel_options opts;
    std::string authority;
    spinlock lock;
    gluon::mutex connect_mu;  // held while a fiber connects
    std::map<std::thread::id, std::shared_ptr<h2_client_session>> sessions;  // one per vCPU

    /// This vCPU's connection, opened if there is none that takes new streams; every wait ends
    /// by the call's deadline `d` or connect_timeout, whichever comes first. Errors: those of
    /// connecting (ETIMEDOUT, ECONNREFUSED, ...), EPROTO (the TLS server did not choose h2),
    /// ETIMEDOUT (d passed while another fiber was connecting), ECANCELED (interrupted).
    result<std::shared_ptr<h2_client_session>> session(deadline_t d) {
        if (auto s = usable()) return s;
        // One fiber connects; the others wait for its connection rather than open their own, but
        // no longer than their deadline (its connect may take all of connect_timeout).
        GLUON_TRY(connect_mu.lock_until(d));
        std::unique_lock connecting(connect_mu, std::adopt_lock);
        if (auto s = usable()) return s;
        // connect_timeout bounds the connection and its TLS handshake together, as does d.
        const deadline_t until = std::min(d, deadline_after(opts.connect_timeout));
        auto sock = GLUON_TRY(net::connect(host, port, time_left(until)));
        (void)sock.set_nodelay(true);
        std::unique_ptr<net::byte_stream> s;
        if (opts.tls) {
            std::string_view name = opts.authority.empty() ? std::string_view(host) : std::string_view(opts.authority);
            if (auto colon = name.rfind(':'); colon != std::string_view::npos && name.find(']') == std::string_view::npos &&
                                              name.find(':') == colon)
                name = name.substr(0, colon);  // "host:port" given as authority
            auto tls = GLUON_TRY(net::tls::stream::connect(std::move(sock), *opts.tls, name, time_left(until)));
            if (tls.alpn_selected() != "h2") return errno_error(EPROTO);
            s = std::make_unique<net::tls::stream>(std::move(tls));
        } else {
            s = std::make_unique<net::stream>(std::move(sock));
        }
        auto sess = GLUON_TRY(h2_client_session::start(std::move(s), opts.connect_timeout));
        std::lock_guard g(lock);
        sessions[std::this_thread::get_id()] = sess;
        return sess;
    }

    /// This vCPU's connection if it takes new streams. One that does not is dropped, not
    /// closed: after a GOAWAY the server still answers the streams it announced (RFC 9113 6.8),
    /// whose calls hold the connection until they end; it then ends by itself.
    std::shared_ptr<h2_client_session> usable() {
        std::lock_guard g(lock);
        auto it = sessions.find(std::this_thread::get_id());
        if (it == sessions.end()) return nullptr;
        if (it->second->usable()) return it->second;
        sessions.erase(it);
        return nullptr;
    }
};

struct client_call::state {
    std::unique_ptr<h2_call> call;
    deadline_t deadline = k_no_deadline;
    detail::message_reader in;
    std::optional<status> end;  // the local reason the call ended, once known
    bool half_closed = false, head = false, eof = false, finished = false;
    status final;
    char buf[16 * 1024];

    explicit state(size_t max) : in(max) {}

    /// Ends the call for a local reason (the first one counts), resetting the stream.
    void fail(status s) {
        if (!end) end = std::move(s);
        if (call) call->cancel();
    }
    /// The status for a transport error of the stream.
    void fail_with(const std::error_code& e) {
        int v = e.value();
        if (v == ETIMEDOUT && deadline != k_no_deadline && time_left(deadline) == duration::zero())
            fail({code::deadline_exceeded, "deadline exceeded"});
        else if (v == ECONNRESET)
            fail(call->reset_code() == NGHTTP2_CANCEL ? status{code::cancelled, "the server cancelled the stream"}
                 : call->reset_code() == NGHTTP2_REFUSED_STREAM ? status{code::unavailable, "the server refused the stream"}
                                                                  : status{code::internal, "the server reset the stream"});
        else if (v == ECANCELED)
            fail({code::cancelled, "cancelled"});
        else
            fail({code::unavailable, "connection: " + e.message()});
    }
    duration left() const noexcept { return time_left(deadline); }

    /// Waits for the response head and checks it is gRPC's. A head that carries grpc-status
    /// (a trailers-only answer) ends the responses: finish() takes the status from it, whatever
    /// the HTTP status. Otherwise an HTTP status other than 200 ends the call with its mapped
    /// code, and a 200 whose content-type is not gRPC's with UNKNOWN: the body of such an answer
    /// (an error page from a proxy, ...) is not made of gRPC messages, so reading it as such
    /// would turn an "unavailable" into INTERNAL.
    bool wait_head() {
        if (head) return true;
        if (auto r = call->wait_head(left()); !r) {
            fail_with(r.error());
            return false;
        }
        head = true;
        const fields& h = call->headers();
        if (!find(h, "grpc-status").empty()) {
            eof = call->status() != 200;  // no messages follow a status; skip an error page's body
            return true;
        }
        if (int st = call->status(); st != 200) {
            fail({from_http(st), "HTTP status " + std::to_string(st)});
            return false;
        }
        if (std::string_view ct = find(h, "content-type"); !is_grpc_type(ct)) {
            fail({code::unknown, "content-type \"" + std::string(ct) + "\" is not gRPC's"});
            return false;
        }
        return true;
    }
};

client_call::client_call(std::unique_ptr<state> s) noexcept : st_(std::move(s)) {}
client_call::client_call(client_call&&) noexcept = default;
client_call& client_call::operator=(client_call&&) noexcept = default;
client_call::~client_call() {
    if (st_ && !st_->finished) cancel();
}

bool client_call::write(std::string_view msg) {
    state& s = *st_;
    if (s.end || s.half_closed) return false;
    if (msg.size() > k_max_message) {  // its 32-bit prefix would hold the size modulo 2^32
        s.fail({code::resource_exhausted, "a request message over 2 GiB"});
        return false;
    }
    std::string framed;
    framed.reserve(msg.size() + 5);
    detail::append_message(framed, msg);
    if (auto r = s.call->write(framed, stall_timeout{forever, s.deadline}); !r) {
        // A stream the server closed already has its status waiting: finish() reads it.
        if (r.error().value() != ECONNRESET) s.fail_with(r.error());
        return false;
    }
    return true;
}

bool client_call::writes_done() {
    state& s = *st_;
    if (s.end) return false;
    if (s.half_closed) return true;
    s.half_closed = true;
    if (auto r = s.call->finish(); !r) {
        if (r.error().value() != ECONNRESET) s.fail_with(r.error());
        return false;
    }
    return true;
}

bool client_call::read(std::string& msg) {
    state& s = *st_;
    for (;;) {
        if (s.end) return false;
        switch (s.in.next(msg)) {
            case detail::message_reader::step::message: return true;
            case detail::message_reader::step::more: break;
            case detail::message_reader::step::bad: s.fail({code::internal, "malformed response message"}); return false;
            case detail::message_reader::step::compressed:
                s.fail({code::internal, "compressed response message (none was offered)"});
                return false;
            case detail::message_reader::step::too_large:
                s.fail({code::resource_exhausted, "response message over max_message_bytes"});
                return false;
        }
        if (s.eof) {
            if (s.in.pending()) s.fail({code::internal, "response message cut short"});
            return false;
        }
        if (!s.wait_head()) return false;
        if (s.eof) continue;  // a status in the head: no messages follow (an error page's body)
        auto n = s.call->read(s.buf, sizeof s.buf, s.left());
        if (!n) {
            s.fail_with(n.error());
            return false;
        }
        if (*n == 0) s.eof = true;
        else s.in.feed({s.buf, *n});
    }
}

status client_call::finish() {
    state& s = *st_;
    if (s.finished) return s.final;
    s.finished = true;
    if (!s.end && !s.half_closed) (void)writes_done();
    std::string drop;
    while (read(drop)) {
    }
    if (s.end) {
        s.final = *s.end;
    } else {
        const fields& h = s.call->headers();
        const fields& t = s.call->trailers();
        // Trailers-only answers carry the status in the head.
        std::string_view code_text = find(t, "grpc-status");
        std::string_view msg = find(t, "grpc-message");
        if (code_text.empty()) {
            code_text = find(h, "grpc-status");
            msg = find(h, "grpc-message");
        }
        int c = 0;
        bool valid = !code_text.empty() && code_text.size() <= 2;
        for (char ch : code_text) valid = valid && ch >= '0' && ch <= '9', c = c * 10 + (ch - '0');
        // A grpc-status wins over the HTTP status (a trailers-only error may come with any).
        if (valid && c <= 16)
            s.final = {static_cast<code>(c), detail::percent_decode(msg)};
        else if (s.call->status() != 200)
            s.final = {from_http(s.call->status()), "HTTP status " + std::to_string(s.call->status())};
        else
            s.final = {code::internal, code_text.empty() ? "no grpc-status in the answer" : "malformed grpc-status"};
    }
    if (s.call) s.call->cancel();  // gives the stream back (a no-op once it closed)
    return s.final;
}

void client_call::cancel() noexcept { abort({code::cancelled, "cancelled"}); }

void client_call::abort(status why) noexcept {
    if (st_ && !st_->finished) st_->fail(std::move(why));
}

std::string_view client_call::metadata(std::string_view key) const noexcept {
    return st_->head ? find(st_->call->headers(), key) : std::string_view{};
}

std::string_view client_call::trailing_metadata(std::string_view key) const noexcept {
    if (!st_->finished || !st_->call) return {};
    std::string_view v = find(st_->call->trailers(), key);
    if (v.empty() && st_->call->trailers().empty()) v = find(st_->call->headers(), key);  // trailers-only
    return v;
}

channel::channel(std::string host, uint16_t port, channel_options o) : im_(std::make_unique<impl>()) {
    im_->host = std::move(host);
    im_->port = port;
    im_->opts = std::move(o);
    if (!im_->opts.authority.empty()) {
        im_->authority = im_->opts.authority;
    } else {
        bool v6 = im_->host.find(':') != std::string::npos;
        im_->authority = (v6 ? "[" + im_->host + "]" : im_->host) + ":" + std::to_string(port);
    }
}

channel::~channel() { close(); }

void channel::close() noexcept {
    // Every vCPU's connection, each closed on its own vCPU (h2_client_session::close asks the
    // writer of a session of another one): closing only the caller's left the others open,
    // with their fibers and buffers, until their server closed them.
    std::map<std::thread::id, std::shared_ptr<h2_client_session>> all;
    {
        std::lock_guard g(im_->lock);
        all.swap(im_->sessions);
    }
    for (auto& [vcpu, s] : all) s->close();
}

client_call channel::call(std::string_view method, const call_options& o) {
    auto st = std::make_unique<client_call::state>(im_->opts.max_message_bytes);
    st->deadline = o.deadline;
    if (o.deadline != k_no_deadline && time_left(o.deadline) == duration::zero()) {
        st->end = status{code::deadline_exceeded, "deadline exceeded before the call started"};
        return client_call(std::move(st));
    }
    auto sess = im_->session(o.deadline);
    if (!sess) {
        // An interrupt (of the wait for another fiber's connect, or of this one's) is the
        // caller's doing, not the server's: CANCELLED, as it is once the call has a stream.
        const int e = sess.error().value();
        st->end = e == ETIMEDOUT && time_left(o.deadline) == duration::zero()
                      ? status{code::deadline_exceeded, "deadline exceeded while connecting"}
                  : e == ECANCELED ? status{code::cancelled, "cancelled while connecting"}
                                   : status{code::unavailable, "connect: " + sess.error().message()};
        return client_call(std::move(st));
    }
    st->call = std::make_unique<h2_call>(std::move(*sess));
    fields f;
    f.reserve(4 + o.metadata.size());
    f.emplace_back("content-type", "application/grpc");
    f.emplace_back("te", "trailers");
    if (o.deadline != k_no_deadline) f.emplace_back("grpc-timeout", detail::format_timeout(time_left(o.deadline)));
    f.emplace_back("user-agent", "grpc-gluon");
    for (const auto& m : o.metadata) f.push_back(m);
    if (auto r = st->call->start("POST", im_->opts.tls ? "https" : "http", im_->authority, method, f, true); !r)
        st->end = status{code::unavailable, "stream: " + r.error().message()};
    return client_call(std::move(st));
}

status channel::unary(std::string_view method, std::string_view request, std::string& response, const call_options& o) {
    client_call c = call(method, o);
    bool got = false;
    if (c.write(request) && c.writes_done() && (got = c.read(response))) {
        std::string extra;
        if (c.read(extra)) c.abort({code::internal, "more than one response to a unary call"});
    }
    status s = c.finish();
    if (s.ok() && !got) return {code::unimplemented, "no response message to a unary call"};
    return s;
}

}  // namespace gluon::rpc::grpc
