// tls::context: an SSL_CTX configured from context_options, plus the client session cache.
#include <fcntl.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>

#include "gluon/common/lazy.h"
#include "gluon/sys/ops.h"
#include "internal.h"

namespace gluon::net::tls {
namespace {

using detail::drain_errors;
using detail::fail;

struct bio_free {
    void operator()(BIO* b) const { BIO_free(b); }
};
struct x509_free {
    void operator()(X509* x) const { X509_free(x); }
};
struct pkey_free {
    void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using bio_ptr = std::unique_ptr<BIO, bio_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;

// Never prompt on the terminal for a passphrase (OpenSSL's default for encrypted PEM keys).
int no_password(char*, int, int, void*) {
    return 0;
}

// Configuration files are small and read once at setup, possibly outside a vCPU: plain read(2).
result<std::string> read_file(const std::string& path) {
    long fd = sys::openat(AT_FDCWD, path.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        int e = static_cast<int>(-fd);
        return fail(errno_code(e), "cannot open " + path + ": " + std::strerror(e));
    }
    std::string out;
    char buf[8192];
    for (;;) {
        long n = sys::read(static_cast<int>(fd), buf, sizeof buf, -1);
        if (n == -EINTR) continue;
        if (n < 0) {
            int e = static_cast<int>(-n);
            (void)sys::close(static_cast<int>(fd));
            return fail(errno_code(e), "cannot read " + path + ": " + std::strerror(e));
        }
        if (n == 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    (void)sys::close(static_cast<int>(fd));
    return out;
}

// PEM text from the inline option or else from the file option ("" if neither is set).
result<std::string> pem_source(const std::string& pem, const std::string& file) {
    if (!pem.empty() || file.empty()) return pem;
    return read_file(file);
}

bio_ptr mem_bio(const std::string& s) {
    return bio_ptr(BIO_new_mem_buf(s.data(), static_cast<int>(s.size())));
}

// After reading PEM blocks until none is left, the queue holds "no start line": expected at
// the end of the input, anything else is a parse error.
bool clean_end_of_pem() {
    unsigned long e = ERR_peek_last_error();
    if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
        ERR_clear_error();
        return true;
    }
    return e == 0;
}

result<void> use_chain(SSL_CTX* c, const std::string& pem) {
    auto b = mem_bio(pem);
    x509_ptr leaf(PEM_read_bio_X509_AUX(b.get(), nullptr, no_password, nullptr));
    if (!leaf || SSL_CTX_use_certificate(c, leaf.get()) != 1)
        return fail(errc::invalid_certificate, "cannot load the certificate: " + drain_errors());
    SSL_CTX_clear_chain_certs(c);
    while (X509* x = PEM_read_bio_X509(b.get(), nullptr, no_password, nullptr)) {
        if (SSL_CTX_add0_chain_cert(c, x) != 1) {
            X509_free(x);
            return fail(errc::invalid_certificate,
                        "cannot add a chain certificate: " + drain_errors());
        }
    }
    if (!clean_end_of_pem())
        return fail(errc::invalid_certificate, "bad certificate chain PEM: " + drain_errors());
    return {};
}

result<void> use_key(SSL_CTX* c, const std::string& pem) {
    auto b = mem_bio(pem);
    std::unique_ptr<EVP_PKEY, pkey_free> k(
        PEM_read_bio_PrivateKey(b.get(), nullptr, no_password, nullptr));
    if (!k)
        return fail(errc::invalid_private_key, "cannot load the private key: " + drain_errors());
    // SSL_CTX_use_PrivateKey already refuses a key that does not match the certificate.
    if (SSL_CTX_use_PrivateKey(c, k.get()) != 1 || SSL_CTX_check_private_key(c) != 1)
        return fail(errc::invalid_private_key,
                    "the private key does not match the certificate: " + drain_errors());
    return {};
}

result<void> add_trusted(SSL_CTX* c, const std::string& pem) {
    auto b = mem_bio(pem);
    int n = 0;
    while (X509* x = PEM_read_bio_X509(b.get(), nullptr, no_password, nullptr)) {
        int ok = X509_STORE_add_cert(SSL_CTX_get_cert_store(c), x);
        X509_free(x);
        if (ok != 1) return fail(errc::invalid_certificate, "cannot add a CA: " + drain_errors());
        ++n;
    }
    if (n == 0 || !clean_end_of_pem())
        return fail(errc::invalid_certificate,
                    "no CA certificate in the PEM input: " + drain_errors());
    return {};
}

result<void> load_identity(SSL_CTX* c, const context_options& o, bool server) {
    auto chain = GLUON_TRY(pem_source(o.cert_chain_pem, o.cert_chain_file));
    auto key = GLUON_TRY(pem_source(o.private_key_pem, o.private_key_file));
    if (chain.empty() != key.empty())
        return fail(errc::invalid_configuration,
                    "a certificate chain needs a private key and the reverse");
    if (chain.empty()) {
        if (server)
            return fail(errc::invalid_configuration, "a TLS server needs a certificate and key");
        return {};
    }
    if (auto r = use_chain(c, chain); !r) return r;
    return use_key(c, key);
}

result<void> load_trust(SSL_CTX* c, const context_options& o) {
    auto pem = GLUON_TRY(pem_source(o.ca_pem, o.ca_file));
    if (!pem.empty()) GLUON_TRY(add_trusted(c, pem));
    if (!o.ca_dir.empty()) {
        struct statx st;
        if (long r = sys::statx(AT_FDCWD, o.ca_dir.c_str(), 0, STATX_TYPE, &st); r < 0) {
            int e = static_cast<int>(-r);
            return fail(errno_code(e), "CA directory " + o.ca_dir + ": " + std::strerror(e));
        }
        if (SSL_CTX_load_verify_dir(c, o.ca_dir.c_str()) != 1)
            return fail(errc::invalid_configuration,
                        "CA directory " + o.ca_dir + ": " + drain_errors());
    }
    if (pem.empty() && o.ca_dir.empty() && SSL_CTX_set_default_verify_paths(c) != 1)
        return fail(errc::invalid_configuration, "system CA locations: " + drain_errors());
    return {};
}

result<std::string> alpn_wire(const std::vector<std::string>& protos) {
    std::string w;
    for (const auto& p : protos) {
        if (p.empty() || p.size() > 255)
            return fail(errc::invalid_configuration,
                        "an ALPN protocol name must be 1 to 255 bytes");
        w += static_cast<char>(p.size());
        w += p;
    }
    return w;
}

int select_alpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                unsigned inlen, void* arg) {
    auto* im = static_cast<context::impl*>(arg);
    unsigned char* chosen = nullptr;
    // Our list first: the server's preference order decides (RFC 7301 leaves it to the server).
    int r = SSL_select_next_proto(&chosen, outlen,
                                  reinterpret_cast<const unsigned char*>(im->alpn_wire.data()),
                                  static_cast<unsigned>(im->alpn_wire.size()), in, inlen);
    if (r != OPENSSL_NPN_NEGOTIATED) return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

// Accepts the client's server name, whatever it is (a context has one certificate). Without a
// callback saying so OpenSSL does not keep the name in the TLS 1.2 session, and a resumed
// connection's SSL_get_servername, which then reads the session's, gave nothing.
int accept_server_name(SSL*, int*, void*) {
    return SSL_TLSEXT_ERR_OK;
}

// TLS 1.3 servers send tickets after the handshake; the client sees them in a later SSL_read.
int on_new_session(SSL* ssl, SSL_SESSION* sess) {
    auto* im = static_cast<context::impl*>(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)));
    auto* st = static_cast<stream::impl*>(SSL_get_app_data(ssl));
    if (!im || !st || st->cache_key.empty()) return 0;
    im->put_session(st->cache_key, sess);
    return 1;  // we keep the reference
}

bool valid_version(version v) {
    return v == version::tls1_2 || v == version::tls1_3;
}

result<void> configure(context::impl& im, const context_options& o) {
    SSL_CTX* c = im.ctx;
    if (!valid_version(o.min_version) || !valid_version(o.max_version) ||
        o.min_version > o.max_version)
        return fail(errc::invalid_configuration, "TLS versions must be 1.2 or 1.3, min <= max");
    SSL_CTX_set_min_proto_version(c, static_cast<int>(o.min_version));
    SSL_CTX_set_max_proto_version(c, static_cast<int>(o.max_version));
    // Renegotiation would make a reader need to write mid-stream and a writer need to read.
    SSL_CTX_set_options(c, SSL_OP_NO_RENEGOTIATION);
    if (auto r = load_identity(c, o, im.server); !r) return r;
    bool verify = im.server ? o.require_client_certificate : o.verify_peer;
    if (verify) {
        if (auto r = load_trust(c, o); !r) return r;
        im.verify_mode = SSL_VERIFY_PEER | (im.server ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    }
    auto alpn = GLUON_TRY(alpn_wire(o.alpn));
    if (im.server) {
        SSL_CTX_set_tlsext_servername_callback(c, accept_server_name);
        im.alpn_wire = std::move(alpn);
        if (!im.alpn_wire.empty()) SSL_CTX_set_alpn_select_cb(c, select_alpn, &im);
    } else if (!alpn.empty() &&
               SSL_CTX_set_alpn_protos(c, reinterpret_cast<const unsigned char*>(alpn.data()),
                                       static_cast<unsigned>(alpn.size())) != 0) {  // 0 is success
        return fail(errc::invalid_configuration, "ALPN: " + drain_errors());
    }
    im.cache_max = o.session_cache_size;
    if (im.server && im.cache_max == 0) {
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(c, 0);
    } else if (im.server) {
        // Tickets (OpenSSL's default, keys random per context) plus the stateful cache for
        // clients that resume by session id. The id context must be set for the cache to work.
        SSL_CTX_sess_set_cache_size(c, static_cast<long>(im.cache_max));
        static const unsigned char sid_ctx[] = "gluon";
        SSL_CTX_set_session_id_context(c, sid_ctx, sizeof sid_ctx - 1);
    } else if (im.cache_max > 0) {
        // Our own cache keyed by server: OpenSSL's internal one is server-side only.
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(c, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    }
    return {};
}

result<std::shared_ptr<context::impl>> make(const context_options& o, bool server) {
    detail::ensure_openssl_init();
    ERR_clear_error();
    auto im = std::make_shared<context::impl>();
    im->server = server;
    im->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
    if (!im->ctx) return fail(errno_code(ENOMEM), "SSL_CTX_new: " + drain_errors());
    SSL_CTX_set_app_data(im->ctx, im.get());
    if (auto r = configure(*im, o); !r) {
        ERR_clear_error();
        return unexpected(r.error());
    }
    return im;
}

}  // namespace

namespace detail {
void ensure_openssl_init() noexcept {
    // Idempotent and thread-safe in OpenSSL 3; the flags ask for the error strings explicitly
    // (with 0 they are not loaded, and the messages would be bare numbers).
    // A lazy_flag, not a function-local static: common/lazy.h says why.
    static constinit lazy_flag done;
    (void)done.get([] {
        return OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS,
                                nullptr) == 1;
    });
}
}  // namespace detail

context::impl::~impl() {
    for (auto& [key, s] : cache)
        SSL_SESSION_free(s);
    SSL_CTX_free(ctx);
}

SSL_SESSION* context::impl::take_session(const std::string& key) {
    std::lock_guard lk(cache_mu);
    auto it = cache.find(key);
    if (it == cache.end()) return nullptr;
    SSL_SESSION* s = it->second;
    if (!SSL_SESSION_is_resumable(s) || SSL_SESSION_get_protocol_version(s) == TLS1_3_VERSION) {
        // TLS 1.3 tickets are single use (RFC 8446 C.4): the new connection brings fresh ones.
        cache.erase(it);
        if (SSL_SESSION_is_resumable(s)) return s;
        SSL_SESSION_free(s);
        return nullptr;
    }
    SSL_SESSION_up_ref(s);
    return s;
}

void context::impl::put_session(const std::string& key, SSL_SESSION* s) {
    std::lock_guard lk(cache_mu);
    auto [it, inserted] = cache.try_emplace(key, s);
    if (!inserted) {
        SSL_SESSION_free(it->second);
        it->second = s;
        return;
    }
    if (cache.size() > cache_max) {
        // Bounded, not LRU: evict some other entry (resumption is an optimisation only).
        auto victim = cache.begin() == it ? std::next(cache.begin()) : cache.begin();
        SSL_SESSION_free(victim->second);
        cache.erase(victim);
    }
}

result<context> context::make_client(const context_options& opts) {
    auto im = GLUON_TRY(make(opts, false));
    context c;
    c.impl_ = std::move(im);
    return c;
}

result<context> context::make_server(const context_options& opts) {
    auto im = GLUON_TRY(make(opts, true));
    context c;
    c.impl_ = std::move(im);
    return c;
}

bool context::is_server() const noexcept {
    return impl_ && impl_->server;
}

size_t context::cached_sessions() const noexcept {
    if (!impl_) return 0;
    std::lock_guard lk(impl_->cache_mu);
    return impl_->cache.size();
}

}  // namespace gluon::net::tls
