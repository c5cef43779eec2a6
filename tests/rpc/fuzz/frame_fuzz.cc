// libFuzzer target: a byte stream of native RPC frames as a connection's reader takes them:
// each header checked, each payload decoded into a message (nested messages, strings, arrays,
// byte buffers, one received into a small caller buffer). A payload that decodes must encode
// back to exactly its bytes.
#include "gluon/rpc/native/message.h"
#include "rpc/native/wire.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <system_error>
#include <vector>

// result<T>::value() on an error (defined in gluon_common, not linked here): a bug.
namespace gluon::detail {
[[noreturn]] void value_of_failed_result(int, const std::error_category&) noexcept {
    __builtin_trap();
}
} // namespace gluon::detail

namespace {

using namespace gluon::rpc;

struct pt {
    int32_t x, y;
};
struct inner {
    std::string name;
    std::vector<uint32_t> values;
    GLUON_RPC_FIELDS(name, values)
};
struct outer {
    uint8_t flag = 0;
    pt at{};
    inner in;
    std::vector<pt> path;
    bytes blob;
    inner second;
    GLUON_RPC_FIELDS(flag, at, in, path, blob, second)
};
struct small_rx {
    uint64_t seq = 0;
    bytes data;
    GLUON_RPC_FIELDS(seq, data)
};

template <typename M> void round_trip(std::span<const uint8_t> payload, M& m) {
    auto e = decode(payload, m);
    if (e) {
        if (e != errc::malformed_frame && e != errc::buffer_too_small) __builtin_trap();
        return;
    }
    std::vector<uint8_t> again(fixed_size<M>());
    iov_list var;
    size_t n = encode(m, again.data(), var);
    for (size_t i = 0; i < var.size(); ++i) {
        auto* p = static_cast<const uint8_t*>(var[i].iov_base);
        again.insert(again.end(), p, p + var[i].iov_len);
    }
    if (again.size() != payload.size() || n + fixed_size<M>() != payload.size() ||
        std::memcmp(again.data(), payload.data(), payload.size()) != 0)
        __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> in(data, size);
    uint8_t rx[64];
    while (in.size() >= wire::k_header_size) {
        wire::header h = wire::get(in.data());
        in = in.subspan(wire::k_header_size);
        if (wire::check(h, 1 << 20)) break; // the connection would close (or skip: same here)
        if (h.length > in.size()) break;
        auto payload = in.subspan(0, h.length);
        in = in.subspan(h.length);
        if (h.type == wire::kind::cancel) continue;
        switch (h.method % 3) {
        case 0: {
            outer m;
            round_trip(payload, m);
            break;
        }
        case 1: {
            small_rx m;
            m.data.receive_into(rx, sizeof rx);
            round_trip(payload, m);
            break;
        }
        default: {
            inner m;
            round_trip(payload, m);
            break;
        }
        }
        (void)wire::error_of_status(h.schema);
    }
    return 0;
}
