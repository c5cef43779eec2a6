#include "framing.h"

namespace gluon::rpc::grpc::detail {

void append_message(std::string& out, std::string_view msg) {
    auto n = static_cast<uint32_t>(msg.size());
    char p[5] = {0, static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                 static_cast<char>(n)};
    out.append(p, 5);
    out.append(msg);
}

message_reader::step message_reader::next(std::string& msg) {
    if (buf_.size() - pos_ < 5) return step::more;
    auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(buf_[pos_ + i])); };
    uint32_t flag = b(0);
    uint32_t n = b(1) << 24 | b(2) << 16 | b(3) << 8 | b(4);
    if (flag > 1) return step::bad;
    if (flag == 1) return step::compressed;
    if (n > max_) return step::too_large;
    if (buf_.size() - pos_ - 5 < n) return step::more;
    msg.assign(buf_, pos_ + 5, n);
    pos_ += 5 + n;
    if (pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > 64 * 1024) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
    return step::message;
}

bool parse_timeout(std::string_view v, duration& out) noexcept {
    if (v.size() < 2 || v.size() > 9) return false;
    int64_t n = 0;
    for (char c : v.substr(0, v.size() - 1)) {
        if (c < '0' || c > '9') return false;
        n = n * 10 + (c - '0');
    }
    using namespace std::chrono;
    switch (v.back()) {
        case 'H': out = duration_cast<duration>(hours(n)); return true;
        case 'M': out = duration_cast<duration>(minutes(n)); return true;
        case 'S': out = duration_cast<duration>(seconds(n)); return true;
        case 'm': out = duration_cast<duration>(milliseconds(n)); return true;
        case 'u': out = duration_cast<duration>(microseconds(n)); return true;
        case 'n': out = duration_cast<duration>(nanoseconds(n)); return true;
        default: return false;
    }
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
