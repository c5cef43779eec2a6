// gluon's native RPC: a key-value service whose messages are plain structs (no generated
// code), a server and a client in one program over a Unix socket of its own.
//
//   rpc_echo                    server and client in one program, over a Unix socket
//   rpc_echo server [--port N]  serve on 127.0.0.1 (port 0: any; prints "listening PORT")
//   rpc_echo client --port N    call a server there
//
// The client calls from several fibers over one connection at once, gives each call a
// deadline, and reads a large value straight into a buffer of its own.
#include "gluon/net/server.h"
#include "gluon/rpc/rpc.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <signal.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gluon;
using namespace std::chrono_literals;

namespace {

struct put_request {
    std::string key;
    rpc::bytes value; // sent from the caller's memory, no copy
    GLUON_RPC_FIELDS(key, value)
};
struct get_request {
    std::string key;
    GLUON_RPC_FIELDS(key)
};
struct value_reply {
    bool found = false;
    uint64_t version = 0;
    rpc::bytes value;
    GLUON_RPC_FIELDS(found, version, value)
};

// Service 1, "kv": the ids go on the wire, the names into the server's name table.
constexpr rpc::method<put_request, value_reply> kv_put{1, 1, "put"};
constexpr rpc::method<get_request, value_reply> kv_get{1, 2, "get"};

struct entry {
    std::string value;
    uint64_t version = 0;
};

result<void> register_kv(rpc::server& srv, std::map<std::string, entry>& store) {
    GLUON_TRY(srv.add_service(1, "kv"));
    GLUON_TRY(srv.add(
        kv_put, [&](rpc::call_context&, const put_request& in, value_reply& out) -> result<void> {
            entry& e = store[in.key];
            e.value.assign(reinterpret_cast<const char*>(in.value.data()), in.value.size());
            out.found = true;
            out.version = ++e.version;
            return {};
        }));
    return srv.add(
        kv_get, [&](rpc::call_context&, const get_request& in, value_reply& out) -> result<void> {
            auto it = store.find(in.key);
            if (it == store.end()) return {};
            out.found = true;
            out.version = it->second.version;
            out.value = rpc::bytes::view(it->second.value.data(), it->second.value.size());
            return {};
        });
}

result<void> client(const net::address& addr) {
    rpc::client c = GLUON_TRY(rpc::client::connect(addr, {.default_timeout = 5s}));
    for (const auto& m : GLUON_TRY(c.describe()))
        std::printf("method %u.%u %s.%s\n", unsigned(m.service), unsigned(m.id),
                    m.service_name.c_str(), m.name.c_str());

    // Eight fibers, one connection: the calls are multiplexed and their writes batched.
    std::vector<fiber> fs;
    int failed = 0;
    for (int i = 0; i < 8; ++i) {
        fs.push_back(GLUON_TRY(spawn([&, i] {
            std::string key = "key" + std::to_string(i), text = "value of " + key;
            value_reply r;
            if (!c.call(kv_put, {key, rpc::bytes::view(text.data(), text.size())}, r,
                        {.timeout = 1s}))
                ++failed;
        })));
    }
    for (auto& f : fs)
        GLUON_TRY(f.join());
    if (failed) return errno_error(EIO);

    value_reply r;
    GLUON_TRY(c.call(kv_get, get_request{"key3"}, r));
    std::printf("key3 = \"%s\" (version %llu)\n", std::string(r.value.str()).c_str(),
                (unsigned long long)r.version);

    // A large value, received into our own buffer.
    std::string big(1 << 20, 'x');
    GLUON_TRY(c.call(kv_put, {"big", rpc::bytes::view(big.data(), big.size())}, r));
    std::vector<uint8_t> buf(big.size());
    r.value.receive_into(buf.data(), buf.size());
    GLUON_TRY(c.call(kv_get, get_request{"big"}, r));
    bool same = r.value.data() == buf.data() && r.value.str() == big;
    std::printf("big: %zu bytes, into the caller's buffer: %s\n", r.value.size(),
                same ? "yes" : "NO");
    if (!same) return errno_error(EIO);
    return c.close();
}

} // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "both";
    uint16_t port = 0;
    cli::parser p(
        "usage: rpc_echo server [--port N] | client --port N | (no arguments: both, over a Unix "
        "socket of its own)");
    p.option("--port", port);
    if ((mode != "server" && mode != "client" && mode != "both") || !p.parse(argc, argv, 2) ||
        (mode == "client" && port == 0))
        return p.usage();
    auto addr = mode == "both"
                    ? net::address::unix_abstract("gluon-rpc-echo-" + std::to_string(::getpid()))
                    : result<net::address>(net::address::ipv4_loopback(port));
    if (!addr) return 2;
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        if (mode == "client") return client(*addr);
        std::map<std::string, entry> store;
        rpc::server srv;
        GLUON_TRY(register_kv(srv, store));
        auto s = GLUON_TRY(net::server::start(*addr, srv.handler()));
        if (mode == "server") return serve_until_signalled(*s, 1s);
        auto done = client(*addr);
        s->stop(1s);
        return done;
    });
    if (!r) {
        std::fprintf(stderr, "rpc_echo: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}
