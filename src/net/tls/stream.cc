// tls::stream: drives SSL_* calls over the non-blocking buffer BIO (bio.cc) and moves ciphertext
// between those buffers and the socket with gluon::fd calls, which park only the fiber.
#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "gluon/runtime/fd.h"
#include "internal.h"

namespace gluon::net::tls {
namespace {

using detail::drain_errors;

constexpr size_t k_max_send = size_t{64} * 1024;
// What reads may leave queued for a peer that does not read it before the connection is given
// up: the answers to its requests (a warning alert refusing each renegotiation request; about
// 500 of them). A read queues them and cannot wait for a writer parked on that peer, so a peer
// that kept asking would grow io.out without end.
constexpr size_t k_max_read_replies = size_t{16} * 1024;

enum class phase { handshake, read, write, shutdown };

unexpected stream_fail(stream::impl& s, std::error_code e, std::string msg) {
    s.last_error = msg;
    return detail::fail(e, std::move(msg));
}

unexpected already_failed(stream::impl& s, const char* op) {
    return stream_fail(s, errc::broken,
                       std::string(op) + ": the connection failed earlier (" + s.last_error + ")");
}

std::string name_text(X509_NAME* n) {
    if (!n) return {};
    BIO* b = BIO_new(BIO_s_mem());
    if (!b) return {};
    X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253);
    char* data = nullptr;
    long len = BIO_get_mem_data(b, &data);
    std::string out(data, len > 0 ? static_cast<size_t>(len) : 0);
    BIO_free(b);
    return out;
}

std::string what(const stream::impl& s, phase ph) {
    switch (ph) {
    case phase::handshake:
        if (s.client) return "TLS handshake with " + (s.name.empty() ? s.peer : s.name);
        return "TLS handshake from " + s.peer;
    case phase::read:
        return "TLS recv";
    case phase::write:
        return "TLS send";
    case phase::shutdown:
        return "TLS shutdown";
    }
    return "TLS";
}

// Keeps the first failure of chain verification with the certificate it concerns: the verify
// result alone does not say which certificate was bad. Per SSL_CTX, not a global callback.
int on_verify(int ok, X509_STORE_CTX* xs) {
    if (ok) return ok;
    auto* ssl =
        static_cast<SSL*>(X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx()));
    auto* s = ssl ? static_cast<stream::impl*>(SSL_get_app_data(ssl)) : nullptr;
    if (s && s->verify_detail.empty()) {
        s->verify_detail = X509_verify_cert_error_string(X509_STORE_CTX_get_error(xs));
        s->verify_detail += " (depth " + std::to_string(X509_STORE_CTX_get_error_depth(xs));
        if (X509* cert = X509_STORE_CTX_get_current_cert(xs))
            s->verify_detail += ", subject " + name_text(X509_get_subject_name(cert));
        s->verify_detail += ")";
    }
    return ok;
}

// Sends everything in io.out, in order. OpenSSL may append to io.out while we are parked in
// send (another fiber's SSL_write), so the holder of send_mu loops until io.out is empty.
// The read path must not wait behind a parked writer (that could deadlock two peers that both
// write before reading), so it only try-locks: the holder sends its bytes before unlocking.
// A reader sends under its own deadline what OpenSSL queued (its replies, a writer's records):
// when that runs out, or the reader is interrupted, the bytes not sent go back to the front of
// io.out for the next flush, so the read loses nothing and the stream stays usable. A writer's
// failure leaves the stream broken: its caller cannot tell what went out.
result<void> flush(stream::impl& s, deadline_t d, bool reader) {
    if (s.io.out.empty()) return {};
    if (reader) {
        if (!s.send_mu.try_lock()) return {};
    } else if (auto r = s.send_mu.lock_until(d); !r) {
        s.broken = r.error();  // our records are queued behind someone else's: no way back
        return r;
    }
    result<void> out;
    while (!s.broken && !s.io.out.empty() && out) {
        s.sending.swap(s.io.out);
        size_t sent = 0;
        while (sent < s.sending.size()) {
            auto n = fd::send_some(s.sock.get(), s.sending.data() + sent, s.sending.size() - sent,
                                   0, time_left(d));
            if (!n || *n == 0) {
                out = unexpected(n ? errno_code(EPIPE) : n.error());
                break;
            }
            sent += *n;
        }
        if (!out) {
            const auto e = out.error();
            if (reader && (e == std::errc::timed_out || e == std::errc::operation_canceled))
                s.io.out.insert(0, s.sending, sent);  // ahead of what was queued meanwhile
            else
                s.broken = e;
        }
        s.sending.clear();
    }
    s.send_mu.unlock();
    if (s.broken) {
        s.failed = true;
        return unexpected(s.broken);
    }
    if (out) s.replies = 0;  // io.out is empty: every answer has gone out
    return out;
}

