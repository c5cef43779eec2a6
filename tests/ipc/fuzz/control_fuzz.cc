// libFuzzer target: a stream of shmipc control messages as they come off the socket, split and
// decoded as the session's reader does (header checks, then each body's decoder).
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <span>

#include "ipc/wire.h"

// result<T>::value() on an error (defined in gluon_common, not linked here): a bug.
namespace gluon::detail {
[[noreturn]] void value_of_failed_result(int, const std::error_category&) noexcept { __builtin_trap(); }
}  // namespace gluon::detail

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gluon::ipc;
    std::span<const uint8_t> buf(data, size);
    size_t at = 0;
    while (at < buf.size()) {
        wire::message m;
        auto n = wire::next_message(buf.subspan(at), 1u << 20, m);
        if (!n || *n == 0) break;
        switch (m.head.kind) {
        case wire::type::share_memory_by_file_path:
        case wire::type::share_memory_by_memfd: {
            wire::share_memory_paths p;
            if (wire::decode_paths(m.body, p) && (p.queue_path.empty() || p.buffer_path.empty())) __builtin_trap();
            break;
        }
        case wire::type::fallback_data: {
            auto f = wire::decode_fallback(m.body);
            if (f && f->payload.size() + 16 != m.head.length) __builtin_trap();
            break;
        }
        case wire::type::stream_close:
            if (m.body.size() != 4) __builtin_trap();
            break;
        case wire::type::hot_restart:
        case wire::type::hot_restart_ack:
            if (m.body.size() != 8) __builtin_trap();
            (void)wire::get_u64(m.body.data());
            break;
        default:
            if (!m.body.empty()) __builtin_trap();
        }
        at += *n;
    }
    return 0;
}
