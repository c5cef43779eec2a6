// Spawning tasks on vCPUs. A spawned task runs on its vCPU's task runner (one fiber per vCPU
// that resumes ready tasks in turn) until it ends; its join_handle gives its value to a task
// (co_await h), a fiber or a plain thread (h.join()), or lets it run on alone (detach, or
// dropping the handle).
#pragma once

#include <atomic>
#include <coroutine>
#include <new>
#include <stop_token>
#include <system_error>
#include <utility>

#include "gluon/common/intrusive_list.h"
#include "gluon/common/result.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/task/task.h"

namespace gluon {

struct spawn_options {
    /// The vCPU to run on; empty: the calling one. It must not have ended (see post_call).
    vcpu_handle on;
    /// Cancels the task (see task.h) when stop is requested, from any thread. A token whose
    /// stop was requested before the spawn starts the task cancelled: its first operation
    /// fails with ECANCELED.
    std::stop_token stop;
};

namespace task_detail {

struct task_sched;

/// Moves the result of the ended task h into *out (a value_store<T>, constructed there).
using result_mover = void (*)(std::coroutine_handle<> h, void* out) noexcept;

/// Who waits for a spawned task: a task (h, on the vCPU of `sched`) or a fiber or thread
/// (`signal`, a gluon::oneshot).
///
/// A task's frame is destroyed on its own vCPU: its parameters (a pooled_buffer goes back to
/// its engine's pool) must not be cleaned up on another thread. A joiner on another thread is
/// handed the result instead: before waking it, the task's vCPU moves the result into `out`
/// and destroys the frame (the root's h is empty then), unless the joiner set `drop` first (a
/// join that timed out): the result then goes with the frame. `moved` says which.
struct joiner {
    // The hand-over fields are set only by the joiners that may need them: a task awaiting a
    // task of its own vCPU writes nothing more than before.
    joiner() noexcept {}
    std::coroutine_handle<> h;
    task_sched* sched = nullptr;
    void* signal = nullptr;
    vcpu_call wake;  // resumes h from another vCPU
    result_mover move_result;
    void* out;
    bool drop;   // written through std::atomic_ref: the joiner's thread, read on the task's vCPU
    bool moved;  // written on the task's vCPU before the wake
};

/// Room for a result handed over to a joiner (joiner::out); constructed only by the hand-over.
template <typename T>
struct result_slot {
    result_slot() noexcept {}  // no zeroing: an awaiter carries one it rarely uses
    alignas(value_store<T>) unsigned char bytes[sizeof(value_store<T>)];
    value_store<T>* get() noexcept {
        return std::launder(reinterpret_cast<value_store<T>*>(bytes));
    }
};

template <typename T>
void move_result(std::coroutine_handle<> h, void* out) noexcept {
    value_store<T>& from = promise<T>::handle_type_of(h).promise();
    auto* to = new (out) value_store<T>;
    if constexpr (std::is_void_v<T>) {
        to->error = std::move(from.error);
    } else if (from.st == value_store<T>::state::error) {
        new (&to->error) std::exception_ptr(std::move(from.error));
        to->st = value_store<T>::state::error;
    } else if (from.st == value_store<T>::state::value) {
        try {
            to->return_value(std::move(from.value));
        } catch (...) {  // a throwing move: the joiner gets its exception
            to->unhandled_exception();
        }
    }
}

struct stop_link;

/// A spawned task's state, owned by its vCPU while it runs and by its join_handle after.
struct root_base {
    task_ctx ctx;
    std::coroutine_handle<> h;
    vcpu_handle target;
    task_sched* home = nullptr;
    list_hook live_hook;
    joiner* j = nullptr;
    joiner* posted_joiner = nullptr;  // from another thread, for ctl_call
    root_base* next_finished = nullptr;
    bool done = false;
    bool detached = false;
    std::atomic<uint8_t> cancel_state{0};  // see root_free (spawn.cc)
    int start_error = 0;  // its vCPU could not start it: done, no frame (h is empty)
    stop_link* stop = nullptr;
    vcpu_call start_call;   // spawn on another vCPU
    vcpu_call ctl_call;     // join or detach from another thread
    vcpu_call cancel_call;  // cancel from another thread