// Receives ciphertext into the (then empty) io.in: OpenSSL asks for more only once it has
// consumed all of it. A timeout or interrupt here loses nothing.
result<void> fill(stream::impl& s, deadline_t d) {
    if (auto r = s.recv_mu.lock_until(d); !r) return r;
    result<void> out;
    auto& io = s.io;
    if (io.in_available() == 0 && !io.in_eof) {  // else another reader filled it meanwhile
        io.in_begin = io.in_end = 0;
        auto n = s.sock.read_some(io.in.get(), io.in_capacity, time_left(d));
        if (!n)
            out = unexpected(n.error());
        else if (*n == 0)
            io.in_eof = true;
        else
            io.in_end = *n;
    }
    s.recv_mu.unlock();
    return out;
}

unexpected tls_failure(stream::impl& s, phase ph, int ssl_err, unsigned long first,
                       const std::string& detail) {
    s.failed = true;
    std::string msg = what(s, ph) + ": ";
    if (first == 0) {
        // No queued error: with our BIO that is the peer closing in mid-record or mid-handshake.
        if (ssl_err == SSL_ERROR_SYSCALL && s.io.in_eof)
            return stream_fail(s, errc::unexpected_eof,
                               msg + "connection closed by the peer without close_notify");
        return stream_fail(s, errc::protocol_error, msg + "SSL error " + std::to_string(ssl_err));
    }
    errc code = detail::classify(first, ph == phase::handshake);
    long v = SSL_get_verify_result(s.ssl);
    if (code == errc::verify_failed && v != X509_V_OK)
        msg += "certificate verify failed: " + (s.verify_detail.empty()
                                                    ? std::string(X509_verify_cert_error_string(v))
                                                    : s.verify_detail);
    else
        msg += detail;
    return stream_fail(s, code, std::move(msg));
}

// Calls op (an SSL_* call, > 0 on success) until it succeeds, moving ciphertext as OpenSSL
// asks. Returns op's result, 0 for close_notify, or the error.
template <typename Op> result<int> drive(stream::impl& s, deadline_t d, phase ph, Op&& op) {
    for (;;) {
        ERR_clear_error();
        const size_t queued = s.io.out.size();
        int r = op();
        if (ph == phase::read) s.replies += s.io.out.size() - queued;  // op() cannot park
        int err = r > 0 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, r);
        unsigned long first = 0;
        std::string detail = drain_errors(&first);  // before anything below can park
        // Handshake messages, records and alerts go out before we wait for the peer.
        auto sent = flush(s, d, ph == phase::read);
        if (err == SSL_ERROR_SSL || err == SSL_ERROR_SYSCALL)
            return tls_failure(s, ph, err, first, detail);
        // Checked whether or not this flush went out: a read whose flush times out keeps its
        // answers queued, and the records it took from the input buffer may have added many.
        if (s.replies > k_max_read_replies) {
            s.failed = true;
            return stream_fail(s, errc::protocol_error,
                               what(s, ph) + ": the peer keeps sending requests that need an "
                                             "answer (renegotiation) and does not read the answers");
        }
        if (!sent) {
            if (ph == phase::read && !s.failed) {
                // The read's timeout or interrupt while sending: the records stay queued, and
                // what SSL_read returned is the caller's (OpenSSL has let go of it). The
                // interrupt the send consumed is put back for the fiber's next wait.
                if (err == SSL_ERROR_NONE || err == SSL_ERROR_ZERO_RETURN) {
                    if (sent.error() == std::errc::operation_canceled) restore_interrupt();
                    return err == SSL_ERROR_NONE ? r : 0;
                }
            } else {
                s.failed = true;
            }
            return stream_fail(s, sent.error(), what(s, ph) + ": send: " + sent.error().message());
        }
        switch (err) {
        case SSL_ERROR_NONE:
            return r;
        case SSL_ERROR_ZERO_RETURN:
            return 0;
        case SSL_ERROR_WANT_READ:
            if (auto f = fill(s, d); !f) {
                // A timeout or an interrupt loses nothing; anything else ends the connection.
                const auto e = f.error();
                if (e != std::errc::timed_out && e != std::errc::operation_canceled)
                    s.failed = true;
                return stream_fail(s, e, what(s, ph) + ": recv: " + e.message());
            }
            continue;
        default:
            return tls_failure(s, ph, err, first, detail);  // WANT_WRITE etc.: not with our BIO
        }
    }
}

