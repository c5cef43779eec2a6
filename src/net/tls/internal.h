// Private to src/net/tls/: the OpenSSL-backed state behind tls::context and tls::stream, and the
// helpers the implementation files share. This is the only place (with the .cc files next to
// it) that includes OpenSSL.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>

#include "gluon/net/tls.h"
#include "gluon/sync/mutex.h"
#include "gluon/sync/semaphore.h"

namespace gluon::net::tls {

namespace detail {

/// OPENSSL_init_ssl once per process. Never paired with a cleanup: OpenSSL tears itself down at
/// exit, and other users of OpenSSL in the process must keep working until then.
void ensure_openssl_init() noexcept;

/// Ciphertext buffers between OpenSSL and the socket; the BIO reads `in` and appends to `out`.
struct io_buffers {
    static constexpr size_t in_capacity = 32 * 1024;
    std::unique_ptr<char[]> in;
    size_t in_begin = 0, in_end = 0;
    bool in_eof = false;
    std::string out;  // ciphertext OpenSSL produced and nobody has taken to send yet
    size_t in_available() const noexcept { return in_end - in_begin; }
};

/// A BIO over io_buffers (which must outlive it). It never blocks: an empty `in` is "retry".
BIO* new_buffer_bio(io_buffers* io) noexcept;

/// Empties the calling thread's OpenSSL error queue into "reason; reason; ..." and returns the
/// packed code of the first error (0 if the queue was empty). Called right after each SSL_*
/// call, before the fiber can park: the queue is per thread, and other fibers of this vCPU
/// (or this fiber after a migration) would otherwise see or lose these errors.
std::string drain_errors(unsigned long* first = nullptr);

/// Maps an OpenSSL error (packed code) to a tls::errc.
errc classify(unsigned long err, bool handshaking) noexcept;

/// Stores msg as the calling fiber's last error message and returns the error to return.
unexpected fail(std::error_code e, std::string msg);

}  // namespace detail

struct context::impl {
    SSL_CTX* ctx = nullptr;
    bool server = false;
    int verify_mode = SSL_VERIFY_NONE;  // applied to each SSL with our verify callback
    std::string alpn_wire;  // server: our protocols, RFC 7301 wire format, preference order
    size_t cache_max = 0;

    // Client session cache, keyed by server name and address. Guarded by a plain mutex: held
    // for a map operation only, never across a park, and contexts are shared between vCPUs.
    std::mutex cache_mu;
    std::map<std::string, SSL_SESSION*> cache;  // each entry owns one reference

    impl() = default;
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    ~impl();

    /// A session to offer for key (the caller owns the reference), or nullptr.
    SSL_SESSION* take_session(const std::string& key);
    /// Takes over the reference to s.
    void put_session(const std::string& key, SSL_SESSION* s);
};

struct stream::impl {
    std::shared_ptr<context::impl> ctx;  // declared first: outlives ssl, whose SSL_CTX it owns
    net::stream sock;
    detail::io_buffers io;
    SSL* ssl = nullptr;
    bool client = false;
    bool shut = false;
    bool failed = false;       // a TLS or socket error ended the connection (not a timeout)
    std::error_code broken;    // sticky: a send failed part way (failed is set too)
    std::string name;          // client: the server name given to connect
    std::string peer;          // the peer's address, for messages and the session cache key
    std::string cache_key;     // client: session cache key ("" when not caching)
    std::string verify_detail;  // first certificate that failed verification, and why
    std::string last_error;
    std::string sending;  // io.out's bytes being sent (guarded by send_mu; keeps its capacity)
    size_t replies = 0;   // bytes reads queued in io.out since a flush last emptied it
    mutex send_mu;       // one fiber at a time moves io.out to the socket (keeps records in order)
    mutex recv_mu;       // one fiber at a time fills io.in
    int calls = 0;       // reads, sends and shutdowns in progress (fibers of the stream's vCPU)
    bool closing = false;  // close() waits on `idle` for calls to reach 0 (set by the last one)
    event idle;

    ~impl();
};

}  // namespace gluon::net::tls
