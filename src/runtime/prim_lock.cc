#include "gluon/runtime/prim_lock.h"

#include "oneshot.h"
#include "scheduler.h"

namespace gluon {
namespace detail {
thread_local constinit uint32_t t_vcpu_tag = 0;
}  // namespace detail

using namespace detail;

void prim_lock::lock_slow(uint32_t tag) noexcept {
    uint32_t mode = mode_.load(std::memory_order_acquire);
    if (mode == 0 && tag != 0) {
        if (mode_.compare_exchange_strong(mode, tag, std::memory_order_acq_rel)) return;  // claimed
        if (mode == tag) return;
    }
    if (mode != k_shared) revoke(mode);
    lk_.lock();
}

void prim_lock::revoke(uint32_t owner) noexcept {
    while (owner != k_shared) {
        if (owner == 0) {  // unclaimed: nobody can be inside
            if (mode_.compare_exchange_strong(owner, k_shared, std::memory_order_acq_rel)) return;
            continue;
        }
        struct revocation : remote_node {
            prim_lock* self;
            oneshot* done;
        };
        oneshot done;
        revocation r;
        r.self = this;
        r.done = &done;
        r.run = [](vcpu*, remote_node* n) {
            auto* rv = static_cast<revocation*>(n);
            rv->self->mode_.store(k_shared, std::memory_order_release);
            rv->done->signal();
        };
        if (post_to_vcpu_tag(owner, &r)) {
            done.wait();
            return;
        }
        // The owner vCPU is gone, so nothing of it can be inside: take the lock over.
        if (mode_.compare_exchange_strong(owner, k_shared, std::memory_order_acq_rel)) return;
    }
}

}  // namespace gluon
