// The cache filesystem: a read-only decorator over any filesystem that keeps fixed-size blocks of
// its files in memory (bounded, CLOCK replacement: a hit sets a bit instead of moving a list
// node) and, optionally, in a cache directory on the local disk that survives restarts.
//
// * Single-flight: fibers (of any vCPU) missing on one block wait for the one fetch.
// * Read-ahead: a reader continuing where its last read ended gets the next blocks fetched in
//   the background; a read spanning several missing blocks fetches them at once.
// * Invalidation: blocks are keyed by the file's identity (path, size, mtime, inode: the HTTP
//   filesystem derives its inode from the ETag), so a file changed at the source is a new file
//   at its next open. An open file checks its source's identity again every revalidate_after;
//   a change then fails reads with ESTALE, never mixing old blocks with new ones. A source read
//   failing with ESTALE is passed on. A source file whose stat cannot tell its versions apart
//   (file::versioned() false: an HTTP file served without ETag and Last-Modified) gets an
//   identity of its open file alone: its blocks serve that open file, from memory, and are
//   never written to or looked for in the cache directory, so the next open (or process)
//   fetches again instead of reading another version's blocks.
// * Read-only, stated: every call that would write (open for writing or creating, mkdir,
//   unlink, rename, truncate, ...) fails with EROFS. Writing through would need the source's
//   write semantics (and an HTTP source has none); a cache that accepted writes it could not
//   keep would lie.
// Metadata (stat, opendir, readlink, statfs, access) goes to the source each time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gluon/fs/filesystem.h"

namespace gluon::fs {

struct cache_options {
    size_t block_size = 1 << 20;       // a power of two, 4 KiB .. 64 MiB
    size_t memory_bytes = 256 << 20;   // blocks in memory, at most (reads in flight may pass it briefly)
    /// A directory for blocks on the local disk (created if missing); empty: memory only. Blocks
    /// are files <identity>/<block number>, written whole and renamed into place, and read back
    /// only at their exact size (not fsynced, not checksummed: see ADR 0024).
    std::string disk_dir;
    /// The most the directory's blocks may hold; 0: no bound. Over it, the oldest blocks written
    /// go first (by modification time: those found at start-up are counted too).
    uint64_t disk_bytes = 0;
    size_t read_ahead_blocks = 4;  // per sequential reader; 0: none
    /// How often an open file re-checks its source's size, mtime and inode. A read that makes
    /// the check waits for the source's answer no longer than its own timeout (ETIMEDOUT then;
    /// the check goes on, and its verdict serves the reads after).
    duration revalidate_after = std::chrono::seconds(1);
};

struct cache_stats {
    uint64_t hits = 0;          // blocks found in memory
    uint64_t disk_hits = 0;     // blocks read back from the cache directory
    uint64_t misses = 0;        // blocks fetched from the source
    uint64_t waits = 0;         // misses that waited for another fiber's fetch
    uint64_t read_ahead = 0;    // blocks fetched ahead of a sequential reader
    uint64_t background = 0;    // blocks being fetched in the background now (read-ahead, and
                                // the side-by-side fetches of a read over several blocks)
    uint64_t evictions = 0;
    uint64_t memory_bytes = 0;  // in memory now
    uint64_t disk_bytes = 0;    // in the cache directory now (counted when disk_bytes bounds it)
    uint64_t disk_evictions = 0;
};

/// Errors: EINVAL (block_size not a power of two in range), those of creating or opening
/// disk_dir (EACCES, ENOTDIR, ...).
result<std::unique_ptr<filesystem>> make_cached(std::shared_ptr<filesystem> source, cache_options opts = {});

/// The counters of a filesystem made by make_cached (zeros for any other).
cache_stats cache_statistics(const filesystem& fs) noexcept;

/// Drops every block held in memory (the cache directory is kept): for measuring the disk tier.
void cache_drop_memory(filesystem& fs) noexcept;

}  // namespace gluon::fs
