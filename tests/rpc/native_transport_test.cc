// The native RPC over every transport it is meant for (a transport is any net::byte_stream):
// TCP, a Unix socket, TLS and a shared-memory IPC stream, on every engine. Many fibers share
// the connection, and a payload larger than any buffer on the way is received in place.
#include "../net/tls_test_support.h"
#include "gluon/ipc/listener.h"
#include "gluon/ipc/session.h"
#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "native_messages.h"

#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace gluon::rpc::testing {
namespace {

using namespace std::chrono_literals;
namespace tls_t = net::tls_testing;

enum class transport { tcp, unix_socket, tls, ipc };

class rpc_transport : public ::testing::TestWithParam<std::tuple<engine::kind, transport>> {
protected:
    void SetUp() override {
        if (!engine::available(kind()))
            GTEST_SKIP() << engine::kind_name(kind()) << " not available";
        ASSERT_TRUE(init({.engine = kind(), .log_engine = false}));
        ASSERT_TRUE(
            srv_.add(echo, [](call_context&, const echo_msg& in, echo_msg& out) -> result<void> {
                out.seq = in.seq;
                out.text = in.text;
                out.payload = bytes::view(in.payload.data(), in.payload.size());
                return {};
            }));
    }
    void TearDown() override {
        (void)cli_.close();
        net_.reset();
        if (ipc_acceptor_.joinable()) {
            (void)ipc_listener_.close();
            (void)ipc_acceptor_.interrupt();
            (void)ipc_acceptor_.join();
        }
        if (is_vcpu()) {
            ASSERT_TRUE(fini());
        }
    }
    engine::kind kind() const { return std::get<0>(GetParam()); }
    transport tp() const { return std::get<1>(GetParam()); }
    std::string unique_name() {
        return "gluon-rpc-" + std::to_string(::getpid()) + "-" + std::to_string(++counter_);
    }

    // Starts serving on the transport and opens the client.
    void open() {
        if (tp() == transport::ipc) return open_ipc();
        net::server_options o;
        net::address where = net::address::ipv4_loopback(0);
        if (tp() == transport::unix_socket) where = *net::address::unix_abstract(unique_name());
        if (tp() == transport::tls) o.wrap = net::tls::server_wrap(tls_t::server_ctx(), 5s);
        auto s = net::server::start(where, srv_.handler(), o);
        ASSERT_TRUE(s) << s.error().message();
        net_ = std::move(*s);
        auto sock = net::stream::connect(net_->local_address(), 5s);
        ASSERT_TRUE(sock);
        std::unique_ptr<net::byte_stream> st;
        if (tp() == transport::tls) {
            auto t =
                net::tls::stream::connect(std::move(*sock), tls_t::client_ctx(), "localhost", 5s);
            ASSERT_TRUE(t) << net::tls::last_error_message();
            st = std::make_unique<net::tls::stream>(std::move(*t));
        } else {
            st = std::make_unique<net::stream>(std::move(*sock));
        }
        auto c = client::open(std::move(st));
        ASSERT_TRUE(c);
        cli_ = std::move(*c);
    }
    void open_ipc() {
        auto addr = *net::address::unix_abstract(unique_name());
        auto l = ipc::listener::listen(addr);
        ASSERT_TRUE(l) << l.error().message();
        ipc_listener_ = std::move(*l);
        ipc_acceptor_ = *spawn([this] {
            auto s = ipc_listener_.accept();
            if (!s) return;
            server_session_ = std::move(*s);
            while (auto st = server_session_.accept_stream()) {
                (void)spawn([this, st = std::move(*st)]() mutable {
                    (void)srv_.serve(st);
                })->detach();
            }
        });
        auto s = ipc::session::connect(addr);
        ASSERT_TRUE(s) << s.error().message();
        client_session_ = std::move(*s);
        auto st = client_session_.open_stream();
        ASSERT_TRUE(st);
        auto c = client::open(std::make_unique<ipc::stream>(std::move(*st)));
        ASSERT_TRUE(c);
        cli_ = std::move(*c);
    }

    server srv_;
    client cli_;
    std::unique_ptr<net::server> net_;
    ipc::listener ipc_listener_;
    ipc::session server_session_, client_session_;
    fiber ipc_acceptor_;
    static inline int counter_ = 0;
};

TEST_P(rpc_transport, concurrent_callers) {
    open();
    constexpr int k_fibers = 16, k_calls = 40;
    int bad = 0;
    std::vector<fiber> fs;
    for (int f = 0; f < k_fibers; ++f) {
        fs.push_back(*spawn([&, f] {
            std::string data(size_t(100 + 300 * f), char('a' + f));
            for (int i = 0; i < k_calls; ++i) {
                echo_msg req, resp;
                req.seq = uint64_t(f * 1000 + i);
                req.payload = bytes::view(data.data(), data.size());
                if (!cli_.call(echo, req, resp, {.timeout = 10s}) || resp.seq != req.seq ||
                    resp.payload.str() != data)
                    ++bad;
            }
        }));
    }
    for (auto& f : fs)
        ASSERT_TRUE(f.join());
    EXPECT_EQ(bad, 0);
}

TEST_P(rpc_transport, large_payload_into_callers_buffer) {
    open();
    std::string data(4 << 20, '\0');
    for (size_t i = 0; i < data.size(); ++i)
        data[i] = char(i * 7 + (i >> 12));
    std::vector<uint8_t> buf(data.size());
    echo_msg req, resp;
    req.payload = bytes::view(data.data(), data.size());
    resp.payload.receive_into(buf.data(), buf.size());
    auto r = cli_.call(echo, req, resp, {.timeout = 30s});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(resp.payload.data(), buf.data());
    EXPECT_EQ(std::memcmp(buf.data(), data.data(), data.size()), 0);
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<engine::kind, transport>>& i) {
    const char* t[] = {"tcp", "unix", "tls", "ipc"};
    return std::string(engine::kind_name(std::get<0>(i.param))) + "_" +
           t[int(std::get<1>(i.param))];
}

INSTANTIATE_TEST_SUITE_P(all, rpc_transport,
                         ::testing::Combine(::testing::ValuesIn(test::all_engines()),
                                            ::testing::Values(transport::tcp,
                                                              transport::unix_socket,
                                                              transport::tls, transport::ipc)),
                         param_name);

} // namespace
} // namespace gluon::rpc::testing
