#include "framing.h"

#include <algorithm>
#include <cstring>

namespace gluon::rpc::grpc::detail {

void put_prefix(char* p, size_t n) noexcept {
    auto k = static_cast<uint32_t>(n);
    p[0] = 0;
    p[1] = static_cast<char>(k >> 24);
    p[2] = static_cast<char>(k >> 16);
    p[3] = static_cast<char>(k >> 8);
    p[4] = static_cast<char>(k);
}

void append_message(std::string& out, std::string_view msg) {
    char p[5];
    put_prefix(p, msg.size());
    out.append(p, 5);
    out.append(msg);
}

char* message_reader::space(size_t n) {
    if (beg_ == end_) beg_ = end_ = 0;
    if (cap_ - end_ >= n) return buf_.get() + end_;
    size_t used = end_ - beg_;
    if (beg_ > 0 && cap_ - used >= n) {  // room once the consumed front is dropped
        std::memmove(buf_.get(), buf_.get() + beg_, used);
    } else {
        size_t cap = std::max(cap_ * 2, used + n);
        std::unique_ptr<char[]> bigger(new char[cap]);  // not zeroed: bytes are written before read
        if (used) std::memcpy(bigger.get(), buf_.get() + beg_, used);
        buf_ = std::move(bigger);
        cap_ = cap;
    }
    beg_ = 0;
    end_ = used;
    return buf_.get() + end_;
}

void message_reader::feed(std::string_view bytes) {
    std::memcpy(space(bytes.size()), bytes.data(), bytes.size());
    filled(bytes.size());
}

message_reader::step message_reader::next(std::string_view& msg) {
    if (end_ - beg_ < 5) return step::more;
    const auto* p = reinterpret_cast<const unsigned char*>(buf_.get() + beg_);
    uint32_t flag = p[0];
    uint32_t n = uint32_t(p[1]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 8 | p[4];
    if (flag > 1) return step::bad;
    if (flag == 1) return step::compressed;
    if (n > max_) return step::too_large;
    if (end_ - beg_ - 5 < n) return step::more;
    msg = {buf_.get() + beg_ + 5, n};
    beg_ += 5 + n;
    return step::message;
}

message_reader::step message_reader::next(std::string& msg) {
    std::string_view v;
    step s = next(v);
    if (s == step::message) msg.assign(v);
    return s;
}

bool parse_timeout(std::string_view v, duration& out) noexcept {
    if (v.size() < 2 || v.size() > 9) return false;
    int64_t n = 0;
    for (char c : v.substr(0, v.size() - 1)) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
    }
    int64_t unit_ns;
    switch (v.back()) {
        case 'H': unit_ns = 3'600'000'000'000; break;
        case 'M': unit_ns = 60'000'000'000; break;
        case 'S': unit_ns = 1'000'000'000; break;
        case 'm': unit_ns = 1'000'000; break;
        case 'u': unit_ns = 1'000; break;
        case 'n': unit_ns = 1; break;
        default: return false;
    }
    // Eight digits of hours pass what nanoseconds hold (from 2562048H on: grpc-go sends that
    // for its longest deadlines, and format_timeout for any past 190 years); such a deadline is
    // none rather than an overflow, which wrapped it into one already past.
    out = n > INT64_MAX / unit_ns ? forever : duration(n * unit_ns);
    return true;
}

std::string format_timeout(duration d) {
    using namespace std::chrono;
    int64_t ns = duration_cast<nanoseconds>(d).count();
    if (ns < 0) ns = 0;
    struct unit {
        int64_t ns;
        char c;
    };
    for (unit u : {unit{1, 'n'}, unit{1000, 'u'}, unit{1000000, 'm'}, unit{1000000000, 'S'}, unit{60000000000, 'M'},
                   unit{3600000000000, 'H'}}) {
        int64_t v = (ns + u.ns - 1) / u.ns;  // rounded up: never shorter than asked
        if (v < 100000000) return std::to_string(v) + u.c;
    }
    return "99999999H";
}

std::string percent_encode(std::string_view s) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c <= 0x7e && c != '%') {
            out += static_cast<char>(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

std::string percent_decode(std::string_view s) {
    auto val = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && val(s[i + 1]) >= 0 && val(s[i + 2]) >= 0) {
            out += static_cast<char>(val(s[i + 1]) * 16 + val(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace gluon::rpc::grpc::detail
