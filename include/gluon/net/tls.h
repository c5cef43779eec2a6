// TLS 1.2/1.3 over a net::stream (OpenSSL 3 underneath; no OpenSSL type appears here). A
// tls::context holds the configuration shared by many connections (certificates, trust anchors,
// ALPN, session cache); a tls::stream is one connection, a decorator that owns its net::stream.
//
// Blocking calls park only the calling fiber and take a timeout (ETIMEDOUT) for the whole call;
// an interrupted fiber gets ECANCELED. Socket errors come back as errno codes (ECONNRESET, ...);
// TLS failures as tls::errc codes (category "tls"). The detailed reason (OpenSSL's error
// strings, the certificate verification result) of the calling fiber's last failed TLS call is
// in tls::last_error_message().
//
// Certificate verification is on by default for clients: a client checks the server's chain
// against the configured trust anchors (the system's by default) and the name it connects to:
// a DNS name of the certificate's subjectAltName (never the subject's CN), with a wildcard only
// as a whole left-most label ("*.example.com"), or for an IP address, an IP subjectAltName.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/server.h"
#include "gluon/net/socket.h"

namespace gluon::net::tls {

enum class errc : int {
    handshake_failed = 1,    ///< the handshake failed for a reason not listed below
    verify_failed,           ///< the peer's certificate chain or name did not verify
    no_application_protocol, ///< no ALPN protocol in common
    protocol_error,          ///< malformed or unexpected TLS data
    record_too_large,        ///< a record header announced more than TLS allows
    bad_record_mac,          ///< a record failed to decrypt / authenticate
    unexpected_eof,          ///< the peer closed the connection without close_notify
    peer_alert,              ///< the peer aborted the connection with a fatal alert
    invalid_certificate,     ///< a certificate (chain) could not be loaded or parsed
    invalid_private_key,     ///< a key could not be loaded, or does not match the certificate
    invalid_configuration,   ///< the context options are inconsistent or unsupported
    broken,                  ///< an earlier failure ended the connection: close the stream
};

/// The "tls" error category.
const std::error_category& category() noexcept;
std::error_code make_error_code(errc e) noexcept;

/// The detailed message of the calling fiber's (outside a vCPU: thread's) most recent failed
/// call of this module, e.g. "certificate verify failed: certificate has expired (depth 0,
/// subject CN=localhost)". Empty if none failed yet. Fiber-local, so it survives migration.
const std::string& last_error_message();

enum class version : uint16_t { tls1_2 = 0x0303, tls1_3 = 0x0304 };

struct context_options {
    /// Own certificate chain (leaf first) and private key, as PEM file paths or PEM text (give
    /// one of each pair). Required for a server; optional for a client (client certificates).
    std::string cert_chain_file, cert_chain_pem;
    std::string private_key_file, private_key_pem;
    /// Trust anchors for verifying the peer. If none is given, the system's default locations.
    std::string ca_file, ca_dir, ca_pem;
    /// Client: verify the server's chain and name (default on; turn it off only for tests).
    bool verify_peer = true;
    /// Server: request a client certificate and fail the handshake unless one verifies
    /// against the trust anchors (mutual TLS).
    bool require_client_certificate = false;
    /// ALPN protocols in preference order (e.g. {"h2", "http/1.1"}). A server whose list has no
    /// protocol in common with the client's fails the handshake (no_application_protocol); a
    /// client that offers none, or a server with an empty list, negotiates nothing.
    std::vector<std::string> alpn;
    version min_version = version::tls1_2;
    version max_version = version::tls1_3;
    /// Client: sessions kept for resumption, keyed by server name and address (0: no cache).
    /// Server: session tickets and the server-side cache are on unless this is 0.
    size_t session_cache_size = 1024;
};

/// Configuration shared by connections: a cheap, copyable handle; safe to use from any vCPU.
class context {
public:
    /// Errors (all with last_error_message()): ENOENT/EACCES (a file), invalid_certificate,
    /// invalid_private_key, invalid_configuration (bad versions or ALPN names, a server without a
    /// certificate, a key without a certificate or the reverse).
    static result<context> make_client(const context_options& opts = {});
    static result<context> make_server(const context_options& opts);

    context() noexcept = default;
    bool valid() const noexcept { return impl_ != nullptr; }
    bool is_server() const noexcept;
    /// Client: sessions currently cached.
    size_t cached_sessions() const noexcept;

