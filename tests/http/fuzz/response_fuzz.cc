// libFuzzer target: the response head parser, for every request method that changes framing.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "gluon/http/parser.h"

using namespace gluon::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    // The first byte picks the request method; the rest is the response.
    method verbs[] = {method::get, method::head, method::connect};
    method verb = verbs[data[0] % 3];
    std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
    std::vector<header> f(32);
    response_head h;
    h.headers = f.data();
    limits lim;
    lim.max_head_bytes = 4096;
    lim.max_headers = 32;
    size_t scanned = 0;
    parse_result r = parse_response(in, h, lim, scanned, verb);
    if (r.state == parse_result::complete) {
        if (r.consumed > in.size() || h.status < 100 || h.status > 999) std::abort();
        if (verb == method::head && h.body != framing::none) std::abort();
        if ((h.status == 204 || h.status == 304) && h.body != framing::none) std::abort();
        if (h.body == framing::to_close && h.keep_alive) std::abort();
    }
    return 0;
}
