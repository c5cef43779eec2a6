// Copying files and trees between filesystems (the same or different ones), with reads running
// ahead of writes so the source and the destination are busy at the same time.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "gluon/common/result.h"
#include "gluon/fs/filesystem.h"

namespace gluon::fs {

struct copy_options {
    size_t chunk = 1 << 20;  // bytes per read/write
    unsigned depth = 4;      // chunks in flight: reads may run this far ahead of writes
    bool fsync = false;      // fsync each destination file before closing it
    /// copy_tree: the most levels of directories below src it enters (ENAMETOOLONG past them).
    /// Each level holds three descriptors while the copy is inside it.
    unsigned max_depth = 128;
    /// Called after each chunk is written (bytes done, bytes total) and after each tree entry.
    std::function<void(uint64_t done, uint64_t total)> progress;
};

/// Copies the regular file src to dst (created, or truncated, with src's permission bits).
/// Returns the bytes copied. Errors: EINVAL (src is not a regular file, checked before it is
/// opened, so a device is not opened, and again once open, which does not wait for a FIFO's
/// writer; or dst is src under another name: nothing is touched), EISDIR (src is a directory),
/// those of open/pread/pwrite/fsync on either side (ENOENT, EACCES, ENOSPC, ...); on error the
/// partial dst is left in place.
result<uint64_t> copy_file(filesystem& src_fs, std::string_view src, filesystem& dst_fs,
                           std::string_view dst, const copy_options& opts = {});

struct copy_stats {
    uint64_t files = 0, dirs = 0, symlinks = 0, bytes = 0;
};
/// Copies a tree: directories (created with src's permission bits, set once they are filled, so
/// a read-only src copies too; existing ones are reused as they are), regular files and
/// symlinks (recreated with the same target). Other file types are skipped. src and dst are
/// taken as the caller names them (src a symlink is copied as one; dst may be a symlink to a
/// directory); nothing below them is followed. Each directory is held open
/// (filesystem::open_root) and its entries are reached from it by their names, without
/// following a symlink: a file or directory replaced by a symlink while the copy runs, on
/// either side, is not followed out of the tree (ELOOP, or ENOTDIR for a directory), nor is a
/// symlink already in dst where the copy puts a file or directory; a directory moved meanwhile
/// is copied from (or into) where it went. A filesystem that cannot hold a directory
/// (open_root is EOPNOTSUPP: HTTP, cache) is walked by path, and there a
/// directory replaced by a symlink meanwhile is still followed. Stops at the first error (the
/// directories created still get their modes). Errors: EINVAL (dst is src or inside it:
/// nothing is copied), ELOOP, ENOTDIR, ENAMETOOLONG (a directory deeper below src than
/// copy_options::max_depth), EMFILE (three descriptors are held per level of depth), those of
/// copy_file, mkdir, readlink, symlink, open_root and the listing (ENOENT for a missing src,
/// EACCES, ...).
result<copy_stats> copy_tree(filesystem& src_fs, std::string_view src, filesystem& dst_fs,
                             std::string_view dst, const copy_options& opts = {});

}  // namespace gluon::fs
