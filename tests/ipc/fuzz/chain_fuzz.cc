// libFuzzer target: a buffer region whose bytes the peer controls. The input overwrites a
// formatted region (from its start); the checks must refuse or bound whatever it holds: attach,
// then follow chains from offsets the input names, then pop and push, all inside the mapping
// (ASan sees any read or write outside the region's exact-size allocation).
#include <cstddef>
#include <cstdint>
#include <system_error>
#include <cstring>
#include <vector>

#include "ipc/region.h"

// result<T>::value() on an error (defined in gluon_common, not linked here): a bug.
namespace gluon::detail {
[[noreturn]] void value_of_failed_result(int, const std::error_category&) noexcept { __builtin_trap(); }
}  // namespace gluon::detail

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gluon::ipc;
    constexpr size_t k_len = 64 << 10;
    if (size < 8) return 0;
    std::vector<uint8_t> mem(k_len);
    const slice_class classes[] = {{252, 50}, {1020, 50}};
    if (!buffer_region::format(mem.data(), mem.size(), classes)) __builtin_trap();
    uint32_t starts[2];
    std::memcpy(starts, data, 8);
    std::memcpy(mem.data(), data + 8, std::min(size - 8, k_len));
    auto r = buffer_region::attach(mem.data(), mem.size());
    if (!r) return 0;
    std::vector<buffer_region::piece> chain;
    for (uint32_t s : starts) {
        if (r->read_chain(s, chain)) {
            for (const auto& p : chain) {
                if (p.data < mem.data() || p.data + p.size > mem.data() + mem.size()) __builtin_trap();
                volatile uint8_t sink = p.size ? p.data[p.size - 1] : 0;
                (void)sink;
            }
        }
    }
    for (size_t i = 0; i < r->lists(); ++i) {
        auto s = r->pop(i);
        if (s && *s != buffer_region::k_none) (void)r->push(*s);
    }
    return 0;
}
