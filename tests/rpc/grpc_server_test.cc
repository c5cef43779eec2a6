// gluon's gRPC server called by gRPC C++ (tests/rpc/grpc_cpp_peer.cc): every call kind,
// metadata, an error status with a message to percent-encode, a deadline that expires and a
// call cancelled by the client, on every engine. Then, called by gluon's client, the status the
// typed helpers answer when a request cannot be read.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <string>

#include "gluon/http/server.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/fiber.h"
#include "echo_service.h"
#include "net/tls_test_support.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::rpc::grpc {
namespace {

using namespace std::chrono_literals;

class grpc_server_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }
    void start() {
        testing::add_echo_service(g_, slow_);
        auto s = http::server::start(net::address::ipv4_loopback(0), g_.as_handler());
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    server g_;
    std::unique_ptr<http::server> srv_;
    testing::slow_counts slow_;
};

TEST_P(grpc_server_test, grpc_cpp_client_calls_every_kind) {
    start();
    std::string dir = net::tls_testing::certs().dir;
    std::string out = dir + "/grpc-client-" + engine::kind_name(GetParam());
    test::child c({GLUON_GRPC_PEER, "client", "127.0.0.1:" + std::to_string(srv_->local_address().port())},
                  "/dev/null", out);
    ASSERT_TRUE(c.started());
    EXPECT_EQ(c.wait(60s), 0) << net::tls_testing::read_file(out) << net::tls_testing::read_file(out + ".err");
    EXPECT_EQ(net::tls_testing::read_file(out), "");
    // The deadline reached the server as grpc-timeout, and the cancelled call's handler saw
    // the cancellation.
    EXPECT_EQ(slow_.expired, 1);
    EXPECT_EQ(slow_.cancelled, 1);
}

/// Bytes as a message type of the typed helpers (the protobuf-style calls they make).
struct raw {
    std::string s;
    bool ParseFromArray(const void* p, int n) {
        s.assign(static_cast<const char*>(p), static_cast<size_t>(n));
        return true;
    }
    size_t ByteSizeLong() const { return s.size(); }
    bool SerializeToArray(void* p, int n) const {
        std::memcpy(p, s.data(), static_cast<size_t>(n));
        return true;
    }
};

/// Echo methods of every helper kind on a server that takes messages of at most 16 bytes.
void add_small_echo(server& g) {
    g.add("/t.S/Unary", unary<raw, raw>([](server_context&, const raw& a, raw& b) {
              b = a;
              return status{};
          }));
    g.add("/t.S/ServerStream",
          server_streaming<raw, raw>([](server_context&, const raw& a, const std::function<bool(const raw&)>& send) {
              return send(a) ? status{} : status{code::unavailable, "send failed"};
          }));
    // Answers OK with what it read: a request it could not read must still fail the call.
    g.add("/t.S/ClientStream", streaming<raw, raw>([](server_context&, const std::function<bool(raw&)>& next,
                                                      const std::function<bool(const raw&)>& send) {
              raw m, all;
              while (next(m)) all.s += m.s;
              return send(all) ? status{} : status{code::unavailable, "send failed"};
          }));
}

TEST_P(grpc_server_test, typed_helpers_answer_why_a_request_could_not_be_read) {
    server g({.max_message_bytes = 16});
    add_small_echo(g);
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    std::string out;
    const std::string big(100, 'y');
    for (const char* m : {"/t.S/Unary", "/t.S/ServerStream", "/t.S/ClientStream"}) {
        status s = ch.unary(m, big, out);
        EXPECT_EQ(s.code, code::resource_exhausted) << m << ": " << code_name(s.code) << " " << s.message;
        s = ch.unary(m, "small", out);
        EXPECT_TRUE(s.ok()) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_EQ(out, "small");
    }
    {
        // Past a first message that was read: the handler saw an end, the client must not.
        client_call c = ch.call("/t.S/ClientStream");
        EXPECT_TRUE(c.write("small"));
        (void)c.write(big);  // the answer may have closed the stream already
        (void)c.writes_done();
        status s = c.finish();  // after what the handler sent of its own
        EXPECT_EQ(s.code, code::resource_exhausted) << code_name(s.code) << " " << s.message;
    }
    {
        // A cancel is the client's, not the server's fault: the handler's status says so.
        server g2;
        method_handler h = unary<raw, raw>([](server_context&, const raw&, raw&) { return status{}; });
        std::optional<status> seen;
        g2.add("/t.S/Watched", [&](server_context& ctx) {
            status s = h(ctx);
            seen = s;
            return s;
        });
        auto srv2 = http::server::start(net::address::ipv4_loopback(0), g2.as_handler());
        ASSERT_TRUE(srv2) << srv2.error().message();
        channel ch2("127.0.0.1", (*srv2)->local_address().port());
        client_call c = ch2.call("/t.S/Watched");  // a head, then no message: the handler waits
        ASSERT_TRUE(this_fiber::sleep_for(100ms));
        c.cancel();
        EXPECT_EQ(c.finish().code, code::cancelled);
        for (int i = 0; i < 500 && !seen; ++i) ASSERT_TRUE(this_fiber::sleep_for(10ms));
        ASSERT_TRUE(seen.has_value());
        EXPECT_EQ(seen->code, code::cancelled) << code_name(seen->code) << " " << seen->message;
    }
}

TEST_P(grpc_server_test, a_deadline_ends_a_wait_for_request_data) {
    // A client that sends its head with grpc-timeout and then nothing, and does not enforce the
    // deadline itself: the server must end the call at the deadline, not at body_timeout.
    server g;
    add_small_echo(g);
    http::server_options ho;
    ho.body_timeout = 5s;
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler(), ho);
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* m : {"/t.S/Unary", "/t.S/ClientStream"}) {
        call_options o;
        o.metadata = {{"grpc-timeout", "200m"}};
        int64_t start = mono_now_ns();
        client_call c = ch.call(m, o);
        std::string out;
        while (c.read(out)) {  // without half-closing: the request stays open
        }
        status s = c.finish();
        auto took = std::chrono::nanoseconds(mono_now_ns() - start);
        EXPECT_EQ(s.code, code::deadline_exceeded) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_LT(took, 3s) << m;  // body_timeout would have taken 5 s
    }
}

GLUON_ENGINE_TEST_SUITE(grpc_server_test);

}  // namespace
}  // namespace gluon::rpc::grpc
