// Response fields as nghttp2 name/value pairs: names lowercased (HTTP/2 requires it), fields
// that are specific to an HTTP/1.1 connection left out.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gluon::http::detail {

class nv_list {
public:
    /// Adds a pair; the name is copied lowercased, the value must outlive the list's use.
    void add(std::string_view name, std::string_view value);
    /// Adds "Name: value\r\n" lines (a response's fields or trailers).
    void add_lines(std::string_view lines);
    /// The pairs, valid until the next add.
    const nghttp2_nv* data();
    void clear() noexcept {
        names_.clear();
        refs_.clear();
    }
    size_t size() const noexcept { return refs_.size(); }

private:
    struct ref {
        uint32_t name, name_len;
        std::string_view value;
    };
    std::string names_;
    std::vector<ref> refs_;
    std::vector<nghttp2_nv> nv_;
};

/// True for the fields HTTP/2 forbids (RFC 9113 8.2.2): Connection, Keep-Alive,
/// Proxy-Connection, Transfer-Encoding, Upgrade (case-insensitive).
bool connection_specific(std::string_view name) noexcept;

}  // namespace gluon::http::detail
