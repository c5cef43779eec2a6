// shmipc buffer region: formatting, checking a peer's region, and the shared lock-free free lists.
#include "region.h"

#include <cstring>

#include "gluon/ipc/error.h"

namespace gluon::ipc {
namespace {

constexpr int k_pop_retries = 200;  // shmipc-go's bound on head CAS retries

unexpected bad(errc e) { return unexpected(make_error_code(e)); }

// A region-relative list offset is a slice boundary inside the list.
bool valid_rel(const buffer_region::list_geometry& l, uint32_t rel) noexcept {
    return rel % l.stride == 0 && rel / l.stride < l.cap;
}

}  // namespace

result<buffer_region> buffer_region::format(uint8_t* base, size_t len, std::span<const slice_class> classes) {
    if (classes.empty() || classes.size() > k_max_lists || len > UINT32_MAX) return errno_error(EINVAL);
    uint32_t percent = 0, prev = 0;
    for (const slice_class& c : classes) {
        if (c.size == 0 || c.size % 4 != 0 || c.size <= prev) return errno_error(EINVAL);
        prev = c.size;
        percent += c.percent;
    }
    uint64_t overhead = k_region_header + uint64_t(k_list_header) * classes.size();
    if (percent != 100 || len <= overhead) return errno_error(EINVAL);
    uint64_t region_cap = len - overhead;

    buffer_region r;
    r.base_ = base;
    r.len_ = len;
    uint32_t at = k_region_header;
    for (const slice_class& c : classes) {
        uint32_t stride = c.size + k_slice_header;
        uint32_t n = uint32_t(region_cap * c.percent / 100) / stride;
        if (n == 0) return errno_error(EINVAL);
        list_geometry g{at, at + k_list_header, n, c.size, stride};
        *r.i32(at) = int32_t(n);
        *r.u32(at + 4) = n;
        *r.u32(at + 8) = 0;
        *r.u32(at + 12) = (n - 1) * stride;
        *r.u32(at + 16) = c.size;
        for (uint32_t i = 0; i < n; ++i) {
            uint32_t s = g.slices + i * stride;
            *r.u32(s) = c.size;
            if (i + 1 < n) {
                *r.u32(s + k_next) = (i + 1) * stride;
                *r.u32(s + k_flags) = k_has_next;
            }
        }
        r.lists_[r.count_++] = g;
        r.total_slices_ += n;
        at = g.slices + n * stride;
    }
    *reinterpret_cast<uint16_t*>(base) = uint16_t(classes.size());
    *reinterpret_cast<uint16_t*>(base + 2) = 0;
    *r.u32(4) = at - k_region_header;
    return r;
}

result<buffer_region> buffer_region::attach(uint8_t* base, size_t len) {
    if (len < k_region_header || len > UINT32_MAX) return bad(errc::bad_region);
    buffer_region r;
    r.base_ = base;
    r.len_ = len;
    size_t count = *reinterpret_cast<const uint16_t*>(base);
    uint64_t used = *r.u32(4);
    if (count == 0 || count > k_max_lists || k_region_header + used > len) return bad(errc::bad_region);
    uint64_t at = k_region_header;
    uint32_t prev = 0;
    for (size_t i = 0; i < count; ++i) {
        if (at + k_list_header > len) return bad(errc::bad_region);
        uint32_t cap = *r.u32(uint32_t(at + 4)), data_cap = *r.u32(uint32_t(at + 16));
        uint64_t stride = uint64_t(data_cap) + k_slice_header;
        // Sizes ascend (allocation picks the first list that fits) and keep 4-byte alignment
        // (the headers are accessed atomically). The slices must fit what is left, checked by
        // division: stride * cap can pass 2^64 (a stride over 4 GiB by a few bytes), and its
        // wrapped value fit a 4 GiB mapping, with the stride cut to 32 bits.
        if (cap == 0 || data_cap == 0 || data_cap % 4 != 0 || data_cap <= prev ||
            cap > (len - at - k_list_header) / stride)
            return bad(errc::bad_region);
        uint64_t end = at + k_list_header + stride * cap;
        prev = data_cap;
        r.lists_[r.count_++] = {uint32_t(at), uint32_t(at + k_list_header), cap, data_cap, uint32_t(stride)};
        r.total_slices_ += cap;
        at = end;
    }
    return r;
}

result<uint32_t> buffer_region::pop_fit(uint32_t n) noexcept {
    for (size_t i = 0; i < count_; ++i) {
        if (lists_[i].data_cap < n) continue;
        uint32_t s = GLUON_TRY(pop(i));
        if (s != k_none) return s;
    }
    return k_none;
}

result<uint32_t> buffer_region::pop(size_t i) noexcept {
    const list_geometry& l = lists_[i];
    uint32_t* head = u32(l.header + 8);
    int32_t* size = i32(l.header);
    uint32_t old = __atomic_load_n(head, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(size, -1, __ATOMIC_SEQ_CST) <= 0) {
        __atomic_add_fetch(size, 1, __ATOMIC_SEQ_CST);
        return k_none;
    }
    for (int tries = 0; tries < k_pop_retries; ++tries) {
        if (!valid_rel(l, old)) {
            __atomic_add_fetch(size, 1, __ATOMIC_SEQ_CST);
            return bad(errc::bad_region);
        }
        uint32_t abs = l.slices + old;
        if (field(abs, k_flags) & k_has_next) {
            uint32_t next = field(abs, k_next);
            if (__atomic_compare_exchange_n(head, &old, next, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                set_field(abs, k_flags, k_in_use);
                return abs;
            }
            continue;  // old now holds the current head
        }
        // Never take the last free slice: its next is not linked yet (see push).
        if (__atomic_load_n(size, __ATOMIC_ACQUIRE) <= 1) break;
        old = __atomic_load_n(head, __ATOMIC_ACQUIRE);
    }
    __atomic_add_fetch(size, 1, __ATOMIC_SEQ_CST);
    return k_none;
}

result<void> buffer_region::push(uint32_t abs) noexcept {
    auto li = locate(abs);
    if (!li) return unexpected(li.error());
    const list_geometry& l = lists_[*li];
    set_field(abs, k_size, 0);
    set_field(abs, k_start, 0);
    set_field(abs, k_flags, 0);
    uint32_t* tail = u32(l.header + 12);
    uint32_t rel = abs - l.slices;
    uint32_t old = __atomic_load_n(tail, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(tail, &old, rel, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    if (!valid_rel(l, old)) return bad(errc::bad_region);
    uint32_t prev = l.slices + old;
    set_field(prev, k_next, rel);
    // Go sets the flag with a plain byte OR; the slice is the tail, nobody else writes it.
    set_field(prev, k_flags, field(prev, k_flags) | k_has_next);
    __atomic_add_fetch(i32(l.header), 1, __ATOMIC_SEQ_CST);
    return {};
}

result<size_t> buffer_region::locate(uint32_t abs) const noexcept {
    for (size_t i = 0; i < count_; ++i) {
        const list_geometry& l = lists_[i];
        if (abs < l.slices) break;
        if (valid_rel(l, abs - l.slices)) return i;
    }
    return bad(errc::bad_offset);
}

int32_t buffer_region::free_count(size_t i) const noexcept {
    return __atomic_load_n(i32(lists_[i].header), __ATOMIC_ACQUIRE);
}

uint64_t buffer_region::free_bytes() const noexcept {
    uint64_t n = 0;
    for (size_t i = 0; i < count_; ++i) {
        int32_t f = free_count(i);
        if (f > 0) n += uint64_t(f) * lists_[i].data_cap;
    }
    return n;
}

void buffer_region::link(uint32_t abs, uint32_t next) const noexcept {
    set_field(abs, k_next, next);
    set_field(abs, k_flags, field(abs, k_flags) | k_has_next);
}

result<void> buffer_region::read_chain(uint32_t abs, std::vector<piece>& out) const {
    out.clear();
    for (;;) {
        if (out.size() >= total_slices_) return bad(errc::bad_chain);
        size_t li = GLUON_TRY(locate(abs));
        uint32_t start = field(abs, k_start), size = field(abs, k_size);
        uint32_t cap = lists_[li].data_cap;
        if (start > cap || size > cap - start) return bad(errc::bad_offset);
        out.push_back({abs, uint32_t(li), data(abs) + start, size});
        if (!(field(abs, k_flags) & k_has_next)) return {};
        abs = field(abs, k_next);
    }
}

}  // namespace gluon::ipc
