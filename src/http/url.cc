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

/// Whether a reference starts with a scheme (RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" /
/// "." ) ":"), as opposed to a relative reference whose query or path holds "://".
bool has_scheme(std::string_view r) {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
    if (r.empty() || !alpha(r[0])) return false;
    for (char c : r.substr(1)) {
        if (c == ':') return true;
        if (!alpha(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') return false;
    }
    return false;
}

/// RFC 3986 5.2.4: "." and ".." segments removed from a path, so that a redirect cannot name
/// a target a server would read as another.
std::string remove_dot_segments(std::string_view in) {
    std::string out;
    auto drop_last = [&out] {
        size_t slash = out.rfind('/');
        out.erase(slash == std::string::npos ? 0 : slash);
    };
    while (!in.empty()) {
        if (in.starts_with("../")) {
            in.remove_prefix(3);
        } else if (in.starts_with("./")) {
            in.remove_prefix(2);
        } else if (in.starts_with("/./")) {
            in.remove_prefix(2);
        } else if (in == "/.") {
            in = "/";
        } else if (in.starts_with("/../")) {
            in.remove_prefix(3);
            drop_last();
        } else if (in == "/..") {
            in = "/";
            drop_last();
        } else if (in == "." || in == "..") {
            in = {};
        } else {
            size_t end = in.find('/', in[0] == '/' ? 1 : 0);
            out.append(in.substr(0, end));
            in.remove_prefix(end == std::string_view::npos ? in.size() : end);
        }
    }
    return out;
}

/// The target with dot segments removed from its path (its query is left as it is).
std::string without_dot_segments(std::string_view target) {
    size_t q = target.find('?');
    std::string t = remove_dot_segments(target.substr(0, q));
    if (q != std::string_view::npos) t.append(target.substr(q));
    return t;
}

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
    // RFC 3986 5.2.2, for http(s) bases: the fragment is the client's own, not part of the target.
    loc = loc.substr(0, loc.find('#'));
    url u;
    if (has_scheme(loc)) {
        u = GLUON_TRY(parse(loc));
    } else if (loc.starts_with("//")) {  // a network-path reference: a new authority
        u = GLUON_TRY(parse(scheme + ":" + std::string(loc)));
    } else {
        u = *this;
        std::string_view base_path = std::string_view(target).substr(0, target.find('?'));
        size_t q = loc.find('?');
        std::string_view path = loc.substr(0, q);
        std::string_view query = q == std::string_view::npos ? std::string_view() : loc.substr(q);
        if (path.empty()) {  // the base's path, and its query unless the reference has one
            if (q == std::string_view::npos) return u;
            u.target = std::string(base_path) + std::string(query);
        } else if (path[0] == '/') {
            u.target = std::string(path) + std::string(query);
        } else {  // merged with the base path's directory (RFC 3986 5.2.3)
            u.target = std::string(base_path.substr(0, base_path.rfind('/') + 1)) + std::string(path) +
                       std::string(query);
        }
    }
    u.target = without_dot_segments(u.target);
    if (u.target.empty() || u.target[0] != '/') u.target.insert(0, "/");
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
