// Shared by the TLS tests: certificates made once per process with OpenSSL's X509 API, client
// and server contexts, an echo server on net::server that reports each handshake, and the
// engine-parameterized fixture (instantiated once, in tls_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/sync/channel.h"
#include "test_support.h"

// A named namespace, not an anonymous one: the fixture must be one type for both test files, and
// certs() one PKI per process.
namespace gluon::net::tls_testing {

using namespace std::chrono_literals;

// ---- certificates, made once per process with OpenSSL's X509 API ------------------------------

struct identity {
    std::string cert, key;  // PEM
};

struct pki {
    std::string dir;  // ca.pem, server.pem, server.key for the command-line peers
    identity ca, server, expired, self_signed, other_ca;
};

inline void add_ext(X509* x, X509* issuer, int nid, const char* value) {
    X509V3_CTX v;
    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer, x, nullptr, nullptr, 0);
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v, nid, value);
    ASSERT_NE(e, nullptr);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
}

inline std::string pem_of(X509* x, EVP_PKEY* k) {
    BIO* b = BIO_new(BIO_s_mem());
    if (x) PEM_write_bio_X509(b, x);
    if (k) PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
    char* p = nullptr;
    long n = BIO_get_mem_data(b, &p);
    std::string s(p, static_cast<size_t>(n));
    BIO_free(b);
    return s;
}

// A P-256 certificate for cn. issuer == nullptr: self-signed. Validity in days from now.
inline identity make_cert(const char* cn, bool is_ca, const identity* issuer, long from_days,
                          long to_days, const char* san = nullptr) {
    static long serial = 1;
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* x = X509_new();
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400);
    X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
    X509* issuer_cert = x;
    EVP_PKEY* issuer_key = key;
    if (issuer) {
        BIO* b = BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size()));
        issuer_cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
        BIO_free(b);
        b = BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size()));
        issuer_key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
        BIO_free(b);
    }
    X509_set_issuer_name(x, X509_get_subject_name(issuer_cert));
    add_ext(x, issuer_cert, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (is_ca) add_ext(x, issuer_cert, NID_key_usage, "critical,keyCertSign,cRLSign");
    add_ext(x, issuer_cert, NID_subject_key_identifier, "hash");
    if (san) add_ext(x, issuer_cert, NID_subject_alt_name, san);
    X509_sign(x, issuer_key, EVP_sha256());
    identity id{pem_of(x, nullptr), pem_of(nullptr, key)};
    if (issuer) {
        X509_free(issuer_cert);
        EVP_PKEY_free(issuer_key);
    }
    X509_free(x);
    EVP_PKEY_free(key);
    return id;
}

inline void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

struct pki_holder {
    pki p;
    pki_holder() {
        const char* san = "DNS:localhost,DNS:gluon.test,IP:127.0.0.1";
        p.ca = make_cert("gluon test CA", true, nullptr, -1, 30);
        p.server = make_cert("localhost", false, &p.ca, -1, 30, san);
        p.expired = make_cert("localhost", false, &p.ca, -3, -1, san);
        p.self_signed = make_cert("localhost", false, nullptr, -1, 30, san);
        p.other_ca = make_cert("some other CA", true, nullptr, -1, 30);
        char tmpl[] = "/tmp/gluon-tls-test-XXXXXX";
        p.dir = ::mkdtemp(tmpl);
        write_file(p.dir + "/ca.pem", p.ca.cert);
        write_file(p.dir + "/server.pem", p.server.cert);
        write_file(p.dir + "/server.key", p.server.key);
    }
    ~pki_holder() { std::filesystem::remove_all(p.dir); }
};

inline const pki& certs() {
    static pki_holder h;
    return h.p;
}

inline tls::context client_ctx(tls::context_options o = {}) {
    if (o.ca_pem.empty() && o.ca_file.empty()) o.ca_pem = certs().ca.cert;
    auto c = tls::context::make_client(o);
    EXPECT_TRUE(c) << tls::last_error_message();
    return c ? *c : tls::context();
}

inline tls::context server_ctx(tls::context_options o = {}, const identity& id = certs().server) {
    o.cert_chain_pem = id.cert;
    o.private_key_pem = id.key;
    auto c = tls::context::make_server(o);
    EXPECT_TRUE(c) << tls::last_error_message();
    return c ? *c : tls::context();
}

// ---- a TLS server on net::server that reports each handshake ----------------------------------

struct outcome {
    std::error_code error;
    std::string message, sni, alpn, peer;
    bool reused = false;
};

inline void echo(tls::stream& s) {
    std::vector<char> buf(size_t{64} * 1024);
    for (;;) {
        auto n = s.read_some(buf.data(), buf.size(), 10s);
        if (!n || *n == 0) break;
        if (!s.write_all(buf.data(), *n, 10s)) return;
    }
    (void)s.shutdown(1s);
}

class tls_server {
public:
    tls_server(tls::context ctx, std::function<void(tls::stream&)> h = echo)
        : ctx_(std::move(ctx)), handler_(std::move(h)) {
        auto s = server::start(address::ipv4_loopback(0), [this](byte_stream& sock) { serve(static_cast<stream&>(sock)); });
        EXPECT_TRUE(s);
        if (s) srv_ = std::move(*s);
    }
    ~tls_server() {
        if (srv_) srv_->stop(1s);
    }
    address addr() const { return srv_->local_address(); }
    /// The next handshake's outcome, in accept order.
    outcome next() {
        return outcomes_.recv(5s).value_or(outcome{errno_code(ETIMEDOUT), "no outcome"});
    }

private:
    void serve(stream& sock) {
        auto t = tls::stream::accept(std::move(sock), ctx_, 5s);
        outcome o;
        if (!t) {
            o.error = t.error();
            o.message = tls::last_error_message();
        } else {
            o = {{},
                 "",
                 std::string(t->server_name()),
                 std::string(t->alpn_selected()),
                 t->peer_certificate_subject(),
                 t->session_reused()};
        }
        (void)outcomes_.send(std::move(o), 5s);
        if (t) handler_(*t);
    }

    tls::context ctx_;
    std::function<void(tls::stream&)> handler_;
    channel<outcome> outcomes_{64};
    std::unique_ptr<server> srv_;
};

inline result<tls::stream> dial(const address& a, const tls::context& ctx, std::string_view name,
                                duration timeout = 5s) {
    auto s = stream::connect(a, 2s);
    if (!s) return unexpected(s.error());
    return tls::stream::connect(std::move(*s), ctx, name, timeout);
}

// One round trip through an echo server.
inline void ping(tls::stream& s, const std::string& msg = "ping") {
    ASSERT_TRUE(s.write_all(msg.data(), msg.size(), 5s)) << s.last_error_message();
    std::string in(msg.size(), '\0');
    ASSERT_TRUE(s.read_exactly(in.data(), in.size(), 5s)) << s.last_error_message();
    EXPECT_EQ(in, msg);
}

class tls_test : public test::engine_test {};

}  // namespace gluon::net::tls_testing
