// TLS between gluon clients and gluon servers: handshakes, verification failures, SNI, ALPN,
// client certificates, resumption, timeouts and malformed input.
#include "gluon/net/tls.h"

#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/semaphore.h"
#include "tls_test_support.h"

namespace gluon::net {
namespace {

using namespace tls_testing;

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
        [&] { EXPECT_TRUE(c->write_all(out.data(), out.size(), 10s)) << c->last_error_message(); });
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 10s)) << c->last_error_message();
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(in == out);
    ASSERT_TRUE(c->shutdown(1s));
    char b;
    EXPECT_EQ(c->read_some(&b, 1, 5s).value_or(99), 0u);  // the server's close_notify
}

// writev gathers its buffers into one record: one call takes several small buffers whole (up
// to 64 KiB), and writev_all of buffers of every size, empty ones among them, arrives intact.
TEST_P(tls_test, writev_gathers_buffers_into_one_record_and_loses_nothing) {
    tls_server srv(server_ctx());
    auto c = dial(srv.addr(), client_ctx(), "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    std::string head = "HTTP/1.1 200 OK\r\ncontent-length: 4096\r\n\r\n", body(4096, 'b');
    iovec two[] = {{head.data(), head.size()}, {nullptr, 0}, {body.data(), body.size()}};
    auto n = c->writev(two, 3, 5s);
    ASSERT_TRUE(n) << c->last_error_message();
    EXPECT_EQ(*n, head.size() + body.size());  // one call, both buffers
    std::string back(*n, '\0');
    ASSERT_TRUE(c->read_exactly(back.data(), back.size(), 5s)) << c->last_error_message();
    EXPECT_EQ(back, head + body);
    // Buffers of every size around the 64 KiB a record batch takes.
    std::vector<std::string> parts;
    for (size_t len : {1u, 0u, 700u, 65536u, 3u, 100000u, 0u, 16384u, 65535u})
        parts.push_back(std::string(len, static_cast<char>('a' + parts.size())));
    std::vector<iovec> iov;
    std::string all;
    for (auto& p : parts) {
        iov.push_back({p.data(), p.size()});
        all += p;
    }
    std::string echoed(all.size(), '\0');
    auto writer = spawn([&] {
        EXPECT_TRUE(c->writev_all(iov.data(), static_cast<int>(iov.size()), 10s)) << c->last_error_message();
    });
    ASSERT_TRUE(writer);
    ASSERT_TRUE(c->read_exactly(echoed.data(), echoed.size(), 10s)) << c->last_error_message();
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(echoed == all);
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

// In TLS 1.2 the server name belongs to the session: a resumed connection's server still
// tells the name its client sent.
TEST_P(tls_test, a_tls12_server_tells_the_sni_of_a_resumed_connection) {
    tls_server srv(server_ctx());
    tls::context_options o;
    o.max_version = tls::version::tls1_2;
    auto ctx = client_ctx(o);
    for (int i = 0; i < 2; ++i) {
        auto c = dial(srv.addr(), ctx, "gluon.test");
        ASSERT_TRUE(c) << tls::last_error_message();
        ASSERT_EQ(c->session_reused(), i == 1);
        outcome got = srv.next();
        EXPECT_EQ(got.reused, i == 1);
        EXPECT_EQ(got.sni, "gluon.test") << "connection " << i;
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

// Only subjectAltName DNS names count (RFC 9525 6.3): a certificate whose name is only in its
// subject's CN matches nothing, and a wildcard must be a whole left-most label.
TEST_P(tls_test, names_match_dns_subject_alt_names_only_and_whole_label_wildcards) {
    const identity cn_only = make_cert("cn-only.test", false, &certs().ca, -1, 30);
    expect_rejected(cn_only, client_ctx(), "cn-only.test", "hostname mismatch");
    const identity partial = make_cert("partial", false, &certs().ca, -1, 30, "DNS:w*.gluon.test");
    expect_rejected(partial, client_ctx(), "www.gluon.test", "hostname mismatch");
    // A whole-label wildcard still matches one label.
    const identity whole = make_cert("whole", false, &certs().ca, -1, 30, "DNS:*.gluon.test");
    tls_server srv(server_ctx({}, whole));
    auto c = dial(srv.addr(), client_ctx(), "www.gluon.test");
    ASSERT_TRUE(c) << tls::last_error_message();
    ping(*c);
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

// A fully qualified name with its trailing dot is the same host: SNI carries the name
// without the dot (RFC 6066 3), and the certificate's name matches it.
TEST_P(tls_test, a_fully_qualified_name_with_a_trailing_dot_verifies_and_sends_sni_without_it) {
    tls_server srv(server_ctx());
    auto c = dial(srv.addr(), client_ctx(), "gluon.test.");
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_EQ(c->server_name(), "gluon.test.");
    EXPECT_EQ(srv.next().sni, "gluon.test");
    ping(*c);
    // Only the one dot of a fully qualified name goes; a wrong name still fails.
    expect_rejected(certs().server, client_ctx(), "gluon.test..", "hostname mismatch");
    // An address with the dot is still an address: no SNI (RFC 6066 3), checked as an IP.
    auto d = dial(srv.addr(), client_ctx(), "127.0.0.1.");
    ASSERT_TRUE(d) << tls::last_error_message();
    EXPECT_EQ(srv.next().sni, "");
    ping(*d);
    expect_rejected(certs().server, client_ctx(), "127.0.0.2.", "IP address mismatch");
}

// OpenSSL takes the name as a C string: a name holding a NUL was sent and verified cut at it,
// so "localhost\0..." connected as localhost. Names that cannot be host names (a control byte,
// over 253 bytes, a label over 63; RFC 1035 2.3.4) are refused before anything is sent.
TEST_P(tls_test, a_server_name_that_cannot_be_a_host_name_is_refused) {
    tls_server srv(server_ctx());
    const std::string label63(63, 'a');
    const std::string long254 = label63 + '.' + label63 + '.' + label63 + '.' + label63.substr(1);
    const std::string bad[] = {
        std::string("localhost\0.evil.example", 23),
        "local\nhost",
        std::string("localhost\x7f"),
        long254,
        long254.substr(1) + '.' + '.',  // the dot of a fully qualified name does not count
        label63 + "a.gluon.test",
    };
    ASSERT_EQ(long254.size(), 254u);
    for (const std::string& name : bad) {
        auto c = dial(srv.addr(), client_ctx(), name);
        ASSERT_FALSE(c) << "connected with a name of " << name.size() << " bytes";
        EXPECT_EQ(c.error(), std::errc::invalid_argument) << tls::last_error_message();
        EXPECT_NE(tls::last_error_message().find("invalid server name"), std::string::npos)
            << tls::last_error_message();
    }
    // At the limits a name is a name: it goes out and fails only against the certificate.
    expect_rejected(certs().server, client_ctx(), long254.substr(1), "hostname mismatch");
    expect_rejected(certs().server, client_ctx(), long254.substr(1) + '.', "hostname mismatch");
    expect_rejected(certs().server, client_ctx(), label63 + ".gluon.test", "hostname mismatch");
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
        EXPECT_EQ(d->read_some(&b, 1, 5s).error(), tls::errc::peer_alert)
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
    EXPECT_EQ(c->read_some(&b, 1, 50ms).error(), std::errc::timed_out);
    ping(*c);
}

// One fiber closes the stream while others are parked in a read and in a send on it (a writer
// that gives up on a connection its reader waits on): their calls fail, the reader's with
// EBADF, and the state they were using outlives them.
TEST_P(tls_test, close_fails_the_calls_parked_on_the_stream_and_waits_for_them) {
    event release;
    tls_server srv(server_ctx(), [&](tls::stream&) { (void)release.wait(10s); });  // reads nothing
    auto c = dial(srv.addr(), client_ctx(), "localhost");
    ASSERT_TRUE(c) << tls::last_error_message();
    ASSERT_TRUE(c->socket()->set_buffer_sizes(4096, 4096));
    bool reading = false, writing = false;
    result<size_t> got = size_t{0};
    result<void> put;
    const std::string big(size_t{32} << 20, 'x');  // more than the socket buffers hold
    auto reader = spawn([&] {
        char b[16];
        reading = true;
        got = c->read_some(b, sizeof b, 10s);
        reading = false;
    });
    auto writer = spawn([&] {
        writing = true;
        put = c->write_all(big.data(), big.size(), 10s);
        writing = false;
    });
    ASSERT_TRUE(reader);
    ASSERT_TRUE(writer);
    this_fiber::yield();  // both run until they park
    ASSERT_TRUE(reading && writing);
    EXPECT_TRUE(c->close());
    EXPECT_FALSE(reading || writing);  // close() returned after them
    ASSERT_TRUE(reader->join());
    ASSERT_TRUE(writer->join());
    EXPECT_EQ(got.error(), std::errc::bad_file_descriptor) << got.error().message();
    EXPECT_FALSE(put);
    char b;
    EXPECT_EQ(c->read_some(&b, 1, 1s).error(), std::errc::bad_file_descriptor);
    release.set();
}

TEST_P(tls_test, close_notify_is_end_of_stream_and_a_bare_close_is_unexpected_eof) {
    bool notify = true;
    tls_server srv(server_ctx(), [&](tls::stream& s) {
        (void)s.write_all("bye", 3, 1s);
        if (notify) (void)s.shutdown(1s);
    });
    for (bool n : {true, false}) {
        notify = n;
        auto c = dial(srv.addr(), client_ctx(), "localhost");
        ASSERT_TRUE(c);
        char buf[8];
        ASSERT_TRUE(c->read_exactly(buf, 3, 5s));
        auto r = c->read_some(buf, sizeof buf, 5s);
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
        ASSERT_TRUE(raw->write_all(in.bytes.data(), in.bytes.size(), 2s));
        char buf[256];
        while (auto n = raw->read_some(buf, sizeof buf, 5s))  // an alert, then the server closes
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
    ASSERT_TRUE(raw->write_all(partial.data(), partial.size(), 2s));
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
        ASSERT_TRUE(s->read_some(buf, sizeof buf, 2s));
        ASSERT_TRUE(s->set_linger(true, 0));
        ASSERT_TRUE(s->close());
    });
    auto c = dial(*l->local_address(), client_ctx(), "localhost");
    EXPECT_EQ(c.error(), std::errc::connection_reset) << tls::last_error_message();
    ASSERT_TRUE(peer->join());
}

// ---- against a server made with OpenSSL's own API ----------------------------------------------

// A TLS server on a plain thread and a blocking socket, written with OpenSSL's SSL API: it can do
// what a gluon server never does (ask for renegotiation) and stop reading. After the handshake
// it runs `script`, which waits for the test's go-ahead with wait(). No session tickets.
class openssl_peer {
public:
    using script = std::function<void(SSL*, openssl_peer&)>;
    openssl_peer(int fd, tls::version max, script run) : fd_(fd) {
        EXPECT_EQ(::pipe(go_), 0);
        thread_ = std::thread([this, max, run = std::move(run)] { serve(max, run); });
    }
    openssl_peer(const openssl_peer&) = delete;
    openssl_peer& operator=(const openssl_peer&) = delete;
    ~openssl_peer() {
        const char many[8] = {};  // whatever waits are left (a test that failed half way)
        (void)::write(go_[1], many, sizeof many);
        join();
        ::close(go_[0]);
        ::close(go_[1]);
    }
    /// Lets the script go past its next wait().
    void release() { ASSERT_EQ(::write(go_[1], "g", 1), 1); }
    /// In the script: waits for release().
    void wait() {
        char c;
        (void)::read(go_[0], &c, 1);
    }
    /// Waits for the script to end (blocking the calling thread).
    void join() {
        if (thread_.joinable()) thread_.join();
    }

private:
    void serve(tls::version max, const script& run) {
        sigset_t pipe;  // a write to a client that is gone is EPIPE here, not the process's end
        sigemptyset(&pipe);
        sigaddset(&pipe, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
        SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
        SSL_CTX_set_max_proto_version(ctx, static_cast<int>(max));
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
        const identity& id = certs().server;
        BIO* b = BIO_new_mem_buf(id.cert.data(), static_cast<int>(id.cert.size()));
        X509* cert = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
        BIO_free(b);
        b = BIO_new_mem_buf(id.key.data(), static_cast<int>(id.key.size()));
        EVP_PKEY* key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
        BIO_free(b);
        SSL_CTX_use_certificate(ctx, cert);
        SSL_CTX_use_PrivateKey(ctx, key);
        X509_free(cert);
        EVP_PKEY_free(key);
        SSL* ssl = SSL_new(ctx);
        SSL_set_fd(ssl, fd_);
        if (SSL_accept(ssl) == 1) run(ssl, *this);
        SSL_free(ssl);
        SSL_CTX_free(ctx);
        ::close(fd_);
    }

    int fd_;
    int go_[2] = {-1, -1};
    std::thread thread_;
};

// Sends the peer a HelloRequest (a TLS 1.2 renegotiation request) and the byte c.
bool ask_to_renegotiate(SSL* ssl, char c) {
    return SSL_renegotiate(ssl) == 1 && SSL_do_handshake(ssl) == 1 && SSL_write(ssl, &c, 1) == 1;
}

// Fills the socket under c with records of 1,000 bytes of 'f' while it has room: a Unix socket
// takes a whole send while its sender holds less than SO_SNDBUF, and none once it holds that
// much. Returns the bytes written.
size_t fill_send_buffer(tls::stream& c) {
    const int sock = c.socket()->get();
    const int sndbuf = c.socket()->get_option(SOL_SOCKET, SO_SNDBUF).value_or(0);
    EXPECT_GT(sndbuf, 0);
    const std::string chunk(1000, 'f');
    size_t total = 0;
    for (int held = 0; held < sndbuf;) {
        if (!c.write_all(chunk.data(), chunk.size(), 5s)) {
            ADD_FAILURE() << c.last_error_message();
            break;
        }
        total += chunk.size();
        EXPECT_EQ(::ioctl(sock, SIOCOUTQ, &held), 0);
    }
    return total;
}

// A read has to send what OpenSSL answered (the refusal of a renegotiation request) while the
// peer reads nothing, so it sends under the read's deadline. When that runs out the read
// returns what it read (or ETIMEDOUT) and the answer waits for the next call, which sends it
// first: the stream stays usable, as a read's timeout promises. The client's socket buffer is
// full when the request comes, so the answer cannot go out until the peer reads.
TEST_P(tls_test, a_read_whose_reply_cannot_go_out_in_time_keeps_the_stream_usable) {
    auto [mine, theirs] = *stream::pair();
    ASSERT_TRUE(mine.set_buffer_sizes(0, 4096));
    size_t peer_read = 0;
    int peer_reason = 0;
    openssl_peer peer(theirs.release(), tls::version::tls1_2, [&](SSL* ssl, openssl_peer& p) {
        p.wait();  // the client's socket buffer is full
        if (!ask_to_renegotiate(ssl, 'k')) return;
        p.wait();  // the client's read has given up: read everything now
        char buf[4096];
        int n;
        while ((n = SSL_read(ssl, buf, sizeof buf)) > 0) peer_read += static_cast<size_t>(n);
        // OpenSSL ends a connection whose peer refuses the renegotiation it asked for.
        peer_reason = ERR_GET_REASON(ERR_peek_last_error());
    });
    auto c = tls::stream::connect(std::move(mine), client_ctx(), "localhost", 5s);
    ASSERT_TRUE(c) << tls::last_error_message();
    ASSERT_EQ(c->version(), "TLSv1.2");
    const size_t filled = fill_send_buffer(*c);
    peer.release();
    ASSERT_TRUE(fd::poll(c->socket()->get(), POLLIN, 5s));  // the request has come
    char k = 0;
    auto r = c->read_some(&k, 1, 200ms);
    if (r)
        EXPECT_EQ(k, 'k');
    else
        EXPECT_EQ(r.error(), std::errc::timed_out) << c->last_error_message();
    peer.release();
    // The refusal goes out first, then this record, in one send: the peer reads all it was sent
    // before the refusal, intact, then the refusal.
    ASSERT_TRUE(c->write_all("after", 5, 5s)) << c->last_error_message();
    peer.join();
    EXPECT_EQ(peer_read, filled);
    EXPECT_EQ(peer_reason, SSL_R_NO_RENEGOTIATION);
}

// A peer that keeps asking to renegotiate and reads nothing: a read answers each request with a
// refusal it has to queue, as a writer of the client holds the socket, parked on that peer.
// Past 16 KiB of refusals the read fails with protocol_error instead of queueing without end.
TEST_P(tls_test, renegotiation_requests_from_a_peer_that_reads_nothing_end_the_connection) {
    auto [mine, theirs] = *stream::pair();
    ASSERT_TRUE(mine.set_buffer_sizes(0, 4096));
    constexpr int requests = 3000;  // some 90 KiB of refusals
    openssl_peer peer(theirs.release(), tls::version::tls1_2, [](SSL* ssl, openssl_peer& p) {
        p.wait();  // a writer of the client's is parked on its full socket
        for (int i = 0; i < requests; ++i)
            if (!ask_to_renegotiate(ssl, 'x')) return;
    });
    auto c = tls::stream::connect(std::move(mine), client_ctx(), "localhost", 5s);
    ASSERT_TRUE(c) << tls::last_error_message();
    ASSERT_EQ(c->version(), "TLSv1.2");
    const std::string big(size_t{4} << 20, 'w');
    bool writing = false;
    result<void> put;
    auto writer = spawn([&] {
        writing = true;
        put = c->write_all(big.data(), big.size(), 30s);
    });
    ASSERT_TRUE(writer);
    while (!writing) this_fiber::yield();  // it ran until its send parked: the peer reads nothing
    peer.release();
    int got = 0;
    std::error_code error;
    char buf[4096];
    while (got < requests) {
        auto n = c->read_some(buf, sizeof buf, 10s);
        if (!n || *n == 0) {
            error = n ? errno_code(ENODATA) : n.error();
            break;
        }
        got += static_cast<int>(*n);
    }
    EXPECT_EQ(error, tls::errc::protocol_error) << error.message() << ": " << c->last_error_message();
    EXPECT_LT(got, requests);
    EXPECT_TRUE(c->close());  // fails the parked send, and waits for it
    ASSERT_TRUE(writer->join());
    EXPECT_FALSE(put);
}

// A shutdown whose close_notify cannot go out in time fails, and leaves the stream broken: a
// second shutdown must not report that close_notify went out.
TEST_P(tls_test, a_second_shutdown_after_a_failed_one_fails_too) {
    auto [mine, theirs] = *stream::pair();
    ASSERT_TRUE(mine.set_buffer_sizes(0, 4096));
    openssl_peer peer(theirs.release(), tls::version::tls1_3,
                      [](SSL*, openssl_peer& p) { p.wait(); });  // reads nothing meanwhile
    auto c = tls::stream::connect(std::move(mine), client_ctx(), "localhost", 5s);
    ASSERT_TRUE(c) << tls::last_error_message();
    fill_send_buffer(*c);
    auto first = c->shutdown(100ms);
    ASSERT_FALSE(first);
    EXPECT_EQ(first.error(), std::errc::timed_out) << c->last_error_message();
    auto second = c->shutdown(100ms);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), tls::errc::broken) << second.error().message();
    EXPECT_NE(c->last_error_message().find("failed earlier"), std::string::npos)
        << c->last_error_message();
    peer.release();
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
