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
    if (it == by_ino_.end() || it->second.path.empty()) return std::nullopt;
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
    if (from == to) return;  // rename(2) of a name onto itself changes nothing
    std::lock_guard g(lock_);
    std::vector<std::pair<std::string, uint64_t>> moved;
    for (auto it = by_path_.begin(); it != by_path_.end();) {
        if (under(it->first, from)) {
            moved.emplace_back(to + it->first.substr(from.size()), it->second);
        } else if (under(it->first, to)) {
            unname(it->second);  // replaced: what to named before
        } else {
            ++it;
            continue;
        }
        it = by_path_.erase(it);
    }
    for (auto& [p, ino] : moved) {
        by_ino_[ino].path = p;
        by_path_[p] = ino;
    }
}

void inode_table::removed(const std::string& path) {
    std::lock_guard g(lock_);
    if (auto it = by_path_.find(path); it != by_path_.end()) {
        unname(it->second);
        by_path_.erase(it);
    }
}

void inode_table::opened(uint64_t ino, const std::shared_ptr<file>& f) {
    std::lock_guard g(lock_);
    if (auto it = by_ino_.find(ino); it != by_ino_.end()) it->second.open.push_back(f);
}

void inode_table::closed(uint64_t ino, const file* f) {
    std::lock_guard g(lock_);
    auto it = by_ino_.find(ino);
    if (it == by_ino_.end()) return;
    std::erase_if(it->second.open, [f](const std::weak_ptr<file>& w) {
        auto o = w.lock();
        return !o || o.get() == f;
    });
}

std::shared_ptr<file> inode_table::open_file(uint64_t ino) {
    std::lock_guard g(lock_);
    auto it = by_ino_.find(ino);
    if (it == by_ino_.end()) return nullptr;
    for (auto& w : it->second.open)
        if (auto f = w.lock()) return f;
    return nullptr;
}

bool inode_table::under(const std::string& p, const std::string& top) {
    return p == top || (p.size() > top.size() && p.compare(0, top.size(), top) == 0 && p[top.size()] == '/');
}

void inode_table::unname(uint64_t ino) {
    if (auto it = by_ino_.find(ino); it != by_ino_.end()) it->second.path.clear();
}

}  // namespace gluon::fs::detail
