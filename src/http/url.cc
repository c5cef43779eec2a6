#include <charconv>

#include "chars.h"
#include "gluon/http/client.h"

namespace gluon::http {

namespace {

/// A request target may only hold visible ASCII (no space, no control: no request-line injection).
bool valid_target(std::string_view t) {
    for (char c : t)
        if (!detail::is_target_char(c)) return false;
    return !t.empty() && t[0] == '/';
}

uint16_t default_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

}  // namespace

result<url> url::parse(std::string_view s) {
    url u;
    size_t sep = s.find("://");
    if (sep == std::string_view::npos) return errno_error(EINVAL);
    std::string_view scheme = s.substr(0, sep);
    if (iequals(scheme, "http")) u.scheme = "http";
    else if (iequals(scheme, "https")) u.scheme = "https";
    else return errno_error(EINVAL);
    s.remove_prefix(sep + 3);
    size_t end = s.find_first_of("/?#");
    std::string_view auth = s.substr(0, end);
    std::string_view rest = end == std::string_view::npos ? std::string_view{} : s.substr(end);
    if (auth.empty() || auth.find('@') != std::string_view::npos) return errno_error(EINVAL);
    std::string_view port;
    if (auth[0] == '[') {
        size_t close = auth.find(']');
        if (close == std::string_view::npos) return errno_error(EINVAL);
        u.host = std::string(auth.substr(1, close - 1));
        std::string_view after = auth.substr(close + 1);
        if (!after.empty()) {
            if (after[0] != ':') return errno_error(EINVAL);
            port = after.substr(1);
        }
    } else {
        size_t colon = auth.rfind(':');
        u.host = std::string(auth.substr(0, colon));
        if (colon != std::string_view::npos) port = auth.substr(colon + 1);
    }
    if (u.host.empty()) return errno_error(EINVAL);
    for (char c : u.host)
        if (!detail::is_target_char(c) || c == '/' || c == '?' || c == '#') return errno_error(EINVAL);
    u.port = default_port(u.scheme);
    if (!port.empty()) {
        unsigned v = 0;
        auto r = std::from_chars(port.data(), port.data() + port.size(), v);
        if (r.ec != std::errc{} || r.ptr != port.data() + port.size() || v == 0 || v > 65535) return errno_error(EINVAL);
        u.port = static_cast<uint16_t>(v);
    }
    rest = rest.substr(0, rest.find('#'));
    u.target = rest.empty() || rest[0] == '?' ? "/" + std::string(rest) : std::string(rest);
    if (!valid_target(u.target)) return errno_error(EINVAL);
    return u;
}

result<url> url::resolve(std::string_view loc) const {
    if (loc.find("://") != std::string_view::npos) return parse(loc);
    if (loc.substr(0, 2) == "//") return parse(scheme + ":" + std::string(loc));
    url u = *this;
    loc = loc.substr(0, loc.find('#'));
    if (loc.empty()) return u;
    if (loc[0] == '/') {
        u.target = std::string(loc);
    } else {
        std::string_view path = std::string_view(target).substr(0, target.find('?'));
        u.target = std::string(path.substr(0, path.rfind('/') + 1)) + std::string(loc);
    }
    if (!valid_target(u.target)) return errno_error(EINVAL);
    return u;
}

std::string url::authority() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    if (port != default_port(scheme)) h += ":" + std::to_string(port);
    return h;
}

std::string url::to_string() const { return scheme + "://" + authority() + target; }

}  // namespace gluon::http
