// The hot path of the scheduler, public only so that this_fiber::yield() can be inlined into the
// caller: an out-of-line yield has to save all six callee-saved registers on every call, which
// is most of a switch's cost. Not API: everything here may change without notice.
//
// The context switch is an inline asm statement that saves only rsp, rbp and the resume
// address; every other general-purpose and vector register is in the clobber list, so the
// compiler spills exactly what is live at the call site (often nothing, once inlined into a
// loop). Resuming goes through an indirect `jmp`, not `ret`: a `ret` to another stack than the
// matching `call` always mispredicts. Nothing is pushed, so the red zone is safe. MXCSR and the
// x87 control word are not switched (ADR 0002).
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>

#if !defined(__x86_64__)
#error "gluon's context switch is implemented for x86-64 only"
#endif

namespace gluon::detail {


struct cpu_context {
    void* sp = nullptr;
    void* ip = nullptr;
    void* bp = nullptr;
};

#if defined(__AVX512F__)
#define GLUON_AVX512_CLOBBERS                                                                   \
    , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6",  \
        "k7"
#else
#define GLUON_AVX512_CLOBBERS
#endif

/// Saves the current execution state into *from and continues at *to. Returns when some other
/// context switches back to *from.
__attribute__((always_inline)) inline void switch_context(cpu_context* from, cpu_context* to) {
    asm volatile(
        "leaq 1f(%%rip), %%rax\n\t"
        "movq %%rax, 8(%%rdi)\n\t"
        "movq %%rsp, 0(%%rdi)\n\t"
        "movq %%rbp, 16(%%rdi)\n\t"
        "movq 0(%%rsi), %%rsp\n\t"
        "movq 16(%%rsi), %%rbp\n\t"
        "jmpq *8(%%rsi)\n\t"
        "1:\n\t"
        : "+D"(from), "+S"(to)
        :
        : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
          "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)",
          "st(3)", "st(4)", "st(5)", "st(6)", "st(7)" GLUON_AVX512_CLOBBERS);
}


enum class fiber_state : uint8_t { ready, running, waiting, done };

struct fiber_impl;

/// The part of a fiber the switch and park paths touch (the first base of the runtime's fiber
/// record).
struct fiber_hot {
    cpu_context ctx;  // first: the gdb script reads it at offset 0
    fiber_hot* run_next = nullptr;
    fiber_state state = fiber_state::ready;
    std::atomic<bool> interrupt_pending{false};
    // Parking: what resume() passed, and how to abort the wait (timeout or interrupt; called
    // on the owner vCPU, must make the fiber resume).
    long wait_result = 0;
    void (*cancel)(fiber_impl* f, int err) = nullptr;
    void* cancel_ctx = nullptr;
};

/// FIFO of ready fibers: singly linked, two stores to push, one to pop.
class run_queue {
public:
    bool empty() const noexcept { return head_ == nullptr; }
    fiber_hot* front() const noexcept { return head_; }
    void push_back(fiber_hot& f) noexcept {
        f.run_next = nullptr;
        if (head_)
            tail_->run_next = &f;
        else
            head_ = &f;
        tail_ = &f;
    }
    fiber_hot* pop_front() noexcept {
        fiber_hot* f = head_;
        if (f) head_ = f->run_next;
        return f;
    }
    /// push_back(f) then pop_front() on a non-empty queue, with the one-element case (two
    /// fibers taking turns) as stores only: no load of a pointer that was just stored.
    fiber_hot* rotate(fiber_hot& f) noexcept {
        fiber_hot* h = head_;
        f.run_next = nullptr;
        if (h == tail_) {
            head_ = &f;
        } else {
            tail_->run_next = &f;
            head_ = h->run_next;
        }
        tail_ = &f;
        return h;
    }

private:
    fiber_hot* head_ = nullptr;
    fiber_hot* tail_ = nullptr;
};

/// The part of a vCPU the switch path touches (the first base of the runtime's vCPU record).
struct vcpu_hot {
    fiber_hot* current = nullptr;
    run_queue runq;
    uint32_t tick = 0;
};

/// The calling thread's vCPU, or nullptr. constinit: no TLS-init wrapper on access.
extern thread_local constinit vcpu_hot* t_hot;

/// this_fiber::yield() for every case the inline path does not take.
void yield_slow() noexcept;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GLUON_INLINE_YIELD 0  // the sanitizers' fiber annotations live in the slow path
#else
#define GLUON_INLINE_YIELD 1
#endif

/// Every k_poll_check_mask+1'th pick of a fiber goes through the slow path, which looks at the
/// clock and lets the event loop in if it has not run for a while (scheduler.h, maybe_poll).
inline constexpr uint32_t k_poll_check_mask = 255;

/// True if the inline paths may switch now: another fiber is ready and this is not that pick.
/// That pick is left to the slow path, whose maybe_poll() counts it (counting it here too
/// would skip the poll: busy fibers then starved timers and I/O for good).
inline bool can_switch_inline(vcpu_hot* v) noexcept {
    const uint32_t t = v->tick + 1;
    if (v->runq.empty() || (t & k_poll_check_mask) == 0) return false;
    v->tick = t;
    return true;
}

/// After a park: the wait is over, so its cancel hook goes; an -ECANCELED result consumed the
/// interrupt that caused it. Returns what resume() passed.
inline long finish_park(fiber_hot* f) noexcept {
    f->cancel = nullptr;
    const long r = f->wait_result;
    if (r == -ECANCELED) f->interrupt_pending.store(false, std::memory_order_relaxed);
    return r;
}

/// Switches from the running fiber cur (whose state the caller has set) to the next ready one.
__attribute__((always_inline)) inline void switch_to_next(vcpu_hot* v, fiber_hot* cur) noexcept {
    fiber_hot* next = v->runq.pop_front();
    v->current = next;
    next->state = fiber_state::running;
    switch_context(&cur->ctx, &next->ctx);
}

inline void yield() noexcept {
#if GLUON_INLINE_YIELD
    vcpu_hot* v = t_hot;
    if (v && can_switch_inline(v)) {
        fiber_hot* cur = v->current;
        cur->state = fiber_state::ready;
        fiber_hot* next = v->runq.rotate(*cur);
        v->current = next;
        next->state = fiber_state::running;
        switch_context(&cur->ctx, &next->ctx);
        return;
    }
#endif
    yield_slow();
}

}  // namespace gluon::detail
