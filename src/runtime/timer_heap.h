// Per-vCPU timers: a 4-ary min-heap of intrusive nodes with O(log n) insert and removal.
// Private to the runtime.
//
// The heap's slots hold each node's deadline next to its pointer, so sifting compares
// contiguous memory and touches a node only to store its new position. With a pointer-only
// heap every comparison loaded a deadline from a parked fiber (each on its own stack page):
// a keep-alive HTTP server's timeouts, armed and removed twice per request, cost about 1.3%
// of its CPU in those loads. Four children per node halve the depth, and a node's children
// share one cache line.
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
    int64_t next_deadline() const noexcept { return heap_.empty() ? INT64_MAX : heap_[0].deadline; }

    /// The node's deadline is read now; change it only while the node is not armed.
    void insert(timer_node* t) {
        heap_.push_back({t->deadline, t});
        sift_up(heap_.size() - 1, heap_.back());
    }
    void remove(timer_node* t) noexcept {
        size_t i = t->index;
        if (i == timer_node::npos) return;
        t->index = timer_node::npos;
        slot last = heap_.back();
        heap_.pop_back();
        if (i == heap_.size()) return;  // it was the last slot
        if (i > 0 && last.deadline < heap_[parent(i)].deadline) sift_up(i, last);
        else sift_down(i, last);
    }
    /// True if t is in this heap (not in another vCPU's, not fired, not removed).
    bool holds(const timer_node* t) const noexcept { return t->index < heap_.size() && heap_[t->index].node == t; }
    /// Removes and fires every timer whose deadline is <= now. Returns how many fired.
    int fire_expired(int64_t now) {
        int n = 0;
        while (!heap_.empty() && heap_[0].deadline <= now) {
            timer_node* t = heap_[0].node;
            remove(t);
            t->fire(t);
            ++n;
        }
        return n;
    }

private:
    struct slot {
        int64_t deadline;
        timer_node* node;
    };
    static constexpr size_t k_arity = 4;
    static size_t parent(size_t i) noexcept { return (i - 1) / k_arity; }

    void place(size_t i, slot s) noexcept {
        heap_[i] = s;
        s.node->index = i;
    }
    // Moves s (the slot that belongs at i or above) up to its place.
    void sift_up(size_t i, slot s) noexcept {
        while (i > 0) {
            size_t p = parent(i);
            if (heap_[p].deadline <= s.deadline) break;
            place(i, heap_[p]);
            i = p;
        }
        place(i, s);
    }
    // Moves s (the slot that belongs at i or below) down to its place.
    void sift_down(size_t i, slot s) noexcept {
        const size_t n = heap_.size();
        for (;;) {
            size_t first = k_arity * i + 1;
            if (first >= n) break;
            size_t end = first + k_arity < n ? first + k_arity : n;
            size_t c = first;
            for (size_t k = first + 1; k < end; ++k)
                if (heap_[k].deadline < heap_[c].deadline) c = k;
            if (s.deadline <= heap_[c].deadline) break;
            place(i, heap_[c]);
            i = c;
        }
        place(i, s);
    }

    std::vector<slot> heap_;
};

}  // namespace gluon::detail
