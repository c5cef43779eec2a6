// The kernel's inode numbers for the paths of a path-based filesystem: assigned as names are
// looked up, counted the way the kernel counts its references, dropped when it forgets them.
// Shared by the vCPUs serving one mount. Private to fs/fuse.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gluon/common/spinlock.h"
#include "gluon/fs/file.h"

namespace gluon::fs::detail {

class inode_table {
public:
    inode_table();
    /// The path of ino, or nullopt if the kernel has forgotten it or its name is gone (removed
    /// or renamed over: a path kept would name whatever took the name next).
    std::optional<std::string> path(uint64_t ino);
    /// The child's path ("/" + name under the root).
    std::optional<std::string> child(uint64_t parent, std::string_view name);
    /// The inode of path, counting one more kernel reference to it.
    uint64_t remember(const std::string& path);
    /// The kernel dropped n references.
    void forget(uint64_t ino, uint64_t n);
    /// from (and everything under it) is now at to; what to (and anything under it) named
    /// before has no path now.
    void renamed(const std::string& from, const std::string& to);
    /// path no longer names its inode, which lives on without a path while the kernel holds it.
    void removed(const std::string& path);
    /// f is open on ino (until closed()): what an inode whose name is gone is asked without an
    /// open file of the kernel's (fstat sends none) is answered through it.
    void opened(uint64_t ino, const std::shared_ptr<file>& f);
    void closed(uint64_t ino, const file* f);
    /// One of ino's open files, or null.
    std::shared_ptr<file> open_file(uint64_t ino);

private:
    struct node {
        std::string path;  // empty: the name is gone
        uint64_t lookups = 0;
        std::vector<std::weak_ptr<file>> open;
    };
    /// p is top or below it.
    static bool under(const std::string& p, const std::string& top);
    /// ino keeps no path (its by_path_ entry is the caller's to erase). Under lock_.
    void unname(uint64_t ino);
    spinlock lock_;
    std::unordered_map<uint64_t, node> by_ino_;
    std::unordered_map<std::string, uint64_t> by_path_;
    uint64_t next_ = 2;  // 1 is the root
};

}  // namespace gluon::fs::detail