    struct impl;

private:
    friend class stream;
    std::shared_ptr<impl> impl_;
};

/// One TLS connection over an owned net::stream: a byte_stream (gluon/net/byte_stream.h), so
/// whatever is written against byte_stream runs over TLS unchanged. Move-only. Use it from fibers
/// of one vCPU at a time; one fiber may receive while another sends (full duplex). On an empty
/// (default or moved-from) stream the I/O calls fail with EBADF.
///
/// Transfer errors, beyond byte_stream's: reads: unexpected_eof (TCP closed without
/// close_notify: possible truncation), protocol_error, bad_record_mac, record_too_large,
/// peer_alert, broken; a read of 0 is the peer's close_notify. A timeout or interrupt loses
/// nothing: the stream stays usable. After any other error, every later call fails with broken.
/// Renegotiation (TLS 1.2) is refused: a read answers the peer's request with a no_renegotiation
/// warning and goes on (an OpenSSL peer ends the connection on it). A read fails with
/// protocol_error when more than 16 KiB of such answers wait for a peer that does not read them
/// (a send of this stream parked on it), rather than keeping them without bound.
/// Writes: at most 64 KiB per write_some; EPIPE after shutdown(); a failed write leaves the
/// stream broken (records may be half sent): close it. shutdown() sends close_notify (once)
/// without waiting for the peer's; a later shutdown() succeeds only if the first one did (after
/// a failed one it fails with broken, as every call does). close() frees the TLS state and
/// closes the socket without close_notify; calls of other fibers parked on the stream fail (a
/// read with EBADF), and close() returns once they have returned.
class stream final : public byte_stream {
public:
    /// Client handshake over a connected socket (which the stream takes over; on failure it is
    /// closed). server_name is sent as SNI (unless it is an IP address) and is the name the
    /// certificate must match, both without the trailing dot of a fully qualified name
    /// ("example.com."); empty means no SNI and, with verify_peer, a chain-only check.
    /// Errors: verify_failed, no_application_protocol, handshake_failed, peer_alert,
    /// protocol_error, record_too_large, unexpected_eof, socket errors (ECONNRESET, ...),
    /// ETIMEDOUT, ECANCELED, EINVAL (not a client context, or a server_name that cannot be a
    /// host name: one holding a control byte such as NUL, longer than 253 bytes or with a label
    /// longer than 63, without its trailing dot; RFC 1035 2.3.4).
    static result<stream> connect(net::stream sock, const context& ctx,
                                  std::string_view server_name, duration timeout = forever);
    /// Server handshake. Errors: as for connect (verify_failed only with
    /// require_client_certificate), EINVAL (not a server context).
    static result<stream> accept(net::stream sock, const context& ctx, duration timeout = forever);

    stream() noexcept;
    stream(stream&&) noexcept;
    stream& operator=(stream&&) noexcept;
    ~stream() override;

    bool valid() const noexcept { return impl_ != nullptr; }

    /// The negotiated ALPN protocol ("" if none).
    std::string_view alpn_selected() const noexcept;
    /// True if the handshake resumed an earlier session.
    bool session_reused() const noexcept;
    /// Client: the name given to connect. Server: the SNI name the client sent ("" if none).
    std::string_view server_name() const noexcept;
    /// "TLSv1.3" or "TLSv1.2".
    std::string_view version() const noexcept;
    std::string_view cipher() const noexcept;
    /// The peer certificate's subject in RFC 2253 form ("CN=localhost,O=..."), "" if none.
    std::string peer_certificate_subject() const;
    /// The detailed message of this stream's last failure ("" if none).
    const std::string& last_error_message() const noexcept;
    /// The underlying socket (for options and addresses; reading or writing it directly breaks
    /// the TLS session); nullptr on an empty stream.
    net::stream* socket() noexcept override;

    struct impl;

private:
    explicit stream(std::unique_ptr<impl> i) noexcept;
    result<size_t> do_read_some(void* buf, size_t n, duration timeout) override;
    result<size_t> do_write_some(const void* buf, size_t n, duration timeout) override;
    result<size_t> do_writev(const iovec* iov, int cnt, duration timeout) override;
    result<void> do_shutdown(duration timeout) override;
    result<void> do_close() noexcept override;
    std::unique_ptr<impl> impl_;
};

/// The server_options::wrap step of a TLS listener: a server handshake on each accepted socket,
/// run in the connection's fiber and bounded by handshake_timeout, so the handler gets a
/// tls::stream. A failed handshake drops that connection only. ctx must be a server context.
stream_wrapper server_wrap(const context& ctx,
                           duration handshake_timeout = std::chrono::seconds(10));

}  // namespace gluon::net::tls

template <> struct std::is_error_code_enum<gluon::net::tls::errc> : std::true_type {};
