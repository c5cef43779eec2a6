#include "fields.h"

#include "gluon/http/parser.h"

namespace gluon::http::detail {

bool connection_specific(std::string_view n) noexcept {
    return iequals(n, "connection") || iequals(n, "keep-alive") || iequals(n, "proxy-connection") ||
           iequals(n, "transfer-encoding") || iequals(n, "upgrade");
}

void nv_list::add(std::string_view name, std::string_view value) {
    auto at = static_cast<uint32_t>(names_.size());
    names_.resize(at + name.size());
    char* to = names_.data() + at;
    for (char c : name) *to++ = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    refs_.push_back({at, static_cast<uint32_t>(name.size()), value});
}

void nv_list::add_lines(std::string_view lines) {
    while (!lines.empty()) {
        size_t eol = lines.find("\r\n");
        std::string_view line = lines.substr(0, eol);
        lines.remove_prefix(eol == std::string_view::npos ? lines.size() : eol + 2);
        size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        if (!connection_specific(name)) add(name, value);
    }
}

const nghttp2_nv* nv_list::data() {
    nv_.clear();
    nv_.reserve(refs_.size());
    for (const ref& r : refs_) {
        nghttp2_nv v;
        v.name = reinterpret_cast<uint8_t*>(names_.data() + r.name);
        v.namelen = r.name_len;
        v.value = reinterpret_cast<uint8_t*>(const_cast<char*>(r.value.data()));
        v.valuelen = r.value.size();
        v.flags = NGHTTP2_NV_FLAG_NONE;
        nv_.push_back(v);
    }
    return nv_.data();
}

}  // namespace gluon::http::detail
