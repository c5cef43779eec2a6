// gluon's gRPC server called by gRPC C++ (tests/rpc/grpc_cpp_peer.cc): every call kind,
// metadata, an error status with a message to percent-encode, a deadline that expires and a
// call cancelled by the client, on every engine.
#include <gtest/gtest.h>

#include <string>

#include "gluon/http/server.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/fiber.h"
#include "interop.pb.h"
#include "net/tls_test_support.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::rpc::grpc {
namespace {

using namespace std::chrono_literals;
using gluon::test::Msg;

class grpc_server_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }
    void start() {
        g_.add("/gluon.test.Echo/Unary", unary<Msg, Msg>([](server_context& ctx, const Msg& req, Msg& resp) {
                   resp = req;
                   if (auto v = ctx.metadata("x-in"); !v.empty()) ctx.add_trailing_metadata("x-out", v);
                   return status{};
               }));
        g_.add("/gluon.test.Echo/ServerStream",
               server_streaming<Msg, Msg>([](server_context&, const Msg& req, const std::function<bool(const Msg&)>& send) {
                   for (int i = 0; i < req.n(); ++i) {
                       Msg m;
                       m.set_n(i);
                       if (!send(m)) return status{code::unavailable, "send failed"};
                   }
                   return status{};
               }));
        g_.add("/gluon.test.Echo/ClientStream",
               streaming<Msg, Msg>([](server_context&, const std::function<bool(Msg&)>& next,
                                      const std::function<bool(const Msg&)>& send) {
                   Msg m, out;
                   int n = 0;
                   std::string t;
                   while (next(m)) t += m.text(), ++n;
                   out.set_text(t);
                   out.set_n(n);
                   return send(out) ? status{} : status{code::unavailable, "send failed"};
               }));
        g_.add("/gluon.test.Echo/Bidi", streaming<Msg, Msg>([](server_context&, const std::function<bool(Msg&)>& next,
                                                                const std::function<bool(const Msg&)>& send) {
                   Msg m;
                   while (next(m))
                       if (!send(m)) return status{code::unavailable, "send failed"};
                   return status{};
               }));
        g_.add("/gluon.test.Echo/Fail", unary<Msg, Msg>([](server_context&, const Msg& req, Msg&) {
                   return status{static_cast<code>(req.n()), req.text()};
               }));
        g_.add("/gluon.test.Echo/Slow", [this](server_context& ctx) -> status {
            std::string in;
            (void)ctx.read(in);
            if (!ctx.write(in)) return status{code::unavailable, "send failed"};
            bool has_deadline = ctx.deadline() != k_no_deadline;
            if (!ctx.wait_cancelled(10s)) return status{code::internal, "neither cancelled nor expired"};
            ++(has_deadline ? expired_ : cancelled_);
            return status{code::cancelled, "gone"};
        });
        auto s = http::server::start(net::address::ipv4_loopback(0), g_.as_handler());
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    server g_;
    std::unique_ptr<http::server> srv_;
    int cancelled_ = 0, expired_ = 0;
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
    EXPECT_EQ(expired_, 1);
    EXPECT_EQ(cancelled_, 1);
}

GLUON_ENGINE_TEST_SUITE(grpc_server_test);

}  // namespace
}  // namespace gluon::rpc::grpc