// Counts a call in progress on the stream. close() closes the socket, which fails what such a
// call waits for with EBADF, and frees the state only once the last call has left it.
class in_call {
public:
    explicit in_call(stream::impl& s) noexcept : s_(s) { ++s_.calls; }
    ~in_call() {
        if (--s_.calls == 0 && s_.closing) s_.idle.set();  // only a waiting close() needs the event
    }
    in_call(const in_call&) = delete;
    in_call& operator=(const in_call&) = delete;

private:
    stream::impl& s_;
};

// A send of len bytes of plaintext, which `write(s)` makes with one SSL_write (called again
// after a wait), after the checks every send makes. Returns the bytes taken.
template <typename Write>
result<size_t> send_plaintext(stream::impl* p, duration timeout, int len, Write&& write) {
    if (!p) return detail::fail(errno_code(EBADF), "TLS send on an empty stream");
    stream::impl& s = *p;
    if (s.failed) return already_failed(s, "TLS send");
    if (s.shut) return stream_fail(s, errno_code(EPIPE), "TLS send after shutdown");
    if (len == 0) return size_t{0};
    in_call busy(s);
    auto sent = GLUON_TRY(drive(s, deadline_after(timeout), phase::write, [&] { return write(s); }));
    if (sent == 0) return stream_fail(s, errno_code(EPIPE), "TLS send: the connection is closed");
    return static_cast<size_t>(sent);
}

bool is_ip_literal(const std::string& name) {
    unsigned char buf[16];
    return inet_pton(AF_INET, name.c_str(), buf) == 1 ||
           inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

result<std::unique_ptr<stream::impl>> make_impl(net::stream sock,
                                                std::shared_ptr<context::impl> ctx, bool client) {
    detail::ensure_openssl_init();
    auto s = std::make_unique<stream::impl>();
    s->client = client;
    s->sock = std::move(sock);
    // Kept for error messages: after a reset the socket no longer knows its peer.
    auto peer = s->sock.peer_address();
    s->peer = peer ? peer->to_string() : "an unknown peer";
    s->io.in.reset(new char[detail::io_buffers::in_capacity]);
    s->ssl = SSL_new(ctx->ctx);
    BIO* b = s->ssl ? detail::new_buffer_bio(&s->io) : nullptr;
    if (!b)
        return stream_fail(*s, errno_code(ENOMEM),
                           "TLS: cannot create the connection: " + drain_errors());
    SSL_set_bio(s->ssl, b, b);  // one BIO for both directions: the SSL takes our one reference
    SSL_set_app_data(s->ssl, s.get());
    SSL_set_verify(s->ssl, ctx->verify_mode, on_verify);
    s->ctx = std::move(ctx);
    return s;
}

// Why host (without its trailing dot) cannot be a host name, or nullptr. OpenSSL takes the
// name as a C string: one holding a NUL was sent and verified cut at it ("good.example\0evil"
// checked as good.example). Names are at most 253 bytes and labels 63 (RFC 1035 2.3.4).
const char* host_name_problem(std::string_view host) {
    if (host.size() > 253) return "longer than 253 bytes";
    size_t label = 0;
    for (unsigned char c : host) {
        if (c < 0x20 || c == 0x7f) return "it holds a control byte";
        label = c == '.' ? 0 : label + 1;
        if (label > 63) return "a label is longer than 63 bytes";
    }
    return nullptr;
}

result<void> set_peer_name(stream::impl& s) {
    // A fully qualified name ("example.com.") is the same host, but SNI carries no trailing
    // dot (RFC 6066 3) and certificates name hosts without one: sent as given, it reached the
    // server as another name and never matched the certificate.
    std::string host = s.name;
    if (host.size() > 1 && host.back() == '.') host.pop_back();
    if (const char* why = host_name_problem(host))
        return stream_fail(s, errno_code(EINVAL), std::string("TLS: invalid server name: ") + why);
    // Checked without the dot: "127.0.0.1." went out as SNI "127.0.0.1" (and OpenSSL then
    // verified it as an address anyway).
    if (is_ip_literal(host)) {
        // No SNI for addresses (RFC 6066 3); the certificate must list the IP instead.
        if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s.ssl), host.c_str()) == 1) return {};
    } else if (SSL_set_tlsext_host_name(s.ssl, host.c_str()) == 1 &&
               SSL_set1_host(s.ssl, host.c_str()) == 1) {
        // Only the certificate's DNS names count, and a wildcard only as a whole left-most
        // label (RFC 9525 6.3): OpenSSL by default also matched the subject's CN when the
        // certificate lists no DNS name, and "f*.example.com" against "foo.example.com".
        SSL_set_hostflags(s.ssl,
                          X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        return {};
    }
    return stream_fail(s, errno_code(EINVAL),
                       "TLS: invalid server name '" + s.name + "': " + drain_errors());
}

}  // namespace

