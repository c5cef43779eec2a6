// The WebSocket opening handshakes (RFC 6455 4): websocket::accept on a server's route,
// websocket::connect for a client, and websocket::over for a handshake made elsewhere.
#include <mutex>

#include "gluon/http/client.h"
#include "gluon/http/message.h"
#include "gluon/net/resolver.h"
#include "gluon/net/socket.h"
#include "gluon/net/tls.h"
#include "websocket_handshake.h"
#include "websocket_state.h"

namespace gluon::http {

using namespace ws;

namespace {

unexpected refuse(response& res, int status, std::string_view why) {
    res.status(status);
    if (status == 426) res.header("Sec-WebSocket-Version", "13");
    res.content_type("text/plain");
    res.body(std::string(why) + "\n");
    return errno_error(EPROTO);
}

// The first subprotocol of ours (in our order) that the client offered, matched exactly: a
// client that offered "Chat" and got "chat" fails the handshake (the client here compares
// exactly too).
std::string choose_subprotocol(const request& req, const std::vector<std::string>& ours) {
    // Over every Sec-WebSocket-Protocol line: a request may split the list (RFC 6455 11.3.4).
    for (const auto& p : ours)
        if (fields_have_token(req.headers(), "Sec-WebSocket-Protocol", p, /*exact=*/true)) return p;
    return {};
}

result<const net::tls::context*> default_tls() {
    static std::mutex mu;
    static net::tls::context* ctx = nullptr;  // made once, kept for the process
    std::lock_guard g(mu);
    if (!ctx) {
        auto c = net::tls::context::make_client({});
        if (!c) return unexpected(c.error());
        ctx = new net::tls::context(std::move(*c));
    }
    return ctx;
}

}  // namespace

result<websocket> websocket::over(net::byte_stream& s, bool server_side, std::string_view buffered,
                                  const websocket_options& opts) {
    auto st = std::make_unique<state>(s, server_side, opts);
    st->preload(buffered);
    return websocket(std::move(st));
}

result<websocket> websocket::accept(request& req, response& res, const websocket_options& opts) {
    if (req.method() != method::get || req.version_minor() < 1) return refuse(res, 400, "WebSocket upgrade needs GET over HTTP/1.1");
    // Every line of each field counts: header() sees the first, and a client may send
    // "Connection: keep-alive" and "Connection: Upgrade" apart (RFC 9110 5.3).
    if (!fields_have_token(req.headers(), "Upgrade", "websocket")) return refuse(res, 400, "no Upgrade: websocket");
    if (!fields_have_token(req.headers(), "Connection", "upgrade")) return refuse(res, 400, "no Connection: upgrade");
    if (req.has_body()) return refuse(res, 400, "an upgrade request has no body");
    if (req.header("Sec-WebSocket-Version") != "13") return refuse(res, 426, "WebSocket version 13 only");
    std::string_view key = req.header("Sec-WebSocket-Key");
    if (base64_decoded_length(key) != 16) return refuse(res, 400, "invalid Sec-WebSocket-Key");

    auto st = std::make_unique<state>(req.stream(), true, opts);
    st->subprotocol = choose_subprotocol(req, opts.subprotocols);
    std::string head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: ";
    head += accept_value(key);
    head += "\r\n";
    if (!st->subprotocol.empty()) head += "Sec-WebSocket-Protocol: " + st->subprotocol + "\r\n";
    head += "\r\n";
    std::string_view unread = GLUON_TRY(res.upgrade(head));
    st->preload(unread);
    return websocket(std::move(st));
}

namespace {

// Fields a response may hold once (RFC 6455 11.3.3, 11.3.4): find() sees only the first, and a
// second that says otherwise must fail the handshake rather than go unread.
bool at_most_once(const response_head& h, std::string_view name) noexcept {
    size_t n = 0;
    for (size_t i = 0; i < h.header_count; ++i) n += iequals(h.headers[i].name, name);
    return n <= 1;
}

// Whether the answer agrees on an extension: we offer none, so that fails the handshake (RFC
// 6455 4.1). Every field line counts: find() sees the first, and an empty one let a second
// that names an extension through.
bool names_extensions(const response_head& h) noexcept {
    for (size_t i = 0; i < h.header_count; ++i)
        if (iequals(h.headers[i].name, "Sec-WebSocket-Extensions") && !h.headers[i].value.empty()) return true;
    return false;
}

// Writes the upgrade request and reads the answer's head; what follows it stays buffered.
result<void> client_handshake(websocket::state& st, const url& u, deadline_t d) {
    const std::string key = new_key();
    std::string req = "GET " + u.target + " HTTP/1.1\r\nHost: " + u.authority() +
                      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " + key +
                      "\r\nSec-WebSocket-Version: 13\r\n";
    if (!st.opts.subprotocols.empty()) {
        req += "Sec-WebSocket-Protocol: ";
        for (size_t i = 0; i < st.opts.subprotocols.size(); ++i) req += (i ? ", " : "") + st.opts.subprotocols[i];
        req += "\r\n";
    }
    for (const auto& [k, v] : st.opts.headers) {
        if (k.find_first_of("\r\n:") != std::string::npos || v.find_first_of("\r\n") != std::string::npos)
            return errno_error(EINVAL);
        req += k + ": " + v + "\r\n";
    }
    req += "\r\n";
    GLUON_TRY(st.s->write_all(req.data(), req.size(), time_left(d)));

    limits lim;
    std::unique_ptr<header[]> fields(new header[lim.max_headers]);
    response_head h;
    h.headers = fields.get();
    size_t scanned = 0;
    for (;;) {
        auto* p = reinterpret_cast<const char*>(st.rbuf.get());
        auto r = parse_response({p, st.rend}, h, lim, scanned);
        if (r.state == parse_result::invalid) return errno_error(EPROTO);
        if (r.state == parse_result::complete) {
            st.rstart = r.consumed;
            break;
        }
        if (st.rend == st.rcap) return errno_error(EPROTO);  // a head over 8 KiB
        auto n = st.s->read_some(st.rbuf.get() + st.rend, st.rcap - st.rend, time_left(d));
        if (!n) return unexpected(n.error());
        if (*n == 0) return errno_error(ENODATA);
        st.rend += *n;
    }
    // Upgrade and Connection are lists that may span several field lines (RFC 9110 5.3);
    // find() sees only the first.
    const std::span<const header> lines(h.headers, h.header_count);
    if (h.status != 101 || !fields_have_token(lines, "Upgrade", "websocket") ||
        !fields_have_token(lines, "Connection", "upgrade") ||
        h.find("Sec-WebSocket-Accept") != accept_value(key) || names_extensions(h) ||
        !at_most_once(h, "Sec-WebSocket-Accept") || !at_most_once(h, "Sec-WebSocket-Protocol"))
        return errno_error(EPROTO);
    std::string_view proto = h.find("Sec-WebSocket-Protocol");
    if (!proto.empty()) {
        bool offered = false;
        for (const auto& p : st.opts.subprotocols) offered |= p == proto;
        if (!offered) return errno_error(EPROTO);
        st.subprotocol = proto;
    }
    return {};
}

}  // namespace

result<websocket> websocket::connect(std::string_view address, const websocket_options& opts) {
    std::string s(address);
    bool secure;
    if (s.rfind("ws://", 0) == 0) secure = false, s.replace(0, 2, "http");
    else if (s.rfind("wss://", 0) == 0) secure = true, s.replace(0, 3, "https");
    else return errno_error(EINVAL);
    url u = GLUON_TRY(url::parse(s));
    const deadline_t d = deadline_after(opts.connect_timeout);
    net::stream sock = GLUON_TRY(net::connect(u.host, u.port, time_left(d)));
    (void)sock.set_nodelay(true);
    std::unique_ptr<net::byte_stream> transport;
    if (secure) {
        const net::tls::context* ctx = opts.tls;
        if (!ctx) ctx = GLUON_TRY(default_tls());
        auto t = GLUON_TRY(net::tls::stream::connect(std::move(sock), *ctx, u.host, time_left(d)));
        transport = std::make_unique<net::tls::stream>(std::move(t));
    } else {
        transport = std::make_unique<net::stream>(std::move(sock));
    }
    auto st = std::make_unique<state>(*transport, false, opts);
    st->owned = std::move(transport);
    GLUON_TRY(client_handshake(*st, u, d));
    return websocket(std::move(st));
}

}  // namespace gluon::http
