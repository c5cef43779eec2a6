#include "gluon/runtime/fiber_local.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gluon/common/lazy.h"
#include "fiber_local_impl.h"
#include "scheduler.h"

namespace gluon::detail {
namespace {

// A key is its slot's index (low 32 bits) and the slot's generation (high 32 bits). Released
// slots are reused only by keys of the same destructor, so a fiber's stale value of a slot is
// always destroyed with the right one, whichever generation set it.
constexpr size_t k_index_mask = 0xffffffff;
size_t index_of(size_t key) noexcept { return key & k_index_mask; }
uint32_t gen_of(size_t key) noexcept { return static_cast<uint32_t>(key >> 32); }

using dtor_fn = void (*)(void*);

struct key_registry {
    std::mutex mu;
    std::vector<dtor_fn> dtors;      // per slot, fixed for its life
    std::vector<uint32_t> gens;      // per slot, its current key's generation
    std::unordered_map<dtor_fn, std::vector<size_t>> free;  // released slots, by destructor
};
constinit lazy_ptr<key_registry> g_registry;
key_registry& registry() {
    return g_registry.get([] { return new key_registry; });
}
dtor_fn dtor_of(size_t index) {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    return index < r.dtors.size() ? r.dtors[index] : nullptr;
}

// Destroys every value of a fiber's (or thread's) slots, one at a time in the live array, as
// pthread keys do: each slot is emptied just before its value's destructor runs, so a
// destructor sees the fiber's values not destroyed yet (a buffer flushing into the fiber's
// counters finds them), and one it uses that is gone already is made anew, to be destroyed in
// the next round. A destructor may also set slots past the end, growing (moving) the array:
// it is read through `slots` and `size` on every step. At most 4 rounds (pthread keys'
// PTHREAD_DESTRUCTOR_ITERATIONS), then what destructors keep setting is dropped.
void destroy_all(fls_entry*& slots, size_t& size) noexcept {
    for (int round = 0; round < 4; ++round) {
        bool any = false;
        for (size_t k = 0; k < size; ++k) {
            void* value = std::exchange(slots[k].value, nullptr);
            if (!value) continue;
            any = true;
            if (auto d = dtor_of(k)) d(value);
        }
        if (!any) break;
    }
    std::free(std::exchange(slots, nullptr));
    size = 0;
}

// Slots of a plain thread (or a vCPU's main fiber, which is the thread itself).
struct thread_slots {
    fls_entry* slots = nullptr;
    size_t size = 0;
    ~thread_slots() { destroy_all(slots, size); }
};
thread_local thread_slots t_slots;

void*& slot_in(fls_entry*& slots, size_t& size, size_t key) noexcept {
    const size_t i = index_of(key);
    if (i >= size) {
        size_t n = std::max<size_t>(8, (i + 1) * 2);
        auto* grown = static_cast<fls_entry*>(std::realloc(slots, n * sizeof(fls_entry)));
        if (!grown) std::abort();  // out of memory for a handful of pointers
        std::memset(grown + size, 0, (n - size) * sizeof(fls_entry));  // generation 0, no value
        slots = grown;
        size = n;
    }
    fls_entry& e = slots[i];
    if (e.gen == gen_of(key)) [[likely]]
        return e.value;
    // The slot holds what this fiber set through a released key of the slot: not this key's.
    void* stale = std::exchange(e.value, nullptr);
    e.gen = gen_of(key);
    if (stale)
        if (auto d = dtor_of(i)) {
            d(stale);
            // The destructor may have used fiber-locals, growing (moving) the array.
            return slot_in(slots, size, key);
        }
    return e.value;
}

}  // namespace

size_t fls_new_key(dtor_fn dtor) noexcept {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    if (auto it = r.free.find(dtor); it != r.free.end() && !it->second.empty()) {
        const size_t i = it->second.back();
        it->second.pop_back();
        return i | static_cast<size_t>(++r.gens[i]) << 32;
    }
    r.dtors.push_back(dtor);
    r.gens.push_back(0);
    return r.dtors.size() - 1;
}

void fls_release_key(size_t key) noexcept {
    auto& r = registry();
    std::lock_guard lk(r.mu);
    const size_t i = index_of(key);
    // A slot whose generation would wrap is not reused: a fiber that has kept a value of its
    // first key all along would see it again.
    if (r.gens[i] != UINT32_MAX) r.free[r.dtors[i]].push_back(i);
}

void*& fls_slot(size_t key) noexcept {
    vcpu* v = cur_vcpu();
    if (!v || running(v)->is_main) return slot_in(t_slots.slots, t_slots.size, key);
    fiber_impl* f = running(v);
    return slot_in(f->fls, f->fls_size, key);
}

void fls_destroy(fiber_impl* f) noexcept { destroy_all(f->fls, f->fls_size); }

}  // namespace gluon::detail
