#include "gluon/runtime/fiber_local.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "gluon/common/lazy.h"
#include "fiber_local_impl.h"
#include "scheduler.h"

namespace gluon::detail {
namespace {

struct key_registry {
    std::mutex mu;
    std::vector<void (*)(void*)> dtors;
};
constinit lazy_ptr<key_registry> g_registry;
key_registry& registry() {
    return g_registry.get([] { return new key_registry; });
}
void (*dtor_of(size_t key))(void*) {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    return key < r.dtors.size() ? r.dtors[key] : nullptr;
}

void destroy_slots(void** slots, size_t n) noexcept {
    for (size_t k = 0; k < n; ++k)
        if (slots[k])
            if (auto d = dtor_of(k)) d(std::exchange(slots[k], nullptr));
    std::free(slots);
}

// Destroys every value of a fiber's (or thread's) slots. A value's destructor may use
// fiber-locals itself (a logger's buffer), which sets slots again and may grow, i.e. move, the
// array under the loop: each round takes the array away first, and values set by destructors
// are destroyed in the next round; at most 4 rounds (pthread keys' PTHREAD_DESTRUCTOR_ITERATIONS),
// then what destructors keep setting is dropped.
void destroy_all(void**& slots, size_t& size) noexcept {
    for (int round = 0; slots && round < 4; ++round) {
        void** s = std::exchange(slots, nullptr);
        destroy_slots(s, std::exchange(size, 0));
    }
    std::free(std::exchange(slots, nullptr));
    size = 0;
}

// Slots of a plain thread (or a vCPU's main fiber, which is the thread itself).
struct thread_slots {
    void** slots = nullptr;
    size_t size = 0;
    ~thread_slots() { destroy_all(slots, size); }
};
thread_local thread_slots t_slots;

void*& slot_in(void**& slots, size_t& size, size_t key) noexcept {
    if (key >= size) {
        size_t n = std::max<size_t>(8, (key + 1) * 2);
        auto* grown = static_cast<void**>(std::realloc(slots, n * sizeof(void*)));
        if (!grown) std::abort();  // out of memory for a handful of pointers
        std::memset(grown + size, 0, (n - size) * sizeof(void*));
        slots = grown;
        size = n;
    }
    return slots[key];
}

}  // namespace

size_t fls_new_key(void (*dtor)(void*)) noexcept {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    r.dtors.push_back(dtor);
    return r.dtors.size() - 1;
}

void*& fls_slot(size_t key) noexcept {
    vcpu* v = cur_vcpu();
    if (!v || running(v)->is_main) return slot_in(t_slots.slots, t_slots.size, key);
    fiber_impl* f = running(v);
    return slot_in(f->fls, f->fls_size, key);
}

void fls_destroy(fiber_impl* f) noexcept { destroy_all(f->fls, f->fls_size); }

}  // namespace gluon::detail
