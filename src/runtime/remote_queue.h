// Multi-producer, single-consumer queue of work for a vCPU (resume a fiber, deliver an interrupt,
// adopt a migrating fiber, run a closure). Producers push lock-free; the owning vCPU takes the
// whole batch with one exchange. Private to the runtime.
#pragma once

#include <atomic>

namespace gluon::detail {

struct vcpu;

struct remote_node {
    remote_node* next = nullptr;
    void (*run)(vcpu* v, remote_node* self) = nullptr;
};

class remote_queue {
public:
    /// Returns true if the queue was empty before this push.
    bool push(remote_node* n) noexcept {
        remote_node* head = head_.load(std::memory_order_relaxed);
        do {
            n->next = head;
        } while (!head_.compare_exchange_weak(head, n, std::memory_order_release,
                                              std::memory_order_relaxed));
        return head == nullptr;
    }
    bool empty() const noexcept { return head_.load(std::memory_order_acquire) == nullptr; }
    /// Takes everything pushed so far, oldest first. Looks before it exchanges: the event loop
    /// drains on every pass, and a locked exchange of an empty queue cost a fifth of a pass.
    remote_node* take_all() noexcept {
        if (head_.load(std::memory_order_relaxed) == nullptr) return nullptr;
        remote_node* n = head_.exchange(nullptr, std::memory_order_acquire);
        remote_node* rev = nullptr;
        while (n) {
            remote_node* next = n->next;
            n->next = rev;
            rev = n;
            n = next;
        }
        return rev;
    }

private:
    std::atomic<remote_node*> head_{nullptr};
};

}  // namespace gluon::detail
