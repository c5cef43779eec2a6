// Lexical path utilities (no filesystem access) and a tree walk over any filesystem.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <string>
#include <string_view>

#include "gluon/common/result.h"
#include "gluon/fs/filesystem.h"

namespace gluon::fs::path {

/// Collapses repeated '/', removes '.' and resolves '..' lexically: "/a/./b/../c/" -> "/a/c".
/// '..' at the root of an absolute path stays at the root; leading '..' of a relative path is
/// kept ("../x"). The empty path becomes ".".
std::string normalize(std::string_view p);
/// Joins with one '/' ("a" + "b" -> "a/b"); an absolute b replaces a, like POSIX shells.
std::string join(std::string_view a, std::string_view b);
/// "a/b/c.txt" -> "c.txt"; "a/b/" -> "b".
std::string_view basename(std::string_view p);
/// "a/b/c" -> "a/b"; "c" -> "."; "/c" -> "/".
std::string dirname(std::string_view p);
/// True if the normalized relative path would climb above its starting directory ("../x",
/// "a/../../x").
bool escapes(std::string_view relative);
/// True if p holds a NUL byte. A POSIX path ends at its first NUL, so a system call would see
/// only what comes before it ("a\0b" names "a"): the filesystems refuse such paths (EINVAL).
bool has_nul(std::string_view p);

enum class walk_action { next, skip_subtree, stop };
/// Visits root and everything below it, depth first, parents before children; symlinks are
/// reported (lstat) and not followed. visit gets the path (root joined with the relative path)
/// and its lstat. Any depth: the directories being listed are held on the heap (one open
/// directory per level, so EMFILE past the descriptor limit), not on the caller's stack.
/// Errors: the first error of lstat/opendir/readdir (ENOENT for root, EACCES, EMFILE).
result<void> walk(filesystem& fs, std::string_view root,
                  const std::function<walk_action(const std::string& path, const struct stat& st)>& visit);

}  // namespace gluon::fs::path
