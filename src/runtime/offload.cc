// The offload pool: plain OS threads for calls that cannot be made asynchronous. Elastic: it
// keeps a few threads and adds one whenever a job is queued with no idle thread to take it (up
// to a limit), so one slow kind of call (a DNS lookup that waits for its timeout, a read from a
// hung NFS mount) cannot hold up the others; threads above the base number leave after a while
// without work.
#include <cstdlib>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/runtime.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

namespace {

struct offload_job {
    const std::function<void()>* fn;
    oneshot* done;  // nullptr: detached; the pool owns the job (and `owned`) and deletes it
    std::function<void()> owned;
};

constexpr unsigned k_base_threads = 4;
constexpr unsigned k_default_max_threads = 64;
constexpr auto k_idle_exit = std::chrono::seconds(10);

unsigned max_threads_from_env() {
    if (const char* env = std::getenv("GLUON_OFFLOAD_THREADS")) {
        long v = std::strtol(env, nullptr, 10);
        if (v >= 1 && v <= 4096) return static_cast<unsigned>(v);
    }
    return k_default_max_threads;
}

class offload_pool {
public:
    offload_pool() : max_(max_threads_from_env()) {}
    /// At exit: queued jobs still run, then every thread leaves before the pool is destroyed.
    ~offload_pool() {
        std::unique_lock lk(mu_);
        stop_ = true;
        work_cv_.notify_all();
        exit_cv_.wait(lk, [this] { return threads_ == 0; });
    }
    /// Queues j for a thread: false if there is none and none can be started (a thread or
    /// memory limit), when the caller runs it itself.
    bool push(offload_job* j) {
        std::lock_guard lk(mu_);
        jobs_.push_back(j);
        if (jobs_.size() > idle_ && threads_ < max_) {
            // std::thread throws when the thread cannot be made; thrown through offload_call's
            // noexcept callers it ended the process.
            try {
                std::thread([this] { loop(); }).detach();
                ++threads_;  // before the new thread can take mu_
                return true;
            } catch (const std::system_error&) {
                if (threads_ == 0) {
                    jobs_.pop_back();
                    return false;
                }
                // The running threads take it when they are done with what they have.
            }
        }
        work_cv_.notify_one();
        return true;
    }

private:
    void loop() {
        std::unique_lock lk(mu_);
        for (;;) {
            if (!jobs_.empty()) {
                offload_job* j = jobs_.front();
                jobs_.pop_front();
                lk.unlock();
                (*j->fn)();
                if (j->done)
                    j->done->signal();
                else
                    delete j;
                lk.lock();
                continue;
            }
            if (stop_) break;
            ++idle_;
            const bool woken = work_cv_.wait_for(lk, k_idle_exit, [this] {
                return stop_ || !jobs_.empty();
            });
            --idle_;
            if (!woken && threads_ > k_base_threads) break;  // idle for a while: leave
        }
        // Last touch of the pool: the destructor may free it as soon as mu_ is released.
        if (--threads_ == 0) exit_cv_.notify_all();
    }

    const unsigned max_;
    std::mutex mu_;
    std::condition_variable work_cv_;
    std::condition_variable exit_cv_;
    std::deque<offload_job*> jobs_;
    unsigned threads_ = 0;  // running (busy or idle)
    unsigned idle_ = 0;     // waiting for work
    bool stop_ = false;
};

// Made before main (the pool starts no thread until work comes), not as a function-local
// static: common/lazy.h says why.
offload_pool g_pool;

offload_pool& pool() { return g_pool; }

}  // namespace

void offload(const std::function<void()>& fn) {
    if (!cur_vcpu()) {
        fn();
        return;
    }
    oneshot done;
    offload_job j{&fn, &done, {}};
    if (!pool().push(&j)) {
        fn();  // no thread to be had: on the vCPU, which blocks meanwhile
        return;
    }
    done.wait();
}

void offload_detached(std::function<void()> fn) {
    auto* j = new offload_job{nullptr, nullptr, std::move(fn)};
    j->fn = &j->owned;
    if (!pool().push(j)) {
        j->owned();
        delete j;
    }
}

}  // namespace gluon
