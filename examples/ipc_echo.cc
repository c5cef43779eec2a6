// Shared-memory IPC in gluon's blocking style, speaking CloudWeGo shmipc's protocol (so either
// side may be a shmipc-go program instead).
//
//   ipc_echo server PATH         answer every stream's bytes back (one fiber per stream)
//   ipc_echo client PATH TEXT..  send each TEXT on one stream and print the answer
//   ipc_echo                     both in one program, on a socket of its own
//
// The client writes zero-copy (reserve a slice, fill it, commit) and reads through views of the
// shared memory; the server uses the copying calls.
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "gluon/ipc/listener.h"
#include "gluon/ipc/session.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

void echo(ipc::stream st) {
    char buf[4096];
    while (auto n = st.recv_some(buf, sizeof buf)) {  // ENODATA once the client closes the stream
        if (!st.send(buf, *n)) break;
    }
    (void)st.close();
}

result<void> serve(ipc::listener& l, int sessions) {
    for (int i = 0; sessions < 0 || i < sessions;) {
        auto got = l.accept();
        if (!got) {
            // A client whose handshake failed is reported, not skipped: serve the next one. Only
            // a listener that cannot accept any more ends the server.
            if (got.error() == std::errc::bad_file_descriptor || got.error() == std::errc::invalid_argument)
                return unexpected(got.error());
            std::fprintf(stderr, "ipc_echo: a client was refused: %s\n", got.error().message().c_str());
            continue;
        }
        ++i;
        ipc::session s = std::move(*got);
        (void)GLUON_TRY(spawn([s = std::move(s)]() mutable {
            while (auto st = s.accept_stream()) (void)spawn(echo, std::move(*st))->detach();
        })).detach();
    }
    return {};
}

result<void> client(const net::address& addr, int argc, char** argv) {
    ipc::session s = GLUON_TRY(ipc::session::connect(addr));
    for (int i = 0; i < argc; ++i) {
        ipc::stream st = GLUON_TRY(s.open_stream());
        size_t n = std::strlen(argv[i]);
        auto out = GLUON_TRY(st.reserve(n));
        std::memcpy(out.data(), argv[i], n);
        GLUON_TRY(st.commit(n));
        std::string answer;
        while (answer.size() < n) {
            auto v = GLUON_TRY(st.read_view(std::chrono::seconds(5)));
            answer.append(reinterpret_cast<const char*>(v.data()), v.size());
            st.consume(v.size());
        }
        std::printf("%s\n", answer.c_str());
        GLUON_TRY(st.close());
    }
    auto c = s.counters();
    std::printf("%llu messages, %llu bytes sent; %llu wake-ups sent\n", (unsigned long long)c.messages_sent,
                (unsigned long long)c.bytes_sent, (unsigned long long)c.polls_sent);
    return s.close();
}

int usage() {
    std::fprintf(stderr, "usage: ipc_echo [server PATH | client PATH TEXT...]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "both";
    if ((mode == "server" && argc != 3) || (mode == "client" && argc < 4) ||
        (mode != "server" && mode != "client" && argc != 1))
        return usage();
    std::string path = argc > 2 ? argv[2] : "@gluon-ipc-echo-" + std::to_string(::getpid());
    auto addr = path[0] == '@' ? net::address::unix_abstract(path.substr(1)) : net::address::unix_path(path);
    if (!addr) {  // empty, or too long for a socket address
        std::fprintf(stderr, "ipc_echo: bad PATH '%s': %s\n", path.c_str(), addr.error().message().c_str());
        return usage();
    }
    auto r = run({}, [&]() -> result<void> {
        if (mode == "client") return client(*addr, argc - 3, argv + 3);
        ipc::listener l = GLUON_TRY(ipc::listener::listen(*addr, {}, true));
        if (mode == "server") return serve(l, -1);
        fiber srv = GLUON_TRY(spawn([&] { (void)serve(l, 1); }));
        char hello[] = "hello", shm[] = "over shared memory";
        char* texts[] = {hello, shm};
        GLUON_TRY(client(*addr, 2, texts));
        return srv.join();
    });
    if (!r) {
        std::fprintf(stderr, "ipc_echo: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}
