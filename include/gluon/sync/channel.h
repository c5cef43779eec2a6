// channel<T>: a typed FIFO between fibers (and threads, across vCPUs). capacity 0 is unbuffered:
// a send completes only when a receiver takes the value (rendezvous). close() wakes everyone:
// sends then fail with EPIPE, receives drain what is buffered and then fail with ENODATA (the
// end of a stream, as for byte streams).
// A channel can be iterated with range-for, which ends when it is closed and drained.
#pragma once

#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sync/wait_list.h"

namespace gluon {

template <typename T>
class channel {
public:
    explicit channel(size_t capacity = 0) : cap_(capacity), buf_(capacity) {}
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;
    ~channel() { close(); }

    /// Errors: EPIPE (closed), ETIMEDOUT, ECANCELED (interrupted).
    result<void> send(T v, duration timeout = forever) { return send_impl(v, deadline_after(timeout)); }
    /// Errors: ENODATA (closed and drained), ETIMEDOUT, ECANCELED.
    result<T> recv(duration timeout = forever) { return recv_impl(deadline_after(timeout)); }
    /// Never blocks. Errors: EAGAIN (would block), EPIPE (closed).
    result<void> try_send(T v) { return send_impl(v, 0); }
    /// Never blocks. Errors: EAGAIN (would block), ENODATA (closed and drained).
    result<T> try_recv() { return recv_impl(0); }

    /// For waiters that are not fibers (see waiter.h). Sends v now (0), fails now (-EPIPE:
    /// closed), or links the continuation waiter `w` (k_waiting): v must then stay alive until
    /// the continuation is called, with 0 once a receiver has moved v out, or -EPIPE (closed).
    long send_async(waiter& w, T& v) {
        lk_.lock();
        if (const long r = send_locked(v); r != k_waiting) return r;
        w.data = &v;  // a receiver moves the value out, then wakes w
        senders_.push_back(w);
        lk_.unlock();
        return k_waiting;
    }
    /// Receives into `slot` now (0), fails now (-ENODATA: closed and drained), or links the
    /// continuation waiter `w` (k_waiting), called with 0 once `slot` holds a value, or
    /// -ENODATA. `slot` must stay alive until then.
    long recv_async(waiter& w, std::optional<T>& slot) {
        lk_.lock();
        if (const long r = recv_locked(slot); r != k_waiting) return r;
        w.data = &slot;
        receivers_.push_back(w);
        lk_.unlock();
        return k_waiting;
    }
    /// Unlinks a waiter of send_async/recv_async that has not been served. True: it never will
    /// be (a sender's value was not taken); false: its continuation runs or has run.
    bool cancel(waiter& w) noexcept { return detail::cancel_linked(lk_, w); }

    void close() noexcept {
        woken_batch senders, receivers;
        lk_.lock();
        closed_ = true;
        detail::take_all(senders_, senders);
        detail::take_all(receivers_, receivers);
        lk_.unlock();
        detail::wake_all(senders, -EPIPE);
        detail::wake_all(receivers, -ENODATA);
    }
    bool closed() const noexcept {
        lk_.lock();
        bool c = closed_;
        lk_.unlock();
        return c;
    }

    class iterator {
    public:
        explicit iterator(channel* c) : c_(c) { advance(); }
        iterator() = default;
        T& operator*() { return *cur_; }
        iterator& operator++() {
            advance();
            return *this;
        }
        bool operator==(const iterator& o) const { return c_ == o.c_; }

    private:
        void advance() {
            auto r = c_->recv();
            if (r)
                cur_.emplace(std::move(*r));
            else
                c_ = nullptr;
        }
        channel* c_ = nullptr;
        std::optional<T> cur_;
    };
    iterator begin() { return iterator(this); }
    iterator end() { return iterator(); }

private:
    // With lk_ held: sends v now (0, lk_ released, a waiting receiver woken), fails now
    // (-EPIPE, lk_ released), or returns k_waiting with lk_ still held (no receiver, no room).
    // One lock per operation: the waiting paths link their waiter under the same hold.
    long send_locked(T& v) {
        if (closed_) {
            lk_.unlock();
            return -EPIPE;
        }
        if (waiter* r = receivers_.pop_front()) {  // a receiver waits: hand it over
            static_cast<std::optional<T>*>(r->data)->emplace(std::move(v));
            lk_.unlock();
            wake(*r, 0);
            return 0;
        }
        if (count_ < cap_) {
            buf_[(head_ + count_) % cap_].emplace(std::move(v));
            ++count_;
            lk_.unlock();
            return 0;
        }
        return k_waiting;
    }

    // With lk_ held: receives into slot now (0, lk_ released, a sender released), fails now
    // (-ENODATA: closed and drained, lk_ released), or returns k_waiting with lk_ still held.
    long recv_locked(std::optional<T>& slot) {
        if (count_ > 0) {
            slot.emplace(std::move(*buf_[head_]));
            buf_[head_].reset();
            head_ = (head_ + 1) % cap_;
            --count_;
            // Room now: move a blocked sender's value into the buffer and release it.
            waiter* s = senders_.pop_front();
            if (s) {
                buf_[(head_ + count_) % cap_].emplace(std::move(*static_cast<T*>(s->data)));
                ++count_;
            }
            lk_.unlock();
            if (s) wake(*s, 0);
            return 0;
        }
        if (waiter* s = senders_.pop_front()) {  // unbuffered: take straight from a sender
            slot.emplace(std::move(*static_cast<T*>(s->data)));
            lk_.unlock();
            wake(*s, 0);
            return 0;
        }
        if (closed_) {
            lk_.unlock();
            return -ENODATA;
        }
        return k_waiting;
    }

    // deadline 0 means "do not wait" (try_*).
    result<void> send_impl(T& v, deadline_t deadline) {
        lk_.lock();
        if (const long r = send_locked(v); r != k_waiting) return void_from_syscall(r);
        if (deadline == 0) {
            lk_.unlock();
            return errno_error(EAGAIN);
        }
        waiter w;
        w.data = &v;  // a receiver moves the value out of our frame, then wakes us
        long r = detail::wait_in(lk_, senders_, w, {.deadline = deadline});
        if (r < 0) return errno_error(static_cast<int>(-r));
        return {};
    }

    result<T> recv_impl(deadline_t deadline) {
        std::optional<T> slot;
        lk_.lock();
        long r = recv_locked(slot);
        if (r == k_waiting) {
            if (deadline == 0) {
                lk_.unlock();
                return errno_error(EAGAIN);
            }
            waiter w;
            w.data = &slot;
            r = detail::wait_in(lk_, receivers_, w, {.deadline = deadline});
        }
        if (r < 0) return errno_error(static_cast<int>(-r));
        return std::move(*slot);
    }

    mutable prim_lock lk_;
    const size_t cap_;
    std::vector<std::optional<T>> buf_;
    size_t head_ = 0;
    size_t count_ = 0;
    bool closed_ = false;
    waiter_list senders_;
    waiter_list receivers_;
};

}  // namespace gluon
