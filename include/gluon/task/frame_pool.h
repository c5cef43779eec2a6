// Coroutine frames come from a per-thread pool of size classes (64-byte steps up to 4 KiB):
// a task's frame is taken and given back with a few instructions, never through the global
// heap once the pool is warm. A frame freed on another thread than the one that allocated it
// joins that thread's pool (frames of one class are interchangeable). Larger frames, and
// frames beyond a class's cache limit, go to the heap.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gluon::task_detail {

inline constexpr size_t k_frame_step = 64;
inline constexpr size_t k_frame_classes = 64;  // class c holds blocks of c * 64 bytes, c < 64
inline constexpr uint32_t k_frame_cache = 4096; // blocks kept per class

struct frame_pool {
    void* free[k_frame_classes] = {};
    uint32_t count[k_frame_classes] = {};
};

extern thread_local constinit frame_pool* t_frames;

void* frame_alloc_slow(size_t n);
void frame_free_slow(void* p, size_t n) noexcept;

inline size_t frame_class(size_t n) noexcept { return (n + k_frame_step - 1) / k_frame_step; }

/// Throws std::bad_alloc like operator new when the heap is exhausted (a coroutine's frame
/// allocation has no other way to fail).
inline void* frame_alloc(size_t n) {
    const size_t c = frame_class(n);
    frame_pool* p = t_frames;
    if (c < k_frame_classes && p) [[likely]] {
        if (void* f = p->free[c]) [[likely]] {
            p->free[c] = *static_cast<void**>(f);
            --p->count[c];
            return f;
        }
    }
    return frame_alloc_slow(n);
}

inline void frame_free(void* f, size_t n) noexcept {
    const size_t c = frame_class(n);
    frame_pool* p = t_frames;
    if (c < k_frame_classes && p && p->count[c] < k_frame_cache) [[likely]] {
        *static_cast<void**>(f) = p->free[c];
        p->free[c] = f;
        ++p->count[c];
        return;
    }
    frame_free_slow(f, n);
}

}  // namespace gluon::task_detail
