#include "gluon/runtime/prim_lock.h"

#include <linux/membarrier.h>

#include "gluon/common/lazy.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon {
namespace detail {
thread_local constinit uint32_t t_vcpu_tag = 0;
thread_local constinit biased_sections t_biased;

bool biasing_available() noexcept {
    static constinit lazy_flag registered;
    return registered.get([] { return sys::membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0; });
}
}  // namespace detail

using namespace detail;

void prim_lock::lock_slow() noexcept {
    uint32_t mode = mode_.load(std::memory_order_acquire);
    while (mode != k_shared) {
        if (mode == k_revoking) {  // someone else is revoking: wait for them to finish
            __builtin_ia32_pause();
            mode = mode_.load(std::memory_order_acquire);
            continue;
        }
        // mode is 0 (unclaimed) or another vCPU's tag: revoke it ourselves.
        if (!mode_.compare_exchange_weak(mode, k_revoking, std::memory_order_acq_rel)) continue;
        if (mode != 0) {
            // After this barrier, the owner either has its "inside" count visible to us, or
            // sees k_revoking when it re-reads the mode and does not enter.
            (void)sys::membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
            wait_biased_sections_of(mode, this);
        }
        mode_.store(k_shared, std::memory_order_release);
        mode = k_shared;
    }
    lk_.lock();
}

}  // namespace gluon
