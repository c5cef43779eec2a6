// libFuzzer target: the chunked decoder. Decoding in one piece and byte by byte must agree on
// the body, on where the body ends and on the verdict; data views must lie inside the input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gluon/http/parser.h"

using namespace gluon::http;

namespace {
struct outcome {
    std::string body;
    size_t used = 0;
    bool done = false, error = false;
};

outcome decode(std::string_view in, size_t piece) {
    outcome o;
    chunked_decoder d(64, 256);
    std::string pending;
    size_t fed = 0;
    while (!o.done && !o.error) {
        auto st = d.next(pending);
        if (st.error) {
            o.error = true;
            break;
        }
        if (!st.data.empty() &&
            (st.data.data() < pending.data() || st.data.data() + st.data.size() > pending.data() + pending.size()))
            std::abort();
        o.body += st.data;
        pending.erase(0, st.consumed);
        o.used += st.consumed;
        o.done = st.done;
        if (st.consumed == 0 && st.data.empty()) {
            if (fed == in.size()) break;
            size_t n = in.size() - fed < piece ? in.size() - fed : piece;
            pending.append(in.substr(fed, n));
            fed += n;
        }
    }
    if (o.body.size() != d.total()) std::abort();
    return o;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    outcome whole = decode(in, size ? size : 1);
    outcome bytes = decode(in, 1);
    if (whole.error != bytes.error || whole.done != bytes.done) std::abort();
    if (!whole.error && (whole.body != bytes.body || whole.used != bytes.used)) std::abort();
    return 0;
}