stream::impl::~impl() {
    // OpenSSL makes the session of a connection freed without close_notify non-resumable (a
    // TLS 1.0 rule; TLS 1.1 and later drop it). Keep that only for connections that failed.
    if (ssl && !failed && SSL_is_init_finished(ssl))
        SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
    SSL_free(ssl);
}

stream::stream() noexcept = default;
stream::stream(std::unique_ptr<impl> i) noexcept : impl_(std::move(i)) {}
stream::stream(stream&&) noexcept = default;
stream& stream::operator=(stream&&) noexcept = default;
stream::~stream() = default;

result<stream> stream::connect(net::stream sock, const context& ctx, std::string_view server_name,
                               duration timeout) {
    const deadline_t d = deadline_after(timeout);
    if (!ctx.impl_ || ctx.impl_->server)
        return detail::fail(errno_code(EINVAL), "tls::stream::connect needs a client context");
    auto made = GLUON_TRY(make_impl(std::move(sock), ctx.impl_, true));
    impl& s = *made;
    s.name = server_name;
    SSL_set_connect_state(s.ssl);
    if (!s.name.empty())
        GLUON_TRY(set_peer_name(s));
    if (s.ctx->cache_max > 0) {
        s.cache_key = s.name + '@' + s.peer;
        if (SSL_SESSION* sess = s.ctx->take_session(s.cache_key)) {
            SSL_set_session(s.ssl, sess);
            SSL_SESSION_free(sess);
        }
    }
    if (GLUON_TRY(drive(s, d, phase::handshake, [&] { return SSL_do_handshake(s.ssl); })) == 0)
        return stream_fail(s, errc::handshake_failed, what(s, phase::handshake) + ": closed");
    return stream(std::move(made));
}

result<stream> stream::accept(net::stream sock, const context& ctx, duration timeout) {
    const deadline_t d = deadline_after(timeout);
    if (!ctx.impl_ || !ctx.impl_->server)
        return detail::fail(errno_code(EINVAL), "tls::stream::accept needs a server context");
    auto made = GLUON_TRY(make_impl(std::move(sock), ctx.impl_, false));
    impl& s = *made;
    SSL_set_accept_state(s.ssl);
    if (GLUON_TRY(drive(s, d, phase::handshake, [&] { return SSL_do_handshake(s.ssl); })) == 0)
        return stream_fail(s, errc::handshake_failed, what(s, phase::handshake) + ": closed");
    return stream(std::move(made));
}

result<size_t> stream::do_read_some(void* buf, size_t n, duration timeout) {
    if (!impl_) return detail::fail(errno_code(EBADF), "TLS recv on an empty stream");
    if (impl_->failed) return already_failed(*impl_, "TLS recv");
    if (n == 0) return size_t{0};
    int len = n > INT_MAX ? INT_MAX : static_cast<int>(n);
    impl& s = *impl_;  // not impl_ below: close() empties it while this call may be parked
    in_call busy(s);
    return static_cast<size_t>(GLUON_TRY(
        drive(s, deadline_after(timeout), phase::read, [&] { return SSL_read(s.ssl, buf, len); })));
}

result<size_t> stream::do_write_some(const void* buf, size_t n, duration timeout) {
    const int len = static_cast<int>(n < k_max_send ? n : k_max_send);
    return send_plaintext(impl_.get(), timeout, len, [&](impl& s) { return SSL_write(s.ssl, buf, len); });
}

