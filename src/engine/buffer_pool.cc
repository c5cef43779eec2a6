#include "buffer_pool.h"

#include "gluon/sys/mm.h"

namespace gluon::engine::detail {

buffer_pool::~buffer_pool() {
    if (base_) (void)sys::munmap(base_, k_count * k_size);
}

long buffer_pool::init() noexcept {
    if (base_) return 0;
    void* p = sys::mmap(nullptr, k_count * k_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sys::is_error(p)) return reinterpret_cast<long>(p);
    base_ = static_cast<char*>(p);
    free_.reserve(k_count);
    // Lowest index on top: a lightly loaded engine keeps reusing the same few (warm) buffers.
    for (unsigned i = k_count; i-- > 0;) free_.push_back(static_cast<uint16_t>(i));
    return 0;
}

long buffer_pool::id_of(const void* p) const noexcept {
    auto* c = static_cast<const char*>(p);
    if (!base_ || c < base_ || c >= base_ + k_count * k_size) return -1;
    auto off = static_cast<size_t>(c - base_);
    return off % k_size ? -1 : static_cast<long>(off / k_size);
}

long buffer_pool::take() noexcept {
    if (free_.empty()) return -1;
    unsigned id = free_.back();
    free_.pop_back();
    return id;
}

}  // namespace gluon::engine::detail
