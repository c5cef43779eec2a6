// A filesystem, shaped like the POSIX path calls, returning result<T>. Paths are '/'-separated
// and relative to the filesystem's root (a leading '/' means that root). Implemented by the
// local filesystem and by the sub-filesystem decorator; an HTTP or cached filesystem fits the
// same interface.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gluon/common/result.h"
#include "gluon/fs/file.h"

namespace gluon::fs {

struct dir_entry {
    std::string name;
    uint64_t ino = 0;
    unsigned char type = 0;  // DT_REG, DT_DIR, DT_LNK, ... (DT_UNKNOWN if the filesystem does not say)
};

class directory {
public:
    virtual ~directory() = default;
    /// The next entry ("." and ".." are skipped), or nullopt at the end. Errors: EIO, ...
    virtual result<std::optional<dir_entry>> next() noexcept = 0;
};

class filesystem {
public:
    virtual ~filesystem() = default;

    /// open(2) flags (O_RDONLY, O_RDWR, O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_DIRECT, ...).
    /// Errors: ENOENT, EACCES, EEXIST, EISDIR, ENOTDIR, ELOOP, EMFILE, EINVAL, ...
    virtual result<std::unique_ptr<file>> open(std::string_view path, int flags, mode_t mode = 0644) noexcept = 0;
    result<std::unique_ptr<file>> creat(std::string_view path, mode_t mode = 0644) noexcept {
        return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
    }
    /// Errors: EEXIST, ENOENT (parent missing), EACCES, ENOSPC.
    virtual result<void> mkdir(std::string_view path, mode_t mode = 0755) noexcept = 0;
    /// Errors: ENOENT, ENOTDIR, ENOTEMPTY, EBUSY.
    virtual result<void> rmdir(std::string_view path) noexcept = 0;
    /// Errors: ENOENT, EISDIR, EACCES.
    virtual result<void> unlink(std::string_view path) noexcept = 0;
    /// Errors: ENOENT, EXDEV, EISDIR, ENOTEMPTY, EINVAL (into its own subdirectory).
    virtual result<void> rename(std::string_view from, std::string_view to) noexcept = 0;
    /// Hard link. Errors: EEXIST, ENOENT, EXDEV, EPERM (directories).
    virtual result<void> link(std::string_view existing, std::string_view new_path) noexcept = 0;
    /// Creates link_path pointing at target (stored as given, not resolved). Errors: EEXIST.
    virtual result<void> symlink(std::string_view target, std::string_view link_path) noexcept = 0;
    /// The whole target, never cut short. Errors: EINVAL (not a symlink), ENOENT, ENAMETOOLONG
    /// (the local filesystem: a target of 1 MiB or more).
    virtual result<std::string> readlink(std::string_view path) noexcept = 0;
    /// stat follows symlinks, lstat does not. Errors: ENOENT, ENOTDIR, EACCES, ELOOP.
    virtual result<struct stat> stat(std::string_view path) noexcept = 0;
    virtual result<struct stat> lstat(std::string_view path) noexcept = 0;
    virtual result<struct statvfs> statfs(std::string_view path) noexcept = 0;
    /// F_OK, R_OK, W_OK, X_OK. Errors: ENOENT, EACCES.
    virtual result<void> access(std::string_view path, int mode) noexcept = 0;
    /// Follows symlinks, as truncate(2). Errors: ENOENT, EISDIR, EINVAL (negative length; not a
    /// regular file: a FIFO, socket or device is refused without being opened), EACCES.
    virtual result<void> truncate(std::string_view path, int64_t len) noexcept = 0;
    /// Sets the permission bits (and set-id and sticky bits: mode & 07777), following
    /// symlinks. Errors: ENOENT, EPERM (not the owner), EROFS.
    virtual result<void> chmod(std::string_view path, mode_t mode) noexcept = 0;
    /// Sets access and modification times (nullptr: now). Errors: ENOENT, EPERM.
    virtual result<void> utimes(std::string_view path, const timespec times[2]) noexcept = 0;
    /// Errors: ENOENT, ENOTDIR, EACCES.
    virtual result<std::unique_ptr<directory>> opendir(std::string_view path) noexcept = 0;
    /// The directory dir held open as the root of a filesystem of its own: its paths resolve
    /// from the directory opened now, not from dir's path, so a component of that path renamed
    /// or replaced by a symlink later does not change what they reach (a tree walk that enters
    /// each directory by one name through its parent does not leave the tree). flags is 0 or
    /// O_NOFOLLOW (dir itself a symlink is refused). It confines what this filesystem confines:
    /// the local filesystem's is not a jail ('..' and symlinks below it can leave it), a
    /// sub-filesystem's refuses '..' past it as the sub-filesystem does. Errors: EOPNOTSUPP
    /// (the filesystem cannot hold a directory: the default; the local filesystem and a
    /// sub-filesystem over one can), ELOOP or ENOTDIR (O_NOFOLLOW and a
    /// symlink), ENOTDIR, ENOENT, EACCES, EMFILE, EINVAL (other flags).
    virtual result<std::unique_ptr<filesystem>> open_root(std::string_view /*dir*/,
                                                          int /*flags*/ = 0) noexcept {
        return errno_error(EOPNOTSUPP);
    }
};

}  // namespace gluon::fs
