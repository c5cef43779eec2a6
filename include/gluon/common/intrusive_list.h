// Intrusive doubly-linked list: O(1) push/pop/unlink with no allocation. An element embeds a
// list_hook and can be on one list per hook at a time. Not thread-safe: the owner serialises.
#pragma once

#include <cstddef>

namespace gluon {

struct list_hook {
    list_hook* prev = nullptr;
    list_hook* next = nullptr;
    bool linked() const noexcept { return next != nullptr; }
};

template <typename T, list_hook T::*Hook>
class intrusive_list {
public:
    // constexpr: a primitive holding one can be constant-initialised (constinit, a static).
    constexpr intrusive_list() noexcept { head_.prev = head_.next = &head_; }
    intrusive_list(const intrusive_list&) = delete;
    intrusive_list& operator=(const intrusive_list&) = delete;

    bool empty() const noexcept { return head_.next == &head_; }

    void push_back(T& v) noexcept { insert_before(&head_, &(v.*Hook)); }
    void push_front(T& v) noexcept { insert_before(head_.next, &(v.*Hook)); }

    T* front() noexcept { return empty() ? nullptr : owner(head_.next); }
    T* pop_front() noexcept {
        if (empty()) return nullptr;
        list_hook* h = head_.next;
        unlink_hook(h);
        return owner(h);
    }
    /// Removes v, which must be on this list.
    void erase(T& v) noexcept { unlink_hook(&(v.*Hook)); }
    /// Removes v from whichever list of this type it is on (no need to know which).
    static void unlink(T& v) noexcept { unlink_hook(&(v.*Hook)); }
    /// Moves every element of other to the back of this list.
    void splice_back(intrusive_list& other) noexcept {
        if (other.empty()) return;
        list_hook* first = other.head_.next;
        list_hook* last = other.head_.prev;
        first->prev = head_.prev;
        head_.prev->next = first;
        last->next = &head_;
        head_.prev = last;
        other.head_.prev = other.head_.next = &other.head_;
    }

    template <typename F>
    void for_each(F&& f) {
        for (list_hook* h = head_.next; h != &head_;) {
            list_hook* next = h->next;
            f(*owner(h));
            h = next;
        }
    }

private:
    static T* owner(list_hook* h) noexcept {
        // offsetof on a member pointer: the hook's address minus its offset in T.
        const auto off = reinterpret_cast<size_t>(&(static_cast<T*>(nullptr)->*Hook));
        return reinterpret_cast<T*>(reinterpret_cast<char*>(h) - off);
    }
    void insert_before(list_hook* pos, list_hook* h) noexcept {
        h->next = pos;
        h->prev = pos->prev;
        pos->prev->next = h;
        pos->prev = h;
    }
    static void unlink_hook(list_hook* h) noexcept {
        h->prev->next = h->next;
        h->next->prev = h->prev;
        h->prev = h->next = nullptr;
    }

    list_hook head_;
};

}  // namespace gluon
