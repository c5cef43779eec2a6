// A sub-filesystem: a directory of another filesystem seen as a root, chroot-like. Every path
// is normalised lexically and one that would climb out ('..' past the root) is refused with
// EACCES before the base filesystem sees it; one with a NUL byte is refused with EINVAL (a
// POSIX path ends at its first NUL). Symlinks are stored and read back unchanged; a
// symlink inside that points outside is followed by the base filesystem (as with chroot
// without a kernel jail): do not use it to confine untrusted symlink targets.
#pragma once

#include <memory>
#include <string>

#include "gluon/fs/filesystem.h"

namespace gluon::fs {

/// Errors: ENOTDIR / ENOENT if dir is not a directory of base.
result<std::unique_ptr<filesystem>> make_sub_filesystem(std::shared_ptr<filesystem> base, std::string_view dir);

}  // namespace gluon::fs
