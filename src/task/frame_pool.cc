#include "gluon/task/frame_pool.h"

#include <new>

namespace gluon::task_detail {

thread_local constinit frame_pool* t_frames = nullptr;

namespace {

thread_local constinit bool t_pool_gone = false;  // the thread is exiting: no new pool

// Owns the calling thread's pool and gives its cached blocks back to the heap at thread exit.
struct pool_owner {
    frame_pool pool;
    pool_owner() noexcept { t_frames = &pool; }
    ~pool_owner() {
        t_frames = nullptr;
        t_pool_gone = true;
        for (size_t c = 1; c < k_frame_classes; ++c)
            while (void* f = pool.free[c]) {
                pool.free[c] = *static_cast<void**>(f);
                ::operator delete(f, c * k_frame_step);
            }
    }
};

void ensure_pool() noexcept {
    if (t_pool_gone) return;
    thread_local pool_owner owner;
    (void)owner;
}

}  // namespace

void* frame_alloc_slow(size_t n) {
    const size_t c = frame_class(n);
    if (c >= k_frame_classes) return ::operator new(n);
    if (!t_frames) ensure_pool();
    return ::operator new(c * k_frame_step);  // a whole class: any frame of the class fits
}

void frame_free_slow(void* f, size_t n) noexcept {
    const size_t c = frame_class(n);
    if (c >= k_frame_classes) return ::operator delete(f, n);
    if (!t_frames) {
        ensure_pool();
        if (t_frames) return frame_free(f, n);  // now pooled
    }
    ::operator delete(f, c * k_frame_step);
}

}  // namespace gluon::task_detail
