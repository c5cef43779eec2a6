#include "gluon/fs/path.h"

#include <memory>
#include <vector>

namespace gluon::fs::path {

std::string normalize(std::string_view p) {
    const bool abs = !p.empty() && p.front() == '/';
    std::vector<std::string_view> parts;
    size_t i = 0;
    while (i < p.size()) {
        size_t j = p.find('/', i);
        if (j == std::string_view::npos) j = p.size();
        std::string_view part = p.substr(i, j - i);
        i = j + 1;
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            if (!parts.empty() && parts.back() != "..") {
                parts.pop_back();
            } else if (!abs) {
                parts.push_back(part);
            }
            continue;
        }
        parts.push_back(part);
    }
    std::string out = abs ? "/" : "";
    for (size_t k = 0; k < parts.size(); ++k) {
        if (k) out += '/';
        out += parts[k];
    }
    if (out.empty()) out = ".";
    return out;
}

std::string join(std::string_view a, std::string_view b) {
    if (b.empty()) return std::string(a);
    if (a.empty() || b.front() == '/') return std::string(b);
    std::string out(a);
    if (out.back() != '/') out += '/';
    out += b;
    return out;
}

std::string_view basename(std::string_view p) {
    while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
    size_t k = p.rfind('/');
    return k == std::string_view::npos || p.size() == 1 ? p : p.substr(k + 1);
}

std::string dirname(std::string_view p) {
    while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
    size_t k = p.rfind('/');
    if (k == std::string_view::npos) return ".";
    if (k == 0) return "/";
    return std::string(p.substr(0, k));
}

bool escapes(std::string_view relative) {
    std::string n = normalize(relative);
    return n == ".." || n.rfind("../", 0) == 0;
}

bool has_nul(std::string_view p) { return p.find('\0') != std::string_view::npos; }

result<void> walk(filesystem& fs, std::string_view root,
                  const std::function<walk_action(const std::string& path, const struct stat& st)>& visit) {
    std::string r(root);
    auto st = GLUON_TRY(fs.lstat(r));
    walk_action a = visit(r, st);
    if (a != walk_action::next || !S_ISDIR(st.st_mode)) return {};
    // The directories being listed are kept on the heap, not in frames of a recursion: a fiber's
    // stack held only a few hundred levels, and a deeper tree (one-letter names reach two
    // thousand within PATH_MAX) overflowed it and ended the process.
    struct level {
        std::string dir;
        std::unique_ptr<directory> listing;
    };
    auto top = GLUON_TRY(fs.opendir(r));
    std::vector<level> open;
    open.push_back(level{std::move(r), std::move(top)});
    while (!open.empty()) {
        auto e = GLUON_TRY(open.back().listing->next());
        if (!e) {
            open.pop_back();
            continue;
        }
        std::string p = join(open.back().dir, e->name);
        auto est = fs.lstat(p);
        if (!est) {
            if (est.error() == std::errc::no_such_file_or_directory) continue;  // removed meanwhile
            return unexpected(est.error());
        }
        a = visit(p, *est);
        if (a == walk_action::stop) return {};
        if (a == walk_action::next && S_ISDIR(est->st_mode)) {
            auto sub = GLUON_TRY(fs.opendir(p));
            open.push_back(level{std::move(p), std::move(sub)});
        }
    }
    return {};
}

}  // namespace gluon::fs::path