    static void* operator new(size_t n) { return frame_alloc(n); }
    static void operator delete(void* p, size_t n) noexcept { frame_free(p, n); }
};

/// Spawns the coroutine h (whose promise is p). Errors: EPERM (no target and the calling thread
/// is not a vCPU), those of starting the calling vCPU's task runner when it is the target (see
/// co_spawn). On another vCPU a failed start ends the root with start_error.
result<root_base*> spawn_root(std::coroutine_handle<> h, promise_base& p, const spawn_options& o) noexcept;
/// spawn_root with no options: on the calling vCPU, no stop token.
result<root_base*> spawn_root_here(std::coroutine_handle<> h, promise_base& p) noexcept;
/// Lets the task run on alone (it frees itself when it ends).
void root_detach(root_base* r) noexcept;
/// Requests cancellation; any thread.
void root_cancel(root_base* r) noexcept;
/// Frees an ended task (its frame and state); any thread.
void root_free(root_base* r) noexcept;
/// Blocks the calling fiber or thread until the task has ended. j: a joiner with move_result
/// and out set (the result may be handed over, see joiner).
void root_wait(root_base* r, joiner& j) noexcept;
/// root_wait up to the deadline; if the task has not ended by then (or the waiting fiber is
/// interrupted, when interruptible), cancels it and waits for its end all the same; its result
/// is then dropped, on its vCPU. Returns 0 or -ETIMEDOUT / -ECANCELED; 0 also when the task's
/// vCPU handed the result over (j.moved) before it learnt of the timeout: the task had ended
/// before it was cancelled.
long root_wait_until(root_base* r, joiner& j, deadline_t deadline,
                     bool interruptible = true) noexcept;
/// For a task j.h awaiting r: what its suspension transfers to: j.h itself if r has ended,
/// else (j is then registered) r when it has not run yet and is started at once, or the no-op
/// coroutine. move and out: where the result goes if it is handed over (see joiner).
std::coroutine_handle<> root_await(root_base* r, joiner& j, result_mover move, void* out) noexcept;
/// The awaiting task was cancelled: pass it on to the task it awaits.
void root_forward_cancel(root_base* r, int err) noexcept;

}  // namespace task_detail

/// A spawned task. Move-only; dropping a handle that was not joined detaches the task.
/// A handle may outlive its task's vCPU (kept after its runtime stopped): that vCPU's fini
/// cancelled the task and ran it to its end, and the handle's calls then act on what it left
/// (join gives the task's value, or ESHUTDOWN as for a task never started), the frame being
/// destroyed on the calling thread.
template <typename T>
class [[nodiscard]] join_handle {
public:
    join_handle() noexcept = default;
    explicit join_handle(task_detail::root_base* r) noexcept : r_(r) {}
    join_handle(join_handle&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
    join_handle& operator=(join_handle&& o) noexcept {
        if (this != &o) {
            reset();
            r_ = std::exchange(o.r_, nullptr);
        }
        return *this;
    }
    ~join_handle() { reset(); }

    bool joinable() const noexcept { return r_ != nullptr; }

    /// From a fiber or a plain thread: waits for the task to end and returns its value (or
    /// rethrows its exception). A task its vCPU could not start (co_spawn) gives its error: as
    /// the value of a task<result<U>>, else thrown as std::system_error. The handle is then
    /// empty. Calling it on an empty handle is undefined.
    T join() {
        task_detail::result_slot<T> out;
        task_detail::joiner j = remote_joiner(out);
        task_detail::root_wait(r_, j);
        return take(handed_over(j, out));
    }
    /// join() with a timeout: if the task has not ended within `timeout`, cancels it (task.h,
    /// cancellation), waits for its end all the same (nothing of it runs on after the call) and
    /// fails; its value, if it produced one regardless, is dropped (on the task's vCPU). The
    /// handle is empty after. A task that ends as the timeout expires, before the cancellation
    /// reaches it, may be reported either way. Errors: ETIMEDOUT, ECANCELED (the waiting fiber
    /// was interrupted), those of a task its vCPU could not start (co_spawn).
    result<T> join_for(duration timeout) {
        task_detail::result_slot<T> out;
        task_detail::joiner j = remote_joiner(out);
        const long r = task_detail::root_wait_until(r_, j, deadline_after(timeout));
        if (r < 0) {
            drop();
            return errno_error(static_cast<int>(-r));
        }
        return take_result(handed_over(j, out));
    }
    /// Lets the task run on alone.
    void detach() noexcept {
        if (r_) task_detail::root_detach(std::exchange(r_, nullptr));
    }
    /// Asks the task to stop (task.h, cancellation); it still has to be joined or detached.
    void cancel() noexcept {
        if (r_) task_detail::root_cancel(r_);
    }

    struct awaiter : task_detail::cancel_hook {
        join_handle* self;
        task_detail::task_ctx* ctx = nullptr;
        task_detail::joiner j;
        task_detail::result_slot<T> out;  // the result, if handed over from another vCPU
        bool await_ready() const noexcept { return false; }
        template <typename P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            const std::coroutine_handle<> next = link(h);
            // Ended already: h goes on, through the runner's queue when deep in its stack, as
            // every transfer (task.h): where transfers nest frames, a loop joining tasks that
            // have ended would nest one per join.
            return next == h ? task_detail::transfer(h) : next;
        }
        // Registers h as the joiner and its cancel hook; returns what h's suspension transfers
        // to, h itself if the task has ended (nothing is registered then).
        template <typename P>
        std::coroutine_handle<> link(std::coroutine_handle<P> h) noexcept {
            j.h = h;
            const std::coroutine_handle<> next =
                task_detail::root_await(self->r_, j, &task_detail::move_result<T>, &out);
            if (next == h) return h;  // ended already
            ctx = task_detail::ctx_of(h);
            if (ctx) {
                fn = [](cancel_hook* c, int err) noexcept {
                    task_detail::root_forward_cancel(static_cast<awaiter*>(c)->self->r_, err);
                };
                ctx->hook = this;
                if (ctx->cancelled) task_detail::root_forward_cancel(self->r_, ctx->cancelled);
            }
            return next;
        }
        T await_resume() {
            if (ctx) ctx->hook = nullptr;
            return self->take(self->handed_over(j, out));
        }
    };
    /// From a task: suspends until the spawned task ends, then gives its value (or rethrows),
    /// or the error of a task its vCPU could not start, as join() does. Cancelling the
    /// awaiting task cancels the spawned one, and still waits for its end.
    awaiter operator co_await() noexcept { return awaiter{{}, this}; }

