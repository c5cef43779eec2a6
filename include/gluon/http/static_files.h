// Serving a directory: small hot files from memory (a bounded cache, revalidated against the
// file's size and mtime), large ones with sendfile; ETag/Last-Modified with 304s, Range requests
// (206/416; several ranges as one multipart/byteranges body, merged where they overlap; a field
// with more than 32 ranges, or asking for more than 16 MiB in several, is ignored and the file
// sent whole, as RFC 9110 allows), MIME types by extension. Directory listings are never
// generated.
//
// Paths cannot leave the root: "..", its percent-encodings, encoded slashes and NUL are refused
// (400/403), and the file is opened with openat2(RESOLVE_BENEATH), so a symlink that points
// outside the root is refused too unless allowed. Only regular files are served: a FIFO, a
// device or a socket under the root is 403, and opening one never waits for a writer.
#pragma once

#include <cstddef>
#include <string>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/http/server.h"

namespace gluon::http {

struct static_options {
    /// Served for a request naming a directory; empty: directories are 403.
    std::string index_file = "index.html";
    /// Follow symlinks that lead outside the root (a deployment that links shared assets in).
    bool allow_symlinks_outside_root = false;
    /// Files up to this size are kept in memory, up to cache_bytes in all (least recently
    /// used first out); 0 turns the cache off. A file modified less than 2 s before it is read
    /// is served but not kept: a write within the same timestamp tick may leave its mtime and
    /// size as they were, which revalidation could not tell from the bytes kept. (One whose
    /// mtime is set back by hand to the cached value, its size unchanged, is not seen either.)
    /// The ETag of a file up to this size also holds a hash of its bytes, so two versions
    /// with the same mtime and size have different ones.
    size_t cache_file_max = 256 * 1024;
    size_t cache_bytes = 64 << 20;
    /// How long a cached file is served before its size and mtime are checked again.
    duration revalidate_after = std::chrono::seconds(1);
};

/// A handler serving the directory `root`. The file is the route's "*" parameter when it has one
/// (router: get("/static/*", ...)), else the request's path. GET and HEAD.
/// Errors: those of open(2) on root (ENOENT, EACCES, ENOTDIR).
result<handler> static_files(const std::string& root, static_options opts = {});

/// The MIME type of a file name by its extension ("application/octet-stream" if unknown).
std::string_view mime_type(std::string_view filename) noexcept;

}  // namespace gluon::http
