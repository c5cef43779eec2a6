// Work handed to a vCPU's event loop, and timers on it, for code that runs on a vCPU without
// being a fiber (C++20 tasks, callbacks). A posted call and a timer run their function on the
// vCPU's thread from its event loop: they must not block, and they must not throw.
#pragma once

#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/vcpu.h"

namespace gluon {

/// A call posted to a vCPU. It must stay alive and unmoved until fn has run.
struct vcpu_call {
    void (*fn)(vcpu_call* self) noexcept = nullptr;
    alignas(void*) unsigned char node_[2 * sizeof(void*)];  // the runtime's queue link
};

/// Runs c.fn(&c) on vCPU v's thread, from its event loop; any thread may post, and it wakes
/// the vCPU if it sleeps. Errors: EINVAL (empty handle). The vCPU must outlive the call: one
/// posted while it finishes runs in a round of fini, unless fini has done its last (see fini).
result<void> post_call(vcpu_handle v, vcpu_call& c) noexcept;
/// post_call to a vCPU that may have ended: posts c as post_call does while v runs or is in
/// its fini (a round of which runs c), and fails, posting nothing, once fini has unregistered
/// v. It takes a process-wide lock: for calls that may legitimately come late, not for every
/// wake-up. Errors: EINVAL (empty handle), ESRCH (v has ended).
result<void> post_call_if_alive(vcpu_handle v, vcpu_call& c) noexcept;

/// A one-shot timer on the calling vCPU's timer heap. Arm and disarm it on that vCPU only: once
/// it has fired or been disarmed, it may be armed on another.
class vcpu_timer {
public:
    using fn_t = void (*)(vcpu_timer* self) noexcept;
    vcpu_timer() noexcept = default;
    vcpu_timer(const vcpu_timer&) = delete;
    vcpu_timer& operator=(const vcpu_timer&) = delete;
    /// Disarms it if armed (see disarm()).
    ~vcpu_timer() { disarm(); }

    /// Calls fn(this) on this vCPU once `deadline` has passed (never inline). Re-arming an armed
    /// timer moves it. Errors: EPERM (not on a vCPU), EXDEV (armed on another vCPU, which is
    /// misuse: it stays armed there).
    result<void> arm(deadline_t deadline, fn_t fn) noexcept;
    /// Stops it if it has not fired; a no-op otherwise. Called on another thread than its vCPU
    /// (also by the destructor) it is misuse, reported; the timer is then taken off its vCPU's
    /// heap by that vCPU while the caller waits (spinning), so it never fires after this returns.
    void disarm() noexcept {
        if (armed()) disarm_slow();
    }
    bool armed() const noexcept { return armed_; }

private:
    void disarm_slow() noexcept;
    alignas(8) unsigned char node_[3 * sizeof(int64_t)];  // the runtime's timer node
    fn_t fn_ = nullptr;
    void* owner_ = nullptr;
    bool armed_ = false;
};

}  // namespace gluon
