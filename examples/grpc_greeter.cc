// gRPC in gluon's blocking style: the "hello world" Greeter of gRPC's own examples, so its
// clients and servers in any language talk to this one.
//
//   grpc_greeter server [--port N]            serve Greeter on 127.0.0.1 (prints "listening N")
//   grpc_greeter client --port N [NAME..]     call SayHello for each NAME, then a stream
//   grpc_greeter                              both in one program, on a port of its own
//
// Handlers are plain functions on fibers; a call from the client is one blocking statement.
#include <cstdio>
#include <string>
#include <vector>

#include "gluon/http/server.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"
#include "greeter.pb.h"

using namespace gluon;
namespace grpc = gluon::rpc::grpc;
using helloworld::HelloReply;
using helloworld::HelloRequest;

namespace {

void add_greeter(grpc::server& g) {
    g.add("/helloworld.Greeter/SayHello",
          grpc::unary<HelloRequest, HelloReply>([](grpc::server_context&, const HelloRequest& req, HelloReply& reply) {
              if (req.name().empty()) return grpc::status{grpc::code::invalid_argument, "name is empty"};
              reply.set_message("Hello " + req.name());
              return grpc::status{};
          }));
    g.add("/helloworld.Greeter/SayHelloStream",
          grpc::server_streaming<HelloRequest, HelloReply>(
              [](grpc::server_context&, const HelloRequest& req, const std::function<bool(const HelloReply&)>& send) {
                  for (const char* greeting : {"Hello", "Bonjour", "Hola"}) {
                      HelloReply r;
                      r.set_message(std::string(greeting) + " " + req.name());
                      if (!send(r)) return grpc::status{grpc::code::unavailable, "the client went away"};
                  }
                  return grpc::status{};
              }));
}

/// Calls SayHello for each name, then SayHelloStream; false on any failure.
bool greet(uint16_t port, const std::vector<std::string>& names) {
    grpc::channel ch("127.0.0.1", port);
    grpc::call_options o;
    o.deadline = deadline_after(std::chrono::seconds(5));
    for (const auto& name : names) {
        HelloRequest req;
        HelloReply reply;
        req.set_name(name);
        grpc::status s = grpc::unary(ch, "/helloworld.Greeter/SayHello", req, reply, o);
        if (!s.ok()) {
            std::fprintf(stderr, "SayHello: %s: %s\n", grpc::code_name(s.code), s.message.c_str());
            return false;
        }
        std::printf("%s\n", reply.message().c_str());
    }
    HelloRequest req;
    req.set_name(names.empty() ? "stream" : names.back());
    grpc::client_call call = ch.call("/helloworld.Greeter/SayHelloStream", o);
    grpc::write(call, req);
    HelloReply reply;
    while (grpc::read(call, reply)) std::printf("%s\n", reply.message().c_str());
    grpc::status s = call.finish();
    if (!s.ok()) std::fprintf(stderr, "SayHelloStream: %s: %s\n", grpc::code_name(s.code), s.message.c_str());
    return s.ok();
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "both";
    uint16_t port = 0;
    std::vector<std::string> names;
    cli::parser p("usage: grpc_greeter server [--port N] | client --port N [NAME..] | (no arguments: both)");
    p.option("--port", port).positional(names);
    if ((mode != "server" && mode != "client" && mode != "both") || !p.parse(argc, argv, 2) ||
        (mode == "client" && port == 0) || (mode != "client" && !names.empty()))
        return p.usage();
    grpc::server g;
    add_greeter(g);
    bool ok = true;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        if (mode == "client") {
            ok = greet(port, names.empty() ? std::vector<std::string>{"world"} : names);
            return {};
        }
        auto srv = GLUON_TRY(http::server::start(net::address::ipv4_loopback(port), g.as_handler()));
        if (mode == "server") return serve_until_signalled(*srv, std::chrono::seconds(1));
        ok = greet(srv->local_address().port(), {"world", "gluon"});
        srv->stop(std::chrono::seconds(1));
        return {};
    });
    if (!r) {
        std::fprintf(stderr, "grpc_greeter: %s\n", r.error().message().c_str());
        return 1;
    }
    return ok ? 0 : 1;
}
