// Uses a module of each layer of an installed gluon (runtime, http, rpc, fs_fuse, task), so
// that a missing library or dependency in the installed package fails to link.
#include <gluon/fs/fuse.h>
#include <gluon/http/router.h>
#include <gluon/rpc/grpc/server.h>
#include <gluon/runtime/vcpu.h>
#include <gluon/task/spawn.h>

#include <cstdio>

namespace {
gluon::task<int> answer() { co_return 42; }
}  // namespace

int main() {
    int got = 0;
    auto r = gluon::run(gluon::init_options{}, [&] {
        gluon::http::router routes;
        routes.get("/", [](gluon::http::request&, gluon::http::response& res) { res.body("hi"); });
        gluon::rpc::grpc::server grpc;
        gluon::fs::fuse_options fo;
        (void)fo;
        auto v = gluon::block_on(answer());
        got = v ? *v : 0;
    });
    if (!r || got != 42) return 1;
    std::puts("ok");
    return 0;
}
