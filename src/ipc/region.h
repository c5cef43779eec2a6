// shmipc's buffer region: lists of equal-sized slices with lock-free free lists that both
// processes pop from and push to (the client creates the region; both sides allocate from it).
//
//   offset 0: u16 list count | u16 0 | u32 bytes of all lists
//   offset 8: per list a 36-byte header {i32 size, u32 cap, u32 head, u32 tail, u32 data cap,
//             counters} and then cap slices of (20-byte header + data cap bytes)
//   slice header: u32 cap | u32 size | u32 start | u32 next | u32 flags (bit0 next, bit1 in use)
//
// head, tail and a free slice's next are relative to the list's first slice; a message chain's
// next and a queue element's offset are absolute. The algorithms are shmipc-go's, step for step
// (pop never takes the last free slice; size is decremented before the head CAS; push links the
// old tail after its tail CAS), since the Go peer runs them on the same words.
//
// The geometry (where each list and its slices are) is read once, checked, and kept in this
// object; every offset read from shared memory afterwards is checked against that copy, so a
// peer that rewrites the headers can make us fail, never read outside the mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <array>
#include <span>
#include <vector>

#include "gluon/common/result.h"

namespace gluon::ipc {

/// One list of the region: slices of `size` data bytes taking `percent` of the region.
struct slice_class {
    uint32_t size;
    uint32_t percent;
};

class buffer_region {
public:
    static constexpr uint32_t k_region_header = 8;
    static constexpr uint32_t k_list_header = 36;
    static constexpr uint32_t k_slice_header = 20;
    static constexpr uint32_t k_has_next = 1;
    static constexpr uint32_t k_in_use = 2;
    static constexpr uint32_t k_none = UINT32_MAX;
    /// Lists a region may have (shmipc-go's default has 3). A fixed array keeps this type
    /// trivially copyable and destructible.
    static constexpr size_t k_max_lists = 16;

    struct list_geometry {
        uint32_t header;  // absolute offset of the list header
        uint32_t slices;  // absolute offset of its first slice
        uint32_t cap;     // slices
        uint32_t data_cap;
        uint32_t stride;  // data_cap + 20
    };

    buffer_region() noexcept = default;

    /// Formats zero-filled memory as shmipc-go does. Errors: EINVAL (no list or more than
    /// k_max_lists, sizes not
    /// ascending or not multiples of 4, percents not summing to 100, a list with no slice, a
    /// region over 4 GiB).
    static result<buffer_region> format(uint8_t* base, size_t len, std::span<const slice_class> classes);
    /// Checks a region made by the peer. Errors: ipc::errc::bad_region.
    static result<buffer_region> attach(uint8_t* base, size_t len);

    /// Pops a free slice with at least n data bytes from the smallest list that has one: its
    /// absolute offset, or k_none (nothing free). Errors: ipc::errc::bad_region (a corrupt list).
    result<uint32_t> pop_fit(uint32_t n) noexcept;
    /// Pops from list i: the slice's absolute offset, or k_none. Errors: ipc::errc::bad_region.
    result<uint32_t> pop(size_t i) noexcept;
    /// Returns the slice at absolute offset abs (checked with locate) to its list. Errors:
    /// ipc::errc::bad_region (the list's tail was corrupt; the slice is then lost).
    result<void> push(uint32_t abs) noexcept;
    /// The list holding the slice header at absolute offset abs. Errors: ipc::errc::bad_offset.
    result<size_t> locate(uint32_t abs) const noexcept;

    uint8_t* base() const noexcept { return base_; }
    size_t length() const noexcept { return len_; }
    size_t lists() const noexcept { return count_; }
    const list_geometry& list(size_t i) const noexcept { return lists_[i]; }
    /// The largest slice's data capacity.
    uint32_t max_slice() const noexcept { return lists_[count_ - 1].data_cap; }
    /// Free slices of list i as the shared header says (at rest: cap).
    int32_t free_count(size_t i) const noexcept;
    /// Free data bytes over all lists.
    uint64_t free_bytes() const noexcept;

    // Slice header fields at absolute offset abs (checked by the caller).
    uint8_t* data(uint32_t abs) const noexcept { return base_ + abs + k_slice_header; }
    uint32_t field(uint32_t abs, uint32_t off) const noexcept {
        return __atomic_load_n(u32(abs + off), __ATOMIC_ACQUIRE);
    }
    void set_field(uint32_t abs, uint32_t off, uint32_t v) const noexcept {
        __atomic_store_n(u32(abs + off), v, __ATOMIC_RELEASE);
    }
    static constexpr uint32_t k_size = 4, k_start = 8, k_next = 12, k_flags = 16;

    /// Writes a chain link: slice abs continues at absolute offset next.
    void link(uint32_t abs, uint32_t next) const noexcept;

    struct piece {
        uint32_t abs;  // slice header
        uint32_t list;
        const uint8_t* data;
        uint32_t size;
    };
    /// Follows the message chain that starts at absolute offset abs, checking every offset,
    /// start and size against the geometry and bounding its length by the number of slices in
    /// the region (a cycle ends there). Errors: ipc::errc::bad_offset, ipc::errc::bad_chain.
    result<void> read_chain(uint32_t abs, std::vector<piece>& out) const;

private:
    uint32_t* u32(uint32_t off) const noexcept { return reinterpret_cast<uint32_t*>(base_ + off); }
    int32_t* i32(uint32_t off) const noexcept { return reinterpret_cast<int32_t*>(base_ + off); }

    uint8_t* base_ = nullptr;
    size_t len_ = 0;
    uint32_t total_slices_ = 0;
    std::array<list_geometry, k_max_lists> lists_{};
    size_t count_ = 0;
};

}  // namespace gluon::ipc