    struct timed_awaiter : awaiter {
        deadline_t deadline;
        bool timed_out = false;
        vcpu_timer timer;
        template <typename P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            const std::coroutine_handle<> next = this->link(h);
            if (next == h) return task_detail::transfer(h);  // ended already, as awaiter's
            (void)timer.arm(deadline, [](vcpu_timer* t) noexcept {
                auto* a = reinterpret_cast<timed_awaiter*>(reinterpret_cast<char*>(t) - offsetof(timed_awaiter, timer));
                a->timed_out = true;
                // A task on another vCPU drops its result with its frame there (see joiner).
                std::atomic_ref<bool>(a->j.drop).store(true, std::memory_order_release);
                task_detail::root_cancel(a->self->r_);
            });
            return next;
        }
        result<T> await_resume() {
            timer.disarm();
            if (this->ctx) this->ctx->hook = nullptr;
            // Handed over before its vCPU learnt of the timeout: it ended before the cancel.
            task_detail::value_store<T>* moved = this->self->handed_over(this->j, this->out);
            if (timed_out && !moved) {
                this->self->drop();
                return errno_error(ETIMEDOUT);
            }
            return this->self->take_result(moved);
        }
    };
    /// From a task: co_await with a timeout, as join_for (a task that ends as the timeout
    /// expires may be reported either way). Cancelling the awaiting task cancels the spawned
    /// one as co_await does. Errors: ETIMEDOUT, those of a task its vCPU could not start
    /// (co_spawn).
    timed_awaiter join_for_async(duration timeout) noexcept {
        return timed_awaiter{awaiter{{}, this}, deadline_after(timeout)};
    }

private:
    // A joiner that may be on another thread than the task's vCPU, its result going to out.
    static task_detail::joiner remote_joiner(task_detail::result_slot<T>& out) noexcept {
        task_detail::joiner j;
        j.move_result = &task_detail::move_result<T>;
        j.out = &out;
        j.drop = false;
        j.moved = false;
        return j;
    }
    // The result, if the task's vCPU handed it over to j (its frame is gone then); nullptr if it
    // is in the frame (or was dropped with it).
    task_detail::value_store<T>* handed_over(task_detail::joiner& j,
                                             task_detail::result_slot<T>& out) noexcept {
        if (r_->h) [[likely]]
            return nullptr;
        return j.moved ? out.get() : nullptr;
    }
    // The ended task's value (or its exception rethrown), from `moved` if handed over, else from
    // its frame, else (no frame: never started) its start's error; frees the task.
    T take(task_detail::value_store<T>* moved = nullptr) {
        struct release {
            task_detail::root_base* r;
            task_detail::value_store<T>* moved;
            ~release() {
                if (moved) moved->~value_store();
                task_detail::root_free(r);
            }
        } g{std::exchange(r_, nullptr), moved};
        if (moved) [[unlikely]]
            return moved->take();
        if (!g.r->h) [[unlikely]]
            return not_started(g.r->start_error);
        auto h = task_detail::promise<T>::handle_type_of(g.r->h);
        return h.promise().take();
    }
    // What join() and co_await give for a task never started: a result<U> carries the error;
    // any other T has no room for it, and it is thrown, as the task's own exception would be.
    static T not_started(int err) {
        if constexpr (detail::is_result<T>::value)
            return T(errno_error(err));
        else
            throw std::system_error(errno_code(err), "gluon: the task's vCPU could not start it");
    }
    // take() as a result<T> (a void task's: an empty one); a task never started gives its
    // start's error.
    result<T> take_result(task_detail::value_store<T>* moved = nullptr) {
        if (!moved && !r_->h) [[unlikely]] {
            const int err = r_->start_error;
            drop();
            return errno_error(err);
        }
        if constexpr (std::is_void_v<T>) {
            take(moved);
            return {};
        } else {
            return take(moved);
        }
    }
    // Frees the ended task without its value (an exception it ended with is dropped too): the
    // value goes with the frame, on the task's vCPU or wherever the frame still is (a join on
    // that vCPU).
    void drop() noexcept { task_detail::root_free(std::exchange(r_, nullptr)); }
    void reset() noexcept { detach(); }
    task_detail::root_base* r_ = nullptr;
};