// Several buffers (an HTTP response's head and body) go out as one record: an SSL_write each
// would make a record, and a send, per buffer. They are gathered into a per-thread buffer
// inside the SSL_write call (a retry after a wait gathers again, so no other fiber's writev
// can change them in between), up to k_max_send bytes.
result<size_t> stream::do_writev(const iovec* iov, int cnt, duration timeout) {
    if (cnt < 0 || cnt > IOV_MAX) return errno_error(EINVAL);
    const iovec* only = nullptr;
    size_t total = 0;
    int used = 0;
    for (int i = 0; i < cnt && total < k_max_send; ++i) {
        if (iov[i].iov_len == 0) continue;
        only = &iov[i];
        total += iov[i].iov_len;
        ++used;
    }
    if (used <= 1) return only ? do_write_some(only->iov_base, only->iov_len, timeout) : size_t{0};
    thread_local std::unique_ptr<char[]> gather(new char[k_max_send]);
    const size_t len = total < k_max_send ? total : k_max_send;
    return send_plaintext(impl_.get(), timeout, static_cast<int>(len), [&](impl& s) {
        size_t at = 0;
        for (int i = 0; i < cnt && at < len; ++i) {
            const size_t k = std::min(iov[i].iov_len, len - at);
            if (k == 0) continue;  // (an empty buffer's base may be null)
            std::memcpy(gather.get() + at, iov[i].iov_base, k);
            at += k;
        }
        return SSL_write(s.ssl, gather.get(), static_cast<int>(len));
    });
}

result<void> stream::do_shutdown(duration timeout) {
    if (!impl_) return detail::fail(errno_code(EBADF), "TLS shutdown on an empty stream");
    impl& s = *impl_;
    // failed first: a first shutdown that failed (its close_notify timed out) has set shut too,
    // and a second call must not tell its caller that close_notify went out.
    if (s.failed) return already_failed(s, "TLS shutdown");
    if (s.shut) return {};
    s.shut = true;
    in_call busy(s);
    // SSL_shutdown returns 0 once our close_notify is queued: we do not wait for the peer's.
    GLUON_TRY(drive(s, deadline_after(timeout), phase::shutdown, [&] {
        int x = SSL_shutdown(s.ssl);
        return x >= 0 ? 1 : x;
    }));
    return {};
}

// Another fiber of this vCPU may be parked in a read or a send (a reader while a writer gives
// up on the connection): closing the socket fails its wait with EBADF, and the state it is
// using is freed only after it has returned. Calls made meanwhile find the stream empty.
result<void> stream::do_close() noexcept {
    if (!impl_) return {};
    std::unique_ptr<impl> s = std::move(impl_);
    auto r = s->sock.close();
    bool interrupted = false;
    s->closing = true;
    while (s->calls > 0)
        if (!s->idle.wait()) interrupted = true;  // not given up: the calls are ending
    if (interrupted) restore_interrupt();
    return r;
}

std::string_view stream::alpn_selected() const noexcept {
    if (!impl_) return {};
    const unsigned char* p = nullptr;
    unsigned len = 0;
    SSL_get0_alpn_selected(impl_->ssl, &p, &len);
    return p ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
}

bool stream::session_reused() const noexcept {
    return impl_ && SSL_session_reused(impl_->ssl) == 1;
}

std::string_view stream::server_name() const noexcept {
    if (!impl_) return {};
    if (impl_->client) return impl_->name;
    const char* n = SSL_get_servername(impl_->ssl, TLSEXT_NAMETYPE_host_name);
    return n ? std::string_view(n) : std::string_view();
}

std::string_view stream::version() const noexcept {
    return impl_ ? SSL_get_version(impl_->ssl) : "";
}

std::string_view stream::cipher() const noexcept {
    const SSL_CIPHER* c = impl_ ? SSL_get_current_cipher(impl_->ssl) : nullptr;
    return c ? SSL_CIPHER_get_name(c) : "";
}

std::string stream::peer_certificate_subject() const {
    if (!impl_) return {};
    X509* cert = SSL_get0_peer_certificate(impl_->ssl);
    return cert ? name_text(X509_get_subject_name(cert)) : std::string();
}

namespace {
const std::string k_no_message;  // constant-initialised: no function-local static's lock
}  // namespace

const std::string& stream::last_error_message() const noexcept {
    return impl_ ? impl_->last_error : k_no_message;
}

net::stream* stream::socket() noexcept { return impl_ ? &impl_->sock : nullptr; }

stream_wrapper server_wrap(const context& ctx, duration handshake_timeout) {
    return [ctx, handshake_timeout](net::stream&& sock) -> result<std::unique_ptr<byte_stream>> {
        auto s = GLUON_TRY(stream::accept(std::move(sock), ctx, handshake_timeout));
        return std::unique_ptr<byte_stream>(new stream(std::move(s)));
    };
}

}  // namespace gluon::net::tls
