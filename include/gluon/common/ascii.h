// ASCII helpers shared by the protocol modules (HTTP field names, Redis command names).
#pragma once

#include <string_view>

namespace gluon {

/// ASCII case-insensitive equality (other bytes compare as they are).
constexpr bool ascii_iequals(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    for (size_t i = 0; i < a.size(); ++i)
        if (lower(a[i]) != lower(b[i])) return false;
    return true;
}

}  // namespace gluon
