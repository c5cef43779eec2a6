// The shared-memory layouts against shmipc's (docs: the protocol notes), and their checks.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "gluon/ipc/error.h"
#include "ipc/queue.h"
#include "ipc/region.h"
#include "ipc/wire.h"

namespace gluon::ipc {
namespace {

const slice_class k_defaults[] = {{8172, 50}, {32748, 30}, {131052, 20}};

TEST(ipc_region, default_geometry_matches_shmipc_go) {
    std::vector<uint8_t> mem(32u << 20);
    auto r = buffer_region::format(mem.data(), mem.size(), k_defaults);
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->lists(), 3u);
    EXPECT_EQ(r->list(0).cap, 2047u);
    EXPECT_EQ(r->list(1).cap, 307u);
    EXPECT_EQ(r->list(2).cap, 51u);
    EXPECT_EQ(r->list(0).slices, 44u);  // 8-byte region header + 36-byte list header
    uint32_t n;
    std::memcpy(&n, mem.data() + 8 + 12, 4);  // tail of list 0
    EXPECT_EQ(n, (2047u - 1) * (8172 + 20));
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(r->free_count(i), int32_t(r->list(i).cap));
    // The peer's view of the same bytes.
    auto a = buffer_region::attach(mem.data(), mem.size());
    ASSERT_TRUE(a);
    EXPECT_EQ(a->list(2).slices, r->list(2).slices);
}

TEST(ipc_region, pop_never_takes_the_last_slice_and_push_restores) {
    std::vector<uint8_t> mem(1u << 20);
    const slice_class one[] = {{4092, 100}};
    auto r = buffer_region::format(mem.data(), mem.size(), one);
    ASSERT_TRUE(r);
    uint32_t cap = r->list(0).cap;
    std::vector<uint32_t> got;
    for (;;) {
        uint32_t s = *r->pop(0);
        if (s == buffer_region::k_none) break;
        got.push_back(s);
    }
    EXPECT_EQ(got.size(), cap - 1);
    EXPECT_EQ(r->free_count(0), 1);
    for (uint32_t s : got) ASSERT_TRUE(r->push(s));
    EXPECT_EQ(r->free_count(0), int32_t(cap));
    // And they all come out again.
    size_t again = 0;
    while (*r->pop(0) != buffer_region::k_none) ++again;
    EXPECT_EQ(again, cap - 1);
}

TEST(ipc_region, chains_are_checked) {
    std::vector<uint8_t> mem(1u << 20);
    const slice_class two[] = {{1020, 50}, {4092, 50}};
    auto r = buffer_region::format(mem.data(), mem.size(), two);
    ASSERT_TRUE(r);
    uint32_t a = *r->pop(0), b = *r->pop(1);
    r->set_field(a, buffer_region::k_size, 10);
    r->set_field(b, buffer_region::k_size, 20);
    r->link(a, b);
    std::vector<buffer_region::piece> p;
    ASSERT_TRUE(r->read_chain(a, p));
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[1].size, 20u);
    // A cycle.
    r->link(b, a);
    EXPECT_EQ(r->read_chain(a, p).error(), errc::bad_chain);
    // Off a slice boundary, outside the region, a size over the slice.
    EXPECT_EQ(r->read_chain(a + 4, p).error(), errc::bad_offset);
    EXPECT_EQ(r->read_chain(uint32_t(mem.size() + 100), p).error(), errc::bad_offset);
    r->set_field(b, buffer_region::k_flags, buffer_region::k_in_use);
    r->set_field(b, buffer_region::k_size, 5000);
    EXPECT_EQ(r->read_chain(a, p).error(), errc::bad_offset);
    r->set_field(b, buffer_region::k_size, 100);
    r->set_field(b, buffer_region::k_start, 4000);
    EXPECT_EQ(r->read_chain(a, p).error(), errc::bad_offset);
}

