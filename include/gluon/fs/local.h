// The local filesystem: a directory of the host filesystem as the root, every operation on a
// chosen file engine (io_uring, libaio, POSIX AIO, psync, psync inline). Calls with no
// asynchronous form in the engine (link, symlink, readlink, statfs, access, truncate, chmod,
// utimes, directory reads) run on the offload pool, or inline for psync_inline.
//
// The root is where relative and '/'-prefixed paths start; it is not a jail ('..' and symlinks
// can leave it). Wrap it in a sub_filesystem for that.
//
// A path, symlink target or root holding a NUL byte is refused with EINVAL: the kernel would
// end it at the NUL and act on another name ("a\0b" is "a").
#pragma once

#include <memory>
#include <string>

#include "gluon/fs/filesystem.h"
#include "gluon/file_io/file_engine.h"

namespace gluon::fs {

/// Opens root (a directory) as a filesystem. Errors: ENOENT, ENOTDIR, EACCES, EINVAL (a NUL in
/// root), EOPNOTSUPP (engine not available here).
result<std::unique_ptr<filesystem>> open_local(const std::string& root,
                                               file_io::engine_kind engine = file_io::engine_kind::automatic);

/// A file on an fd this process already has (taken over: closed with the file). O_DIRECT
/// alignment is checked by the file before the kernel sees a misaligned request.
result<std::unique_ptr<file>> adopt_fd(int fd, file_io::engine_kind engine = file_io::engine_kind::automatic);

}  // namespace gluon::fs
