// The HTTP filesystem: a read-only filesystem whose files are URLs.
//
// open and stat issue a HEAD (size, ETag, Last-Modified, Accept-Ranges; redirects followed, the
// final URL kept for the reads). pread becomes a Range request on a pooled keep-alive connection
// of the HTTP client: concurrent preads of one file go out on separate connections, the body
// lands in the caller's buffer. Every read is pinned to the validator seen at open (If-Match with
// a strong ETag, else If-Unmodified-Since, and the answer's own ETag and Content-Range checked):
// a file changed on the server fails the read with ESTALE, never returns mixed content. A server
// that sends neither ETag nor Last-Modified leaves nothing to pin to: a change of such a file
// goes unseen, its stat is the same for every version, and its file::versioned() is false (the
// cache filesystem then keeps its blocks for one open file only). A read that fails on the
// connection (reset, closed mid-body, refused) or gets a 5xx is retried with exponential
// backoff within its deadline. A server without Range support is read by streaming
// the whole body up to the wanted window (correct, slow: put the cache filesystem in front).
// HTTPS verifies the server against the system's CAs unless client options say otherwise.
//
// Everything that would write (open with O_WRONLY/O_RDWR/O_CREAT/O_TRUNC, mkdir, unlink, ...) is
// refused with EROFS. Directories are not listed by HTTP: with `files` the root lists them;
// with `base_url` opendir is EOPNOTSUPP.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gluon/fs/filesystem.h"
#include "gluon/http/client.h"

namespace gluon::fs {

struct http_fs_options {
    /// Paths are appended to this URL: "http://host/dir" + "/a/b.bin". Used when `files` is empty.
    std::string base_url;
    /// Or a flat root directory of names, each one a URL: {"image.tar", "https://..."}.
    std::vector<std::pair<std::string, std::string>> files;
    http::client_options client;
    /// Further attempts of a HEAD or a read that failed on the connection or got a 5xx.
    int retries = 3;
    /// Wait before the first retry; doubles with each one, up to backoff_max.
    duration backoff = std::chrono::milliseconds(10);
    duration backoff_max = std::chrono::seconds(1);
    /// A HEAD's answer is reused by stat and open for this long (0: every call asks).
    duration metadata_ttl = std::chrono::seconds(1);
};

/// Counters of one HTTP filesystem (all files).
struct http_fs_stats {
    uint64_t heads = 0;
    uint64_t range_reads = 0;
    uint64_t whole_reads = 0;  // reads from a server without Range support
    uint64_t retries = 0;
    uint64_t stale = 0;  // reads failed with ESTALE
    uint64_t bytes = 0;  // body bytes handed to callers
    uint64_t connections = 0;  // connections opened by the client
};

/// Errors: EINVAL (no base_url and no files; a malformed URL; a file name with '/').
result<std::unique_ptr<filesystem>> make_http_filesystem(http_fs_options opts);

/// The counters of a filesystem made by make_http_filesystem (zeros for any other).
http_fs_stats http_fs_statistics(const filesystem& fs) noexcept;

}  // namespace gluon::fs
