// The per-vCPU task runner: a queue of ready coroutines and the fiber that resumes them. Private
// to the task module.
#pragma once

#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/waiter.h"
#include "gluon/task/spawn.h"

namespace gluon::task_detail {

/// A FIFO of coroutine handles in a power-of-two ring that grows (allocation-free once warm).
class ready_ring {
public:
    bool empty() const noexcept { return head_ == tail_; }
    void push(std::coroutine_handle<> h) {
        if (tail_ - head_ == cap_) grow();
        buf_[tail_++ & (cap_ - 1)] = h;
    }
    std::coroutine_handle<> pop() noexcept { return buf_[head_++ & (cap_ - 1)]; }
    /// Takes h back if it is the last handle pushed.
    bool pop_back_if(std::coroutine_handle<> h) noexcept {
        if (empty() || buf_[(tail_ - 1) & (cap_ - 1)] != h) return false;
        --tail_;
        return true;
    }

private:
    void grow();
    std::unique_ptr<std::coroutine_handle<>[]> buf_;
    size_t cap_ = 0;
    size_t head_ = 0, tail_ = 0;
};

using live_list = intrusive_list<root_base, &root_base::live_hook>;

struct task_sched {
    vcpu_handle vcpu;
    int vcpu_index = -1;
    task_sched* next_registered = nullptr;  // gluon_task_sched_list (tools/gluon-gdb.py)
    ready_ring ready;
    live_list live;
    // The runner parks on `w` when nothing is ready; schedule() wakes it.
    prim_lock lk;
    waiter_list q;
    waiter* w = nullptr;
    bool parked = false;
    root_base* finished = nullptr;  // ended roots whose joiner or free is left to the runner
    bool stopping = false;
    engine::engine* eng = nullptr;
    // Engine operations submitted since the runner last looked for completions, and how many
    // of its recent looks before parking found none (see run() in sched.cc).
    unsigned submitted = 0;
    unsigned eager_misses = 0;
    unsigned eager_probe = 0;  // the vCPU is shutting down: tasks are cancelled, no new ones run
    uintptr_t stack_base = 0;  // the runner's frame, from which it resumes every task
    // Tasks resumed, from the ready queue or by a direct start (take_spawned); every 64th turn
    // of the runner gives fibers and the event loop a turn.
    unsigned turns = 0;

    void schedule(std::coroutine_handle<> h) {
        ready.push(h);
        if (parked) [[unlikely]]
            wake_runner();
    }
    void wake_runner() noexcept;

    /// A task awaits h, the task it has just spawned here and that has not run yet: true if
    /// h is taken off the ready queue, for the awaiter to transfer to it at once (the queue's
    /// round trip through the runner saved), unless this turn is the one that lets fibers run.
    bool take_spawned(std::coroutine_handle<> h) noexcept {
        if (((turns + 1) & 63) == 0 || !ready.pop_back_if(h)) return false;
        ++turns;
        return true;
    }
};

extern thread_local constinit task_sched* t_sched;

/// Completes the roots that ended during the last resume (spawn.cc).
void finish_roots(task_sched* s) noexcept;

/// The calling vCPU's task scheduler, started on first use; nullptr if it cannot be, with
/// *err (if given) set to why: EPERM (the thread is not a vCPU), the runner's fiber's creation
/// error (ENOMEM; ESHUTDOWN in the last rounds of the vCPU's fini).
task_sched* sched_here(int* err = nullptr) noexcept;

}  // namespace gluon::task_detail
