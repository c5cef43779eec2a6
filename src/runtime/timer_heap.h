// Per-vCPU timers: a binary min-heap of intrusive nodes with O(log n) insert and removal.
// Private to the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gluon::detail {

struct timer_node {
    int64_t deadline = 0;
    size_t index = npos;  // position in the heap, npos when not armed
    void (*fire)(timer_node* self) = nullptr;
    static constexpr size_t npos = ~size_t{0};
    bool armed() const noexcept { return index != npos; }
};

class timer_heap {
public:
    bool empty() const noexcept { return heap_.empty(); }
    size_t size() const noexcept { return heap_.size(); }
    int64_t next_deadline() const noexcept { return heap_.empty() ? INT64_MAX : heap_[0]->deadline; }

    void insert(timer_node* t) {
        t->index = heap_.size();
        heap_.push_back(t);
        sift_up(t->index);
    }
    void remove(timer_node* t) noexcept {
        size_t i = t->index;
        if (i == timer_node::npos) return;
        size_t last = heap_.size() - 1;
        if (i != last) {
            place(i, heap_[last]);
            heap_.pop_back();
            sift_down(i);
            sift_up(i);
        } else {
            heap_.pop_back();
        }
        t->index = timer_node::npos;
    }
    /// Removes and fires every timer whose deadline is <= now. Returns how many fired.
    int fire_expired(int64_t now) {
        int n = 0;
        while (!heap_.empty() && heap_[0]->deadline <= now) {
            timer_node* t = heap_[0];
            remove(t);
            t->fire(t);
            ++n;
        }
        return n;
    }

private:
    void place(size_t i, timer_node* t) noexcept {
        heap_[i] = t;
        t->index = i;
    }
    void sift_up(size_t i) noexcept {
        timer_node* t = heap_[i];
        while (i > 0) {
            size_t parent = (i - 1) / 2;
            if (heap_[parent]->deadline <= t->deadline) break;
            place(i, heap_[parent]);
            i = parent;
        }
        place(i, t);
    }
    void sift_down(size_t i) noexcept {
        timer_node* t = heap_[i];
        const size_t n = heap_.size();
        for (;;) {
            size_t c = 2 * i + 1;
            if (c >= n) break;
            if (c + 1 < n && heap_[c + 1]->deadline < heap_[c]->deadline) ++c;
            if (t->deadline <= heap_[c]->deadline) break;
            place(i, heap_[c]);
            i = c;
        }
        place(i, t);
    }

    std::vector<timer_node*> heap_;
};

}  // namespace gluon::detail
