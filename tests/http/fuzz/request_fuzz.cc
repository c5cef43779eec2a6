// libFuzzer target: the request head parser. Checks that whatever the input, the parser stays in
// the buffer, reports a consistent framing, and gives the same answer when the input arrives in
// two pieces (the incremental scan must not change the verdict).
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "gluon/http/parser.h"

using namespace gluon::http;

namespace {
void check(bool ok) {
    if (!ok) std::abort();
}

parse_result parse(std::string_view in, request_head& h, std::vector<header>& f, size_t split) {
    h = {};
    h.headers = f.data();
    limits lim;
    lim.max_head_bytes = 4096;
    lim.max_headers = 32;
    size_t scanned = 0;
    if (split < in.size()) {
        parse_result first = parse_request(in.substr(0, split), h, lim, scanned);
        if (first.state != parse_result::incomplete) return first;
    }
    return parse_request(in, h, lim, scanned);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    std::vector<header> f(32);
    request_head h;
    parse_result whole = parse(in, h, f, size);
    if (whole.state == parse_result::complete) {
        check(whole.consumed <= size && whole.consumed >= 4);
        check(in.substr(whole.consumed - 4, 4) == "\r\n\r\n");
        auto inside = [&](std::string_view v) { return v.empty() || (v.data() >= in.data() && v.data() + v.size() <= in.data() + whole.consumed); };
        check(inside(h.target) && inside(h.method_name) && inside(h.host));
        check((inside(h.path) || h.path == "/") && !h.path.empty() && inside(h.query) && inside(h.target_authority));
        for (size_t i = 0; i < h.header_count; ++i) check(inside(h.headers[i].name) && inside(h.headers[i].value));
        check(h.body != framing::to_close);
        check(h.body != framing::length || h.content_length > 0);
    } else if (whole.state == parse_result::invalid) {
        check(whole.status >= 400 && whole.status < 600);
    }
    std::vector<header> f2(32);
    request_head h2;
    parse_result split = parse(in, h2, f2, size / 2);
    check(split.state == whole.state && split.status == whole.status && split.consumed == whole.consumed);
    return 0;
}
