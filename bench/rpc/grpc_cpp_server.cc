// gRPC C++'s echo server for bench/run rpc (B8): the callback API (the one gRPC recommends for
// performance), unary Echo of a BytesValue. Prints its port first, serves until killed.
//
//   grpc_cpp_server [--port P]
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench.grpc.pb.h"

namespace {

class echo final : public gluon::bench::Bench::CallbackService {
    grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const google::protobuf::BytesValue* req,
                                   google::protobuf::BytesValue* resp) override {
        resp->set_value(req->value());
        auto* r = ctx->DefaultReactor();
        r->Finish(grpc::Status::OK);
        return r;
    }
};

}  // namespace

int main(int argc, char** argv) {
    int port = 0;
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--port") && i + 1 < argc) port = std::atoi(argv[++i]);
    echo svc;
    grpc::ServerBuilder b;
    int bound = 0;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(), &bound);
    b.RegisterService(&svc);
    auto srv = b.BuildAndStart();
    if (!srv || bound == 0) {
        std::fprintf(stderr, "grpc_cpp_server: cannot listen\n");
        return 1;
    }
    std::printf("%d\n", bound);
    std::fflush(stdout);
    srv->Wait();
}