TEST(ipc_region, a_corrupt_header_is_refused) {
    std::vector<uint8_t> mem(1u << 20);
    const slice_class none[] = {{1020, 99}, {524284, 1}};  // 1 % of 1 MiB holds no 512 KiB slice
    EXPECT_EQ(buffer_region::format(mem.data(), mem.size(), none).error(), std::errc::invalid_argument);
    const slice_class small[] = {{1020, 60}, {8188, 40}};
    ASSERT_TRUE(buffer_region::format(mem.data(), mem.size(), small));
    std::vector<uint8_t> copy = mem;
    uint32_t huge = 0x7fffffff;
    std::memcpy(copy.data() + 8 + 4, &huge, 4);  // list 0 cap
    EXPECT_EQ(buffer_region::attach(copy.data(), copy.size()).error(), errc::bad_region);
    copy = mem;
    copy[0] = 0;
    copy[1] = 0;  // no lists
    EXPECT_EQ(buffer_region::attach(copy.data(), copy.size()).error(), errc::bad_region);
    // A head pointing off a slice boundary: pop fails cleanly.
    auto a = buffer_region::attach(mem.data(), mem.size());
    ASSERT_TRUE(a);
    uint32_t bad = 3;
    std::memcpy(mem.data() + 8 + 8, &bad, 4);
    EXPECT_EQ(a->pop(0).error(), errc::bad_region);
    EXPECT_EQ(a->free_count(0), int32_t(a->list(0).cap));
}

// A list whose slices claim more than 2^64 bytes (a stride of 4 GiB + 8 times almost 2^32
// slices) is refused: the product wrapped to less than a 4 GiB region, and the region was taken
// with slices 8 bytes apart whose data ran past the mapping's end.
TEST(ipc_region, a_list_larger_than_64_bits_can_count_is_refused) {
    // 4 GiB less a byte of address space (the most attach takes), only the first page usable:
    // attach reads nothing past the list headers. PROT_NONE pages cost no memory.
    const size_t len = UINT32_MAX;
    void* p = ::mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    ASSERT_EQ(::mprotect(p, 4096, PROT_READ | PROT_WRITE), 0);
    auto* base = static_cast<uint8_t*>(p);
    const uint16_t lists = 1;
    const uint32_t used = 64, cap = UINT32_MAX - 6, data_cap = UINT32_MAX - 11;  // stride 2^32 + 8
    std::memcpy(base, &lists, 2);
    std::memcpy(base + 4, &used, 4);
    std::memcpy(base + 8 + 4, &cap, 4);
    std::memcpy(base + 8 + 16, &data_cap, 4);
    auto r = buffer_region::attach(base, len);
    if (r) {
        ADD_FAILURE() << "taken with a stride of " << r->list(0).stride;
    } else {
        EXPECT_EQ(r.error(), errc::bad_region);
    }
    ::munmap(p, len);
}

TEST(ipc_queue, layouts_match_the_spec) {
    EXPECT_EQ(k_queue_amd64.head, 4u);
    EXPECT_EQ(k_queue_amd64.tail, 12u);
    EXPECT_EQ(k_queue_amd64.flag, 20u);
    EXPECT_EQ(k_queue_arm64.flag, 4u);
    EXPECT_EQ(k_queue_arm64.head, 8u);
    EXPECT_EQ(k_queue_arm64.tail, 16u);
    EXPECT_EQ(queue_bytes(8192), 24u + 12u * 8192);
    EXPECT_FALSE(straddles(8192));
    EXPECT_FALSE(straddles(65535));
    EXPECT_TRUE(straddles(8 + 16 * 3));  // cap = 8 mod 16: the second head crosses a line
}

