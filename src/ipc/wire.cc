// shmipc control messages: header checks and body codecs.
#include "wire.h"

#include <cstring>

#include "gluon/ipc/error.h"

namespace gluon::ipc::wire {

result<header> decode_header(const uint8_t* p, uint32_t max_length) noexcept {
    header h{get_u32(p), p[6], static_cast<type>(p[7])};
    if (get_u16(p + 4) != k_magic || h.version == 0 || p[7] > 9) return unexpected(make_error_code(errc::bad_header));
    uint32_t fixed = 0;
    switch (h.kind) {
    case type::polling:
    case type::exchange_proto_version:
    case type::ack_share_memory:
    case type::ack_ready_recv_fd: fixed = 8; break;
    case type::stream_close: fixed = 12; break;
    case type::hot_restart:
    case type::hot_restart_ack: fixed = 16; break;
    case type::share_memory_by_file_path:
    case type::share_memory_by_memfd:
        if (h.length < k_header_size + 6 || h.length > k_header_size + 4 + 2 * k_max_path)
            return unexpected(make_error_code(errc::bad_message));
        return h;
    case type::fallback_data:
        if (h.length < 16) return unexpected(make_error_code(errc::bad_message));
        if (h.length > max_length) return unexpected(make_error_code(errc::message_too_large));
        return h;
    }
    if (h.length != fixed) return unexpected(make_error_code(errc::bad_message));
    return h;
}

result<void> decode_paths(std::span<const uint8_t> body, share_memory_paths& out) {
    auto bad = [] { return unexpected(make_error_code(errc::bad_message)); };
    std::string* dst[2] = {&out.queue_path, &out.buffer_path};
    size_t at = 0;
    for (std::string* s : dst) {
        if (body.size() - at < 2) return bad();
        size_t n = get_u16(body.data() + at);
        at += 2;
        if (n == 0 || n > k_max_path || body.size() - at < n) return bad();
        s->assign(reinterpret_cast<const char*>(body.data() + at), n);
        if (s->find('\0') != std::string::npos) return bad();
        at += n;
    }
    if (at != body.size()) return bad();
    return {};
}

result<std::string> encode_paths(type t, uint8_t version, std::string_view queue_path,
                                 std::string_view buffer_path) {
    for (std::string_view p : {queue_path, buffer_path})
        if (p.empty() || p.size() > k_max_path) return errno_error(EINVAL);
    std::string out(k_header_size + 4 + queue_path.size() + buffer_path.size(), '\0');
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    encode_header(p, uint32_t(out.size()), version, t);
    p += k_header_size;
    put_u16(p, uint16_t(queue_path.size()));
    std::memcpy(p + 2, queue_path.data(), queue_path.size());
    p += 2 + queue_path.size();
    put_u16(p, uint16_t(buffer_path.size()));
    std::memcpy(p + 2, buffer_path.data(), buffer_path.size());
    return out;
}

result<fallback> decode_fallback(std::span<const uint8_t> body) noexcept {
    if (body.size() < 8) return unexpected(make_error_code(errc::bad_message));
    return fallback{get_u32(body.data()), get_u32(body.data() + 4), body.subspan(8)};
}

void encode_fallback_prefix(uint8_t* out, uint8_t version, uint32_t stream_id, size_t n) noexcept {
    encode_header(out, uint32_t(16 + n), version, type::fallback_data);
    put_u32(out + 8, stream_id);
    put_u32(out + 12, 0);
}

result<size_t> next_message(std::span<const uint8_t> buf, uint32_t max_length, message& out) noexcept {
    if (buf.size() < k_header_size) return size_t{0};
    header h = GLUON_TRY(decode_header(buf.data(), max_length));
    if (buf.size() < h.length) return size_t{0};
    out.head = h;
    out.body = buf.subspan(k_header_size, h.length - k_header_size);
    return size_t{h.length};
}

}  // namespace gluon::ipc::wire
