// The native RPC's message codec: the fixed part and variable parts of plain structs, schema
// hashes, and what a decoder refuses.
#include "native_messages.h"

#include <cstring>
#include <gtest/gtest.h>
#include <vector>

namespace gluon::rpc::testing {
namespace {

// Encodes m into one contiguous payload (as it goes on the wire).
template <typename M> std::vector<uint8_t> flatten(const M& m) {
    std::vector<uint8_t> out(fixed_size<M>());
    iov_list var;
    size_t n = encode(m, out.data(), var);
    size_t total = 0;
    for (size_t i = 0; i < var.size(); ++i) {
        auto* p = static_cast<const uint8_t*>(var[i].iov_base);
        out.insert(out.end(), p, p + var[i].iov_len);
        total += var[i].iov_len;
    }
    EXPECT_EQ(n, total);
    return out;
}

rich sample() {
    rich r;
    r.flag = 7;
    r.on = true;
    r.at = {-3, 4};
    r.in.name = "inner";
    r.in.values = {1, 2, 3, 0xffffffff};
    r.path = {{1, 2}, {3, 4}};
    r.ratio = 0.25;
    r.second.name = "";
    return r;
}

TEST(rpc_message, fixed_part_is_values_and_lengths) {
    // flag 1 + bool 1 + point 8 + inner (4 + 4) + path 4 + double 8 + inner (4 + 4)
    EXPECT_EQ(fixed_size<rich>(), 1u + 1 + 8 + 8 + 4 + 8 + 8);
    EXPECT_EQ(fixed_size<echo_msg>(), 8u + 4 + 4);
    EXPECT_EQ(fixed_size<empty>(), 0u);
}

TEST(rpc_message, round_trip_with_nesting) {
    rich in = sample();
    auto wire = flatten(in);
    EXPECT_EQ(wire.size(), fixed_size<rich>() + 5 + 16 + 16);
    rich out;
    ASSERT_FALSE(decode(wire, out));
    EXPECT_EQ(out.flag, 7);
    EXPECT_TRUE(out.on);
    EXPECT_EQ(out.at.x, -3);
    EXPECT_EQ(out.at.y, 4);
    EXPECT_EQ(out.in.name, "inner");
    EXPECT_EQ(out.in.values, in.in.values);
    ASSERT_EQ(out.path.size(), 2u);
    EXPECT_EQ(out.path[1].y, 4);
    EXPECT_EQ(out.ratio, 0.25);
    EXPECT_TRUE(out.second.name.empty());
}

TEST(rpc_message, variable_parts_are_sent_from_place) {
    std::string big(1000, 'x');
    echo_msg m;
    m.text = big;
    m.payload = bytes::view(big.data(), big.size());
    std::vector<uint8_t> fixed(fixed_size<echo_msg>());
    iov_list var;
    EXPECT_EQ(encode(m, fixed.data(), var), 2000u);
    ASSERT_EQ(var.size(), 2u);
    EXPECT_EQ(var[0].iov_base, m.text.data());
    EXPECT_EQ(var[1].iov_base, big.data()); // the caller's bytes, not a copy
}

TEST(rpc_message, receives_into_the_callers_buffer) {
    echo_msg in;
    std::string data(300, 'q');
    in.payload = bytes::view(data.data(), data.size());
    auto wire = flatten(in);
    std::vector<uint8_t> buf(512);
    echo_msg out;
    out.payload.receive_into(buf.data(), buf.size());
    ASSERT_FALSE(decode(wire, out));
    EXPECT_EQ(out.payload.data(), buf.data());
    EXPECT_EQ(out.payload.str(), data);

    echo_msg small;
    small.payload.receive_into(buf.data(), 100);
    EXPECT_EQ(decode(wire, small), make_error_code(errc::buffer_too_small));
}

TEST(rpc_message, lengths_that_do_not_add_up_are_malformed) {
    auto wire = flatten(sample());
    rich out;
    auto shorter = wire;
    shorter.pop_back();
    EXPECT_EQ(decode(shorter, out), make_error_code(errc::malformed_frame));
    auto longer = wire;
    longer.push_back(0);
    EXPECT_EQ(decode(longer, out), make_error_code(errc::malformed_frame));
    std::vector<uint8_t> truncated(wire.begin(), wire.begin() + 5);
    EXPECT_EQ(decode(truncated, out), make_error_code(errc::malformed_frame));
    // The path's length (a vector of 8-byte points) set to 7 bytes: not whole elements.
    auto odd = wire;
    uint32_t seven = 7;
    std::memcpy(odd.data() + 1 + 1 + 8 + 8, &seven, 4);
    EXPECT_EQ(decode(odd, out), make_error_code(errc::malformed_frame));
    // A length far beyond the frame is refused before anything is allocated for it.
    auto huge = wire;
    uint32_t big = 0xfffffff0;
    std::memcpy(huge.data() + 1 + 1 + 8, &big, 4);
    EXPECT_EQ(decode(huge, out), make_error_code(errc::malformed_frame));
}

TEST(rpc_message, decoding_the_fixed_part_allocates_nothing_for_the_bytes_to_come) {
    // A fixed part that announces 8 MiB of text and 8 MiB of values: the fields were sized
    // (and zero-filled) for them before any arrived, so a peer pinned 16 MiB with a few bytes.
    std::vector<uint8_t> fixed(fixed_size<inner>());
    uint32_t eight_mib = 8 << 20;
    std::memcpy(fixed.data(), &eight_mib, 4);
    std::memcpy(fixed.data() + 4, &eight_mib, 4);
    inner m;
    rx_list t;
    ASSERT_FALSE(decode_fixed(fixed.data(), size_t(16) << 20, m, t));
    EXPECT_LT(m.name.capacity(), size_t(64) << 10);
    EXPECT_LT(m.values.capacity(), size_t(64) << 10);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].len, size_t(8) << 20);
    EXPECT_EQ(t[1].unit, sizeof(uint32_t));

