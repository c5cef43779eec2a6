// The buffers that recv_pooled draws from: one mapping of engine::pooled_buffer_count buffers
// of engine::pooled_buffer_size bytes, each named by its index, mapped at the first use.
// Private to the engines: io_uring hands them to the kernel's provided-buffer ring, epoll (and
// io_uring without buffer rings) takes them from the free list here.
#pragma once

#include <cstdint>
#include <vector>

#include "gluon/engine/engine.h"

namespace gluon::engine::detail {

class buffer_pool {
public:
    static constexpr unsigned k_count = engine::pooled_buffer_count;
    static constexpr size_t k_size = engine::pooled_buffer_size;

    buffer_pool() = default;
    buffer_pool(const buffer_pool&) = delete;
    ~buffer_pool();

    /// Maps the buffers and fills the free list, once. Returns 0 or -errno.
    long init() noexcept;
    bool ready() const noexcept { return base_ != nullptr; }
    char* at(unsigned id) const noexcept { return base_ + size_t{id} * k_size; }
    /// The index of a buffer of this pool, or -1 for any other pointer.
    long id_of(const void* p) const noexcept;

    /// A free buffer's index from the free list, or -1 when every buffer is out.
    long take() noexcept;
    void put(unsigned id) noexcept { free_.push_back(static_cast<uint16_t>(id)); }

    unsigned out = 0;  // handed to callers and not given back yet

private:
    char* base_ = nullptr;
    std::vector<uint16_t> free_;
};

}  // namespace gluon::engine::detail