/// Starts t on a vCPU (opts.on, or the calling one) and returns its handle. Allocates nothing
/// but the task's state from the frame pool. A vCPU starts its task runner (a fiber) on its
/// first task; on the calling vCPU a runner that cannot be started fails the spawn, on another
/// the task ends there without running and its join gets the error (see join()). Errors: EPERM
/// (no vCPU given and the calling thread is not one), ENOMEM (no stack for the runner),
/// ESHUTDOWN (the vCPU is in the last rounds of its fini and makes no more fibers).
template <typename T>
result<join_handle<T>> co_spawn(task<T> t, const spawn_options& opts) noexcept {
    auto h = t.release();
    auto r = task_detail::spawn_root(h, h.promise(), opts);
    if (!r) {
        h.destroy();
        return unexpected(r.error());
    }
    return join_handle<T>(*r);
}

/// co_spawn on the calling vCPU. Errors: as co_spawn.
template <typename T>
result<join_handle<T>> co_spawn(task<T> t) noexcept {
    auto h = t.release();
    auto r = task_detail::spawn_root_here(h, h.promise());
    if (!r) [[unlikely]] {
        h.destroy();
        return unexpected(r.error());
    }
    return join_handle<T>(*r);
}

/// Runs t on the calling vCPU and parks the calling fiber until it ends; returns its value
/// (a result<U> is passed on as it is). Rethrows its exception. Errors: EPERM (not a vCPU).
template <typename T>
typename detail::run_result<T>::type block_on(task<T> t) {
    auto h = GLUON_TRY(co_spawn(std::move(t)));
    if constexpr (std::is_void_v<T>) {
        h.join();
        return {};
    } else {
        return h.join();
    }
}

}  // namespace gluon
