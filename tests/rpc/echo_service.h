// The Echo service of tests/rpc/interop.proto on gluon's gRPC server, as gRPC C++'s peer
// serves it: the tests of both directions call the same methods.
#pragma once

#include <functional>
#include <string>

#include "gluon/rpc/grpc.h"
#include "interop.pb.h"
#include "test_support.h"

namespace gluon::rpc::grpc::testing {

using gluon::test::Msg;

/// What the Slow method saw: calls that ended by their deadline, and by the client's cancel.
struct slow_counts {
    int expired = 0, cancelled = 0;
    /// Waits (10 s at most) until the slow calls' handlers have seen their end: a client can be
    /// done with its expired and cancelled calls before their handlers run.
    void await(int calls) const {
        (void)gluon::test::eventually([&] { return expired + cancelled >= calls; });
    }
};

inline void add_echo_service(server& g, slow_counts& slow) {
    using namespace std::chrono_literals;
    g.add("/gluon.test.Echo/Unary", unary<Msg, Msg>([](server_context& ctx, const Msg& req, Msg& resp) {
              resp = req;
              if (auto v = ctx.metadata("x-in"); !v.empty()) ctx.add_trailing_metadata("x-out", v);
              return status{};
          }));
    g.add("/gluon.test.Echo/ServerStream",
          server_streaming<Msg, Msg>([](server_context&, const Msg& req, const std::function<bool(const Msg&)>& send) {
              for (int i = 0; i < req.n(); ++i) {
                  Msg m;
                  m.set_n(i);
                  if (!send(m)) return status{code::unavailable, "send failed"};
              }
              return status{};
          }));
    g.add("/gluon.test.Echo/ClientStream",
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
    g.add("/gluon.test.Echo/Bidi", streaming<Msg, Msg>([](server_context&, const std::function<bool(Msg&)>& next,
                                                           const std::function<bool(const Msg&)>& send) {
              Msg m;
              while (next(m))
                  if (!send(m)) return status{code::unavailable, "send failed"};
              return status{};
          }));
    g.add("/gluon.test.Echo/Fail", unary<Msg, Msg>([](server_context&, const Msg& req, Msg&) {
              return status{static_cast<code>(req.n()), req.text()};
          }));
    g.add("/gluon.test.Echo/Slow", [&slow](server_context& ctx) -> status {
        std::string in;
        (void)ctx.read(in);
        if (!ctx.write(in)) return status{code::unavailable, "send failed"};
        bool has_deadline = ctx.deadline() != k_no_deadline;
        if (!ctx.wait_cancelled(10s)) return status{code::internal, "neither cancelled nor expired"};
        ++(has_deadline ? slow.expired : slow.cancelled);
        return status{code::cancelled, "gone"};
    });
}

}  // namespace gluon::rpc::grpc::testing
