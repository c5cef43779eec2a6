#include "gluon/net/tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/channel.h"
#include "test_support.h"

extern char** environ;

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

// ---- certificates, made once per process with OpenSSL's X509 API ------------------------------

struct identity {
    std::string cert, key;  // PEM
};

struct pki {
    std::string dir;  // ca.pem, server.pem, server.key for the command-line peers
    identity ca, server, expired, self_signed, other_ca;
};

void add_ext(X509* x, X509* issuer, int nid, const char* value) {
    X509V3_CTX v;
    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer, x, nullptr, nullptr, 0);
    X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &v, nid, value);
    ASSERT_NE(e, nullptr);
    X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
}

std::string pem_of(X509* x, EVP_PKEY* k) {
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
identity make_cert(const char* cn, bool is_ca, const identity* issuer, long from_days, long to_days,
                   const char* san = nullptr) {
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

void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

std::string read_file(const std::string& path) {
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

const pki& certs() {
    static pki_holder h;
    return h.p;
}

tls::context client_ctx(tls::context_options o = {}) {
    if (o.ca_pem.empty() && o.ca_file.empty()) o.ca_pem = certs().ca.cert;
    auto c = tls::context::make_client(o);
    EXPECT_TRUE(c) << tls::last_error_message();
    return c ? *c : tls::context();
}

tls::context server_ctx(tls::context_options o = {}, const identity& id = certs().server) {
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

void echo(tls::stream& s) {
    std::vector<char> buf(size_t{64} * 1024);
    for (;;) {
        auto n = s.recv_some(buf.data(), buf.size(), 10s);
        if (!n || *n == 0) break;
        if (!s.send_all(buf.data(), *n, 10s)) return;
    }
    (void)s.shutdown(1s);
}

class tls_server {
public:
    tls_server(tls::context ctx, std::function<void(tls::stream&)> h = echo)
        : ctx_(std::move(ctx)), handler_(std::move(h)) {
        auto s = server::start(address::ipv4_loopback(0), [this](stream& sock) { serve(sock); });
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

result<tls::stream> dial(const address& a, const tls::context& ctx, std::string_view name,
                         duration timeout = 5s) {
    auto s = stream::connect(a, 2s);
    if (!s) return unexpected(s.error());
    return tls::stream::connect(std::move(*s), ctx, name, timeout);
}

// One round trip through an echo server.
void ping(tls::stream& s, const std::string& msg = "ping") {
    ASSERT_TRUE(s.send_all(msg.data(), msg.size(), 5s)) << s.last_error_message();
    std::string in(msg.size(), '\0');
    ASSERT_TRUE(s.recv_exactly(in.data(), in.size(), 5s)) << s.last_error_message();
    EXPECT_EQ(in, msg);
}

class tls_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(tls_test);

TEST_P(tls_test, tls13_handshake_and_full_duplex_echo_of_4_mib) {
    tls_server srv(server_ctx());
    auto c = dial(srv.addr(), client_ctx(), "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_EQ(c->version(), "TLSv1.3");
    EXPECT_NE(c->peer_certificate_subject().find("CN=localhost"), std::string::npos);
    EXPECT_FALSE(c->session_reused());
    EXPECT_FALSE(srv.next().error);
    std::string out(4 << 20, '\0');
    for (size_t i = 0; i < out.size(); ++i)
        out[i] = static_cast<char>(i * 131 + (i >> 13));
    std::string in(out.size(), '\0');
    // A writer fiber and this reader use the stream at once.
    auto writer = spawn(
        [&] { EXPECT_TRUE(c->send_all(out.data(), out.size(), 10s)) << c->last_error_message(); });
    ASSERT_TRUE(c->recv_exactly(in.data(), in.size(), 10s)) << c->last_error_message();
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(in == out);
    ASSERT_TRUE(c->shutdown(1s));
    char b;
    EXPECT_EQ(c->recv_some(&b, 1, 5s).value_or(99), 0u);  // the server's close_notify
}

TEST_P(tls_test, tls12_handshake_and_session_resumption) {
    tls_server srv(server_ctx());
    tls::context_options o;
    o.max_version = tls::version::tls1_2;
    auto ctx = client_ctx(o);
    for (int i = 0; i < 2; ++i) {
        auto c = dial(srv.addr(), ctx, "localhost");
        ASSERT_TRUE(c) << tls::last_error_message();
        EXPECT_EQ(c->version(), "TLSv1.2");
        EXPECT_EQ(c->session_reused(), i == 1);
        EXPECT_EQ(srv.next().reused, i == 1);
        ping(*c);
    }
}

TEST_P(tls_test, tls13_session_resumption_on_a_second_connection) {
    tls_server srv(server_ctx());
    auto ctx = client_ctx();
    {
        auto c = dial(srv.addr(), ctx, "localhost");
        ASSERT_TRUE(c) << tls::last_error_message();
        EXPECT_FALSE(c->session_reused());
        ping(*c);  // TLS 1.3 tickets arrive after the handshake, read along with the echo
    }
    EXPECT_EQ(ctx.cached_sessions(), 1u);
    auto c = dial(srv.addr(), ctx, "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_TRUE(c->session_reused());
    EXPECT_FALSE(srv.next().reused);
    EXPECT_TRUE(srv.next().reused);
    ping(*c);
}

// A client that rejects the server's certificate: verify_failed plus OpenSSL's reason; the server
// learns it from the client's alert.
void expect_rejected(const identity& server_id, const tls::context& client, std::string_view name,
                     const std::string& reason) {
    tls_server srv(server_ctx({}, server_id));
    auto c = dial(srv.addr(), client, name);
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(), tls::errc::verify_failed) << c.error().message();
    const std::string& msg = tls::last_error_message();
    EXPECT_NE(msg.find("certificate verify failed: " + reason), std::string::npos) << msg;
    outcome o = srv.next();
    EXPECT_EQ(o.error, tls::errc::peer_alert) << o.message;
}

TEST_P(tls_test, untrusted_ca_fails_verification_with_the_reason) {
    tls::context_options o;
    o.ca_pem = certs().other_ca.cert;
    expect_rejected(certs().server, client_ctx(o), "localhost",
                    "unable to get local issuer certificate");
    EXPECT_NE(tls::last_error_message().find("CN=localhost"), std::string::npos);
}

TEST_P(tls_test, self_signed_certificate_is_rejected) {
    expect_rejected(certs().self_signed, client_ctx(), "localhost", "self-signed certificate");
}

TEST_P(tls_test, expired_certificate_is_rejected) {
    expect_rejected(certs().expired, client_ctx(), "localhost", "certificate has expired");
}

TEST_P(tls_test, hostname_mismatch_is_rejected) {
    expect_rejected(certs().server, client_ctx(), "example.com", "hostname mismatch");
}

TEST_P(tls_test, verification_can_be_turned_off) {
    tls_server srv(server_ctx({}, certs().self_signed));
    tls::context_options o;
    o.verify_peer = false;
    auto c = dial(srv.addr(), client_ctx(o), "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    ping(*c);
}

TEST_P(tls_test, sni_reaches_the_server_and_ip_addresses_verify_without_sni) {
    tls_server srv(server_ctx());
    auto ctx = client_ctx();
    auto c = dial(srv.addr(), ctx, "gluon.test");
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_EQ(srv.next().sni, "gluon.test");
    auto d = dial(srv.addr(), ctx, "127.0.0.1");
    ASSERT_TRUE(d) << tls::last_error_message();
    EXPECT_EQ(srv.next().sni, "");
}

TEST_P(tls_test, alpn_negotiation) {
    tls::context_options so;
    so.alpn = {"h2", "http/1.1"};
    tls_server srv(server_ctx(so));
    auto with = [&](std::vector<std::string> protos) {
        tls::context_options o;
        o.alpn = std::move(protos);
        return dial(srv.addr(), client_ctx(o), "localhost");
    };
    auto a = with({"http/1.1", "h2"});  // the server's preference wins
    ASSERT_TRUE(a) << tls::last_error_message();
    EXPECT_EQ(a->alpn_selected(), "h2");
    EXPECT_EQ(srv.next().alpn, "h2");
    auto b = with({"http/1.1"});
    ASSERT_TRUE(b);
    EXPECT_EQ(b->alpn_selected(), "http/1.1");
    EXPECT_EQ(srv.next().alpn, "http/1.1");
    auto none = with({});
    ASSERT_TRUE(none);
    EXPECT_EQ(none->alpn_selected(), "");
    EXPECT_EQ(srv.next().alpn, "");
    auto bad = with({"spdy/3"});
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), tls::errc::no_application_protocol) << tls::last_error_message();
    EXPECT_EQ(srv.next().error, tls::errc::no_application_protocol);
}

TEST_P(tls_test, client_certificates_when_the_server_requires_them) {
    tls::context_options so;
    so.require_client_certificate = true;
    so.ca_pem = certs().ca.cert;
    tls_server srv(server_ctx(so));
    tls::context_options co;
    co.cert_chain_pem = certs().server.cert;
    co.private_key_pem = certs().server.key;
    auto c = dial(srv.addr(), client_ctx(co), "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_NE(srv.next().peer.find("CN=localhost"), std::string::npos);
    // Without one, the TLS 1.3 client finishes its side first and hears the alert on reading.
    auto d = dial(srv.addr(), client_ctx(), "localhost");
    outcome o = srv.next();
    EXPECT_EQ(o.error, tls::errc::verify_failed) << o.message;
    EXPECT_NE(o.message.find("did not return a certificate"), std::string::npos) << o.message;
    if (d) {
        char b;
        EXPECT_EQ(d->recv_some(&b, 1, 5s).error(), tls::errc::peer_alert)
            << d->last_error_message();
    }
}

// OpenSSL keeps its error queue per thread; the stream and the message must not care which vCPU
// a fiber is on between calls.
TEST_P(tls_test, a_stream_and_its_error_message_follow_a_migrating_fiber) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    tls_server srv(server_ctx());  // on this test's vCPU
    auto ctx = client_ctx();
    ASSERT_TRUE((*rt)->run(0, [&] {
        auto c = dial(srv.addr(), ctx, "localhost");
        ASSERT_TRUE(c) << tls::last_error_message();
        ping(*c, "on vCPU 0");
        ASSERT_TRUE(this_fiber::migrate_to((*rt)->vcpu(1)));
        ping(*c, "on vCPU 1");
        EXPECT_FALSE(dial(srv.addr(), ctx, "example.com"));
        ASSERT_TRUE(this_fiber::migrate_to((*rt)->vcpu(0)));
        EXPECT_NE(tls::last_error_message().find("hostname mismatch"), std::string::npos);
        ping(*c, "back on vCPU 0");
    }));
}

TEST_P(tls_test, timeouts_and_a_recv_timeout_keeps_the_stream_usable) {
    auto l = listener::listen(address::ipv4_loopback(0));  // never accepts: no ServerHello
    ASSERT_TRUE(l);
    auto s = stream::connect(*l->local_address(), 2s);
    ASSERT_TRUE(s);
    auto t = tls::stream::connect(std::move(*s), client_ctx(), "localhost", 100ms);
    EXPECT_EQ(t.error(), std::errc::timed_out);
    EXPECT_NE(tls::last_error_message().find("TLS handshake with localhost"), std::string::npos);

    tls_server srv(server_ctx());
    auto c = dial(srv.addr(), client_ctx(), "localhost");
    ASSERT_TRUE(c);
    char b;
    EXPECT_EQ(c->recv_some(&b, 1, 50ms).error(), std::errc::timed_out);
    ping(*c);
}

TEST_P(tls_test, close_notify_is_end_of_stream_and_a_bare_close_is_unexpected_eof) {
    bool notify = true;
    tls_server srv(server_ctx(), [&](tls::stream& s) {
        (void)s.send_all("bye", 3, 1s);
        if (notify) (void)s.shutdown(1s);
    });
    for (bool n : {true, false}) {
        notify = n;
        auto c = dial(srv.addr(), client_ctx(), "localhost");
        ASSERT_TRUE(c);
        char buf[8];
        ASSERT_TRUE(c->recv_exactly(buf, 3, 5s));
        auto r = c->recv_some(buf, sizeof buf, 5s);
        if (n)
            EXPECT_EQ(r.value_or(99), 0u);
        else
            EXPECT_EQ(r.error(), tls::errc::unexpected_eof) << c->last_error_message();
    }
}

// Raw bytes that are not a valid TLS record are a clear error for that connection only.
TEST_P(tls_test, malformed_and_oversized_records_leave_other_connections_alone) {
    tls_server srv(server_ctx());
    auto good = dial(srv.addr(), client_ctx(), "localhost");
    ASSERT_TRUE(good);
    EXPECT_FALSE(srv.next().error);
    ping(*good, "before");
    struct bad_input {
        std::string bytes;
        tls::errc want;
    };
    const bad_input inputs[] = {
        {std::string("\x80\x01garbage, not a TLS record at all\r\n", 36),
         tls::errc::protocol_error},
        {std::string("\x16\x03\x01\xff\xff", 5) + std::string(64, 'A'),
         tls::errc::record_too_large},
    };
    for (const auto& in : inputs) {
        auto raw = stream::connect(srv.addr(), 2s);
        ASSERT_TRUE(raw);
        ASSERT_TRUE(raw->send_all(in.bytes.data(), in.bytes.size(), 2s));
        char buf[256];
        while (auto n = raw->recv_some(buf, sizeof buf, 5s))  // an alert, then the server closes
            if (*n == 0) break;
        outcome o = srv.next();
        EXPECT_EQ(o.error, in.want) << o.error.message() << ": " << o.message;
        EXPECT_FALSE(o.message.empty());
    }
    ping(*good, "after");
}

TEST_P(tls_test, peer_resets_mid_handshake) {
    // A client that sends half a ClientHello record and resets.
    tls_server srv(server_ctx());
    auto raw = stream::connect(srv.addr(), 2s);
    ASSERT_TRUE(raw);
    std::string partial = std::string("\x16\x03\x01\x00\x80", 5) + std::string(10, '\x01');
    ASSERT_TRUE(raw->send_all(partial.data(), partial.size(), 2s));
    ASSERT_TRUE(raw->set_linger(true, 0));
    ASSERT_TRUE(raw->close());
    outcome o = srv.next();
    EXPECT_EQ(o.error, std::errc::connection_reset) << o.message;

    // A server that reads the ClientHello and resets.
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    auto peer = spawn([&] {
        auto s = l->accept(2s);
        ASSERT_TRUE(s);
        char buf[512];
        ASSERT_TRUE(s->recv_some(buf, sizeof buf, 2s));
        ASSERT_TRUE(s->set_linger(true, 0));
        ASSERT_TRUE(s->close());
    });
    auto c = dial(*l->local_address(), client_ctx(), "localhost");
    EXPECT_EQ(c.error(), std::errc::connection_reset) << tls::last_error_message();
    ASSERT_TRUE(peer->join());
}

// ---- command-line peers (openssl, curl), skipped when the tool is missing ----------------------

bool have_tool(const char* name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path ? path : "/usr/bin:/bin");
    for (std::string d; std::getline(dirs, d, ':');)
        if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return true;
    return false;
}

// A process with stdin from `in` and stdout/stderr to `out` / `out`.err; killed if still running
// when destroyed.
class child {
public:
    child(std::vector<std::string> args, const std::string& in, const std::string& out) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_addopen(&fa, 2, (out + ".err").c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0644);
        std::vector<char*> argv;
        argv.reserve(args.size() + 1);
        for (auto& a : args)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        if (posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
        posix_spawn_file_actions_destroy(&fa);
    }
    ~child() {
        if (pid_ <= 0) return;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    bool started() const { return pid_ > 0; }
    /// The exit status once the process ends (parking only the fiber), -1 on a timeout.
    int wait(duration timeout) {
        int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
        if (pfd < 0) return -1;
        auto ready = fd::poll(pfd, POLLIN, timeout);
        (void)fd::close(pfd);
        int st = 0;
        if (!ready || ::waitpid(pid_, &st, WNOHANG) != pid_) return -1;
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }

private:
    pid_t pid_ = -1;
};

uint16_t free_port() {
    auto l = listener::listen(address::ipv4_loopback(0));
    return l ? l->local_address()->port() : 0;
}

// Reads until `end` appears (or EOF/error); returns what came.
std::string recv_until(tls::stream& s, std::string_view end) {
    std::string got;
    char buf[4096];
    while (got.find(end) == std::string::npos) {
        auto n = s.recv_some(buf, sizeof buf, 5s);
        if (!n || *n == 0) break;
        got.append(buf, *n);
    }
    return got;
}

TEST_P(tls_test, gluon_client_against_openssl_s_server) {
    if (!have_tool("openssl")) GTEST_SKIP() << "no openssl command";
    const std::string& dir = certs().dir;
    uint16_t port = free_port();
    child srv({"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port), "-cert",
               dir + "/server.pem", "-key", dir + "/server.key", "-www", "-naccept", "1", "-alpn",
               "http/1.1"},
              "/dev/null", dir + "/s_server.out");
    ASSERT_TRUE(srv.started());
    // It is ready when a connect succeeds; the pause only spaces the attempts out.
    result<stream> sock = errno_error(ECONNREFUSED);
    for (int i = 0; i < 2000 && !sock && sock.error() == std::errc::connection_refused; ++i) {
        sock = stream::connect(address::ipv4_loopback(port), 2s);
        if (!sock) (void)this_fiber::sleep_for(5ms);
    }
    ASSERT_TRUE(sock) << sock.error().message() << " " << read_file(dir + "/s_server.out.err");
    tls::context_options o;
    o.alpn = {"http/1.1"};
    auto c = tls::stream::connect(std::move(*sock), client_ctx(o), "localhost", 5s);
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_EQ(c->version(), "TLSv1.3");
    EXPECT_EQ(c->alpn_selected(), "http/1.1");
    std::string req = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_TRUE(c->send_all(req.data(), req.size(), 5s));
    std::string resp = recv_until(*c, "</HTML>");
    EXPECT_EQ(resp.rfind("HTTP/1.0 200 ok", 0), 0u) << resp.substr(0, 200);
}

TEST_P(tls_test, openssl_s_client_against_gluon_server) {
    if (!have_tool("openssl")) GTEST_SKIP() << "no openssl command";
    const std::string& dir = certs().dir;
    std::string got;
    tls_server srv(server_ctx(), [&](tls::stream& s) {
        got = recv_until(s, "\n");
        (void)s.send_all("hello from gluon\n", 17, 5s);
        (void)s.shutdown(1s);
    });
    write_file(dir + "/s_client.in", "hello from s_client\n");
    child cl({"openssl", "s_client", "-connect", srv.addr().to_string(), "-servername", "localhost",
              "-CAfile", dir + "/ca.pem", "-verify_return_error", "-verify_hostname", "localhost",
              "-quiet"},
             dir + "/s_client.in", dir + "/s_client.out");
    ASSERT_TRUE(cl.started());
    EXPECT_EQ(cl.wait(10s), 0) << read_file(dir + "/s_client.out.err");
    outcome o = srv.next();
    EXPECT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.sni, "localhost");
    EXPECT_EQ(got, "hello from s_client\n");
    EXPECT_EQ(read_file(dir + "/s_client.out"), "hello from gluon\n");
}

TEST_P(tls_test, curl_against_gluon_https_server) {
    if (!have_tool("curl")) GTEST_SKIP() << "no curl command";
    const std::string& dir = certs().dir;
    tls::context_options so;
    so.alpn = {"http/1.1"};
    tls_server srv(server_ctx(so), [](tls::stream& s) {
        if (recv_until(s, "\r\n\r\n").rfind("GET /hello HTTP/1.1\r\n", 0) != 0) return;
        std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
                           "Connection: close\r\n\r\nhello, curl\n";
        (void)s.send_all(resp.data(), resp.size(), 5s);
        (void)s.shutdown(1s);
    });
    std::string port = std::to_string(srv.addr().port());
    child cl({"curl", "-sS", "--max-time", "10", "--noproxy", "*", "--cacert", dir + "/ca.pem",
              "--resolve", "localhost:" + port + ":127.0.0.1",
              "https://localhost:" + port + "/hello"},
             "/dev/null", dir + "/curl.out");
    ASSERT_TRUE(cl.started());
    EXPECT_EQ(cl.wait(15s), 0) << read_file(dir + "/curl.out.err");
    EXPECT_EQ(read_file(dir + "/curl.out"), "hello, curl\n");
    outcome o = srv.next();
    EXPECT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.sni, "localhost");
    EXPECT_EQ(o.alpn, "http/1.1");
}

TEST(tls_context, configuration_errors_are_clear) {
    EXPECT_STREQ(tls::category().name(), "tls");
    EXPECT_EQ(make_error_code(tls::errc::verify_failed).message(),
              "certificate verification failed");
    tls::context_options o;
    EXPECT_EQ(tls::context::make_server(o).error(), tls::errc::invalid_configuration);
    o.cert_chain_file = "/nonexistent/cert.pem";
    o.private_key_file = "/nonexistent/key.pem";
    EXPECT_EQ(tls::context::make_server(o).error(), std::errc::no_such_file_or_directory);
    EXPECT_NE(tls::last_error_message().find("/nonexistent/cert.pem"), std::string::npos);
    o = {};
    o.cert_chain_pem = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
    o.private_key_pem = certs().server.key;
    EXPECT_EQ(tls::context::make_server(o).error(), tls::errc::invalid_certificate);
    EXPECT_FALSE(tls::last_error_message().empty());
    o.cert_chain_pem = certs().server.cert;
    o.private_key_pem = certs().expired.key;  // another key
    EXPECT_EQ(tls::context::make_server(o).error(), tls::errc::invalid_private_key);
    EXPECT_NE(tls::last_error_message().find("does not match"), std::string::npos);
    o = {};
    o.min_version = tls::version::tls1_3;
    o.max_version = tls::version::tls1_2;
    EXPECT_EQ(tls::context::make_client(o).error(), tls::errc::invalid_configuration);
    o = {};
    o.alpn = {std::string(300, 'x')};
    EXPECT_EQ(tls::context::make_client(o).error(), tls::errc::invalid_configuration);
    o = {};
    o.ca_file = certs().dir + "/ca.pem";  // files and PEM text are interchangeable
    EXPECT_TRUE(tls::context::make_client(o));
}

}  // namespace
}  // namespace gluon::net
