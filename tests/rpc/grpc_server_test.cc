// gluon's gRPC server called by gRPC C++ (tests/rpc/grpc_cpp_peer.cc): every call kind,
// metadata, an error status with a message to percent-encode, a deadline that expires and a
// call cancelled by the client, on every engine.
#include <gtest/gtest.h>

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

GLUON_ENGINE_TEST_SUITE(grpc_server_test);

}  // namespace
}  // namespace gluon::rpc::grpc