    // The bytes then come in pieces; storage grows with them.
    std::string text = std::string(3 << 20, 'a') + std::string((8 << 20) - (3 << 20), 'b');
    t[0].append(t[0].field, reinterpret_cast<const uint8_t*>(text.data()), 100, t[0].len);
    EXPECT_EQ(m.name, std::string(100, 'a'));
    EXPECT_LE(m.name.capacity(), size_t(64) << 10);
    t[0].append(t[0].field, reinterpret_cast<const uint8_t*>(text.data()) + 100, (3 << 20) - 100,
                t[0].len);
    EXPECT_LE(m.name.capacity(), size_t(6) << 20); // within twice what came
    t[0].append(t[0].field, reinterpret_cast<const uint8_t*>(text.data()) + (3 << 20),
                text.size() - (3 << 20), t[0].len);
    EXPECT_EQ(m.name, text);
    EXPECT_LE(m.name.capacity(), 2 * text.size());
    std::vector<uint32_t> values(2 << 20);
    for (size_t i = 0; i < values.size(); ++i)
        values[i] = uint32_t(i * 2654435761u);
    auto* v = reinterpret_cast<const uint8_t*>(values.data());
    t[1].append(t[1].field, v + 1, 4 * 1000, t[1].len); // an odd address: copied, not cast
    EXPECT_EQ(m.values.size(), 1000u);
    EXPECT_EQ(std::memcmp(m.values.data(), v + 1, 4000), 0);
}

TEST(rpc_message, owned_bytes_grow_with_what_came_and_reuse_storage_large_enough) {
    echo_msg in;
    std::string data(200 << 10, 'z');
    in.payload = bytes::view(data.data(), data.size());
    auto wire = flatten(in);
    echo_msg out;
    rx_list t;
    ASSERT_FALSE(decode_fixed(wire.data(), wire.size() - fixed_size<echo_msg>(), out, t));
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].to, nullptr); // no storage yet: it grows as the bytes come
    EXPECT_TRUE(out.payload.empty());
    const uint8_t* p = wire.data() + fixed_size<echo_msg>();
    t[0].append(t[0].field, p, 10, t[0].len);
    t[0].append(t[0].field, p + 10, data.size() - 10, t[0].len);
    EXPECT_EQ(out.payload.str(), data);
    const uint8_t* storage = out.payload.data();
    // Decoded again into the same message: the storage it has is large enough, and is used
    // in place.
    rx_list again;
    ASSERT_FALSE(decode_fixed(wire.data(), wire.size() - fixed_size<echo_msg>(), out, again));
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].to, storage);
}

TEST(rpc_message, schema_hash_follows_types_and_version) {
    EXPECT_EQ(schema_hash<echo_msg>(), schema_hash<echo_msg>());
    EXPECT_NE(schema_hash<echo_msg>(), schema_hash<echo_msg_v2>());
    EXPECT_NE(schema_hash<echo_msg>(), schema_hash<rich>());
    EXPECT_NE(schema_hash<inner>(), schema_hash<sleep_req>());
    EXPECT_NE(echo.schema(), echo_v2.schema());
}

} // namespace
} // namespace gluon::rpc::testing
