// libFuzzer target: the WebSocket frame decoder and the UTF-8 validator on a stream of client
// frames. Invariants: a head is incomplete on every proper prefix and complete (with the same
// fields) once whole; heads re-encoded decode to the same fields; control frames are final and
// short; unmasking in pieces equals unmasking whole; text validated in pieces gets the verdict
// of the whole message.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../../../src/http/websocket_frame.h"
#include "../../../src/http/websocket_utf8.h"

using namespace gluon::http::ws;

namespace {

bool same(const frame_head& a, const frame_head& b) {
    return a.fin == b.fin && a.opcode == b.opcode && a.masked == b.masked && a.mask == b.mask &&
           a.length == b.length && a.head_bytes == b.head_bytes;
}

void check_text(const std::string& msg, size_t piece) {
    utf8_validator whole;
    bool ok = whole.feed(reinterpret_cast<const uint8_t*>(msg.data()), msg.size()) && whole.complete();
    utf8_validator parts;
    bool ok2 = true;
    for (size_t i = 0; i < msg.size() && ok2; i += piece) {
        size_t k = msg.size() - i < piece ? msg.size() - i : piece;
        ok2 = parts.feed(reinterpret_cast<const uint8_t*>(msg.data()) + i, k);
    }
    ok2 = ok2 && parts.complete();
    if (ok != ok2) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const bool from_client = data[0] & 1;
    const size_t piece = 1 + (data[0] >> 1) % 7;
    size_t at = 1;
    std::string msg;
    bool in_text = false;
    while (at < size) {
        const uint8_t* p = data + at;
        const size_t n = size - at;
        frame_head h;
        auto r = decode_head(p, n, from_client, h);
        if (r.state == decode_result::invalid) {
            if (r.close_code != 1002) std::abort();
            break;
        }
        if (r.state == decode_result::incomplete) break;
        if (h.head_bytes > n || h.head_bytes < 2 || h.head_bytes > k_max_head) std::abort();
        for (size_t cut = 0; cut < h.head_bytes; ++cut) {
            frame_head t;
            if (decode_head(p, cut, from_client, t).state != decode_result::incomplete) std::abort();
        }
        if (is_control(h.opcode) && (!h.fin || h.length > k_max_control_payload)) std::abort();
        uint8_t re[k_max_head];
        size_t rn = encode_head(re, h.opcode, h.fin, h.length, h.masked, h.mask);
        frame_head back;
        if (decode_head(re, rn, from_client, back).state != decode_result::complete) std::abort();
        back.head_bytes = h.head_bytes;  // a non-minimal length encoding re-encodes shorter
        if (!same(h, back)) std::abort();
        at += h.head_bytes;
        size_t len = h.length < size - at ? static_cast<size_t>(h.length) : size - at;
        std::string whole(len, '\0'), parts(len, '\0');
        mask_copy(reinterpret_cast<uint8_t*>(whole.data()), data + at, len, h.mask, 0);
        for (size_t i = 0; i < len; i += piece) {
            size_t k = len - i < piece ? len - i : piece;
            mask_copy(reinterpret_cast<uint8_t*>(parts.data()) + i, data + at + i, k, h.mask, i);
        }
        if (whole != parts) std::abort();
        at += len;
        if (h.opcode == op_text) in_text = true, msg.clear();
        if (!is_control(h.opcode) && in_text) {
            msg += whole;
            if (h.fin) {
                check_text(msg, piece);
                in_text = false;
            }
        }
    }
    return 0;
}