template <const queue_layout& L>
void queue_round_trip() {
    alignas(64) uint8_t mem[2 * 24 + 2 * 12 * 16] = {};
    queue_view::format(mem, 16);
    queue_view q(mem, 16, L);
    for (uint32_t i = 0; i < 16; ++i) ASSERT_EQ(q.put({i, i * 4, 0}), queue_view::outcome::ok);
    EXPECT_EQ(q.put({99, 0, 0}), queue_view::outcome::full);
    int64_t tail;
    std::memcpy(&tail, mem + L.tail, 8);
    EXPECT_EQ(tail, 16);  // the counter sits where the layout says
    EXPECT_TRUE(q.mark_working());
    EXPECT_FALSE(q.mark_working());
    uint32_t flag;
    std::memcpy(&flag, mem + L.flag, 4);
    EXPECT_EQ(flag, 1u);
    queue_element e;
    for (uint32_t i = 0; i < 16; ++i) {
        ASSERT_EQ(q.pop(e), queue_view::outcome::ok);
        EXPECT_EQ(e.stream_id, i);
        EXPECT_EQ(e.offset, i * 4);
    }
    EXPECT_EQ(q.pop(e), queue_view::outcome::empty);
    EXPECT_TRUE(q.mark_not_working());
    int64_t head;
    std::memcpy(&head, mem + L.head, 8);
    EXPECT_EQ(head, 16);
    // A peer that moves tail past head + cap.
    int64_t wild = 1000;
    std::memcpy(mem + L.tail, &wild, 8);
    EXPECT_EQ(q.pop(e), queue_view::outcome::bad);
    EXPECT_EQ(q.put({1, 0, 0}), queue_view::outcome::bad);
}

TEST(ipc_queue, amd64_layout) { queue_round_trip<k_queue_amd64>(); }
TEST(ipc_queue, arm64_layout) { queue_round_trip<k_queue_arm64>(); }

TEST(ipc_wire, headers) {
    uint8_t h[8];
    wire::encode_header(h, 8, 3, wire::type::polling);
    const uint8_t expect[8] = {0, 0, 0, 8, 0x77, 0x58, 3, 1};
    EXPECT_EQ(std::memcmp(h, expect, 8), 0);
    EXPECT_TRUE(wire::decode_header(h, 1 << 20));
    h[4] = 0;
    EXPECT_EQ(wire::decode_header(h, 1 << 20).error(), errc::bad_header);
    wire::encode_header(h, 8, 0, wire::type::polling);
    EXPECT_EQ(wire::decode_header(h, 1 << 20).error(), errc::bad_header);
    wire::encode_header(h, 12, 3, wire::type::polling);
    EXPECT_EQ(wire::decode_header(h, 1 << 20).error(), errc::bad_message);
    h[7] = 10;
    EXPECT_EQ(wire::decode_header(h, 1 << 20).error(), errc::bad_header);
    wire::encode_header(h, 1000, 3, wire::type::fallback_data);
    EXPECT_EQ(wire::decode_header(h, 100).error(), errc::message_too_large);
}

TEST(ipc_wire, paths_round_trip_and_bad_lengths) {
    auto m = wire::encode_paths(wire::type::share_memory_by_memfd, 3, "q", "buffer");
    ASSERT_TRUE(m);
    auto* p = reinterpret_cast<const uint8_t*>(m->data());
    wire::message msg;
    ASSERT_EQ(*wire::next_message({p, m->size()}, 1 << 20, msg), m->size());
    EXPECT_EQ(*wire::next_message({p, m->size() - 1}, 1 << 20, msg), 0u);
    wire::share_memory_paths paths_v;
    ASSERT_TRUE(wire::decode_paths(msg.body, paths_v));
    auto* paths = &paths_v;
    EXPECT_EQ(paths->queue_path, "q");
    EXPECT_EQ(paths->buffer_path, "buffer");
    std::vector<uint8_t> body(msg.body.begin(), msg.body.end());
    body[1] = 200;  // the queue path claims more bytes than there are
    EXPECT_EQ(wire::decode_paths(body, paths_v).error(), errc::bad_message);
    EXPECT_EQ(wire::decode_fallback(std::span<const uint8_t>(body.data(), 4)).error(), errc::bad_message);
}

}  // namespace
}  // namespace gluon::ipc
