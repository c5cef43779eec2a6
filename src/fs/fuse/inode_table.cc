#include "inode_table.h"

#include <mutex>
#include <vector>

namespace gluon::fs::detail {

inode_table::inode_table() {
    by_ino_[1] = {"/", 1};
    by_path_["/"] = 1;
}

std::optional<std::string> inode_table::path(uint64_t ino) {
    std::lock_guard g(lock_);
    auto it = by_ino_.find(ino);
    if (it == by_ino_.end()) return std::nullopt;
    return it->second.path;
}

std::optional<std::string> inode_table::child(uint64_t parent, std::string_view name) {
    auto p = path(parent);
    if (!p) return std::nullopt;
    if (*p != "/") *p += '/';
    *p += name;
    return p;
}

uint64_t inode_table::remember(const std::string& path) {
    std::lock_guard g(lock_);
    auto [it, fresh] = by_path_.try_emplace(path, next_);
    if (fresh) by_ino_[next_++] = {path, 0};
    ++by_ino_[it->second].lookups;
    return it->second;
}

void inode_table::forget(uint64_t ino, uint64_t n) {
    if (ino == 1) return;
    std::lock_guard g(lock_);
    auto it = by_ino_.find(ino);
    if (it == by_ino_.end()) return;
    it->second.lookups = it->second.lookups > n ? it->second.lookups - n : 0;
    if (it->second.lookups > 0) return;
    if (auto p = by_path_.find(it->second.path); p != by_path_.end() && p->second == ino) by_path_.erase(p);
    by_ino_.erase(it);
}

void inode_table::renamed(const std::string& from, const std::string& to) {
    std::lock_guard g(lock_);
    // Whatever the target named before is replaced.
    if (auto t = by_path_.find(to); t != by_path_.end()) by_path_.erase(t);
    std::vector<std::pair<std::string, uint64_t>> moved;
    for (auto it = by_path_.begin(); it != by_path_.end();) {
        const std::string& p = it->first;
        if (p == from || (p.size() > from.size() && p.compare(0, from.size(), from) == 0 && p[from.size()] == '/')) {
            moved.emplace_back(to + p.substr(from.size()), it->second);
            it = by_path_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto& [p, ino] : moved) {
        by_ino_[ino].path = p;
        by_path_[p] = ino;
    }
}

void inode_table::removed(const std::string& path) {
    std::lock_guard g(lock_);
    by_path_.erase(path);
}

}  // namespace gluon::fs::detail
