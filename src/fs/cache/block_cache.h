// The blocks of the cache filesystem: a map from (file identity, block number) to blocks in
// memory with CLOCK replacement, single-flight fetches, and the optional disk tier. Shared by
// the filesystem and its open files, on any vCPU. Private to fs/cache.
#pragma once

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gluon/common/spinlock.h"
#include "gluon/fs/cache.h"
#include "gluon/fs/file.h"
#include "gluon/sync/condition_variable.h"

namespace gluon::fs::detail {

struct block_key {
    uint64_t object;  // the file's identity hash
    uint64_t index;   // block number
    bool operator==(const block_key&) const = default;
};

struct block_key_hash {
    size_t operator()(const block_key& k) const noexcept {
        return static_cast<size_t>(k.object ^ (k.index * 0x9E3779B97F4A7C15ULL));
    }
};

struct block {
    std::unique_ptr<char[]> data;
    size_t len = 0;
    // Guarded by the cache's lock:
    bool ready = false;
    bool referenced = false;  // CLOCK's second chance
    bool evicted = false;
    std::error_code failed;   // the fetch failed: waiters return this
    condition_variable fetched;
};

struct cache_counters {
    std::atomic<uint64_t> hits{0}, disk_hits{0}, misses{0}, waits{0}, read_ahead{0}, evictions{0}, disk_evictions{0};
    std::atomic<uint64_t> background{0};
};

class block_cache {
public:
    block_cache(cache_options o, std::unique_ptr<filesystem> disk) noexcept;

    const cache_options& options() const noexcept { return opts_; }
    cache_counters& counters() noexcept { return counters_; }
    cache_stats statistics() const noexcept;

    /// The block, from memory, from the disk tier (unless on_disk is false: then the block is
    /// neither looked for nor written there), or fetched from src at off (len bytes, known by
    /// the caller), once however many fibers ask.
    /// Errors: the fetch's (EIO, ETIMEDOUT, ...), ESTALE (also when src ends early), ECANCELED, ENOMEM.
    result<std::shared_ptr<block>> get(block_key k, size_t len, file& src, int64_t off, deadline_t d,
                                       bool on_disk) noexcept;
    /// Reads n bytes at `from` of block k (len bytes long) from the cache directory into out,
    /// without bringing the block into memory. Done for a read of part of a block that is not
    /// in memory while memory is full: a whole block read back and copied in would only push
    /// another out (a block is still brought in now and then, so that memory follows what is
    /// read). False when the directory lacks it, or the block should come in whole (get()).
    bool read_disk_part(block_key k, size_t len, char* out, size_t from, size_t n) noexcept;
    /// True if the block is in memory or being fetched.
    bool present(block_key k) noexcept;
    void drop_memory() noexcept;
    /// Counts the blocks already in the cache directory, oldest first, and trims it to
    /// disk_bytes. Errors: those of reading the directory.
    result<void> scan_disk() noexcept;

private:
    result<void> load(block& b, file& src, int64_t off, deadline_t d) noexcept;
    bool read_disk(block_key k, block& b) noexcept;
    /// Writes the block's file unless another fetch of the block writes it now, and counts it.
    void write_disk(block_key k, const block& b) noexcept;
    /// The block's file, written whole to a temporary name and renamed into place.
    bool write_file(block_key k, const block& b, const std::string& final_path) noexcept;
    void make_room() noexcept;  // under lock_
    /// A block file of `size` bytes now exists at path: counted once, as the newest, however
    /// often it was written. Under disk_lock_.
    void count_disk(std::string path, uint64_t size) noexcept;
    /// Uncounts the oldest files, keeping at least `keep`, while over the bound; returns their
    /// paths for remove_disk (done outside the lock). Under disk_lock_.
    std::vector<std::string> trim_disk(size_t keep) noexcept;
    void remove_disk(const std::vector<std::string>& paths) noexcept;

    cache_options opts_;
    std::unique_ptr<filesystem> disk_;  // the cache directory, or null
    cache_counters counters_;
    mutable spinlock lock_;
    std::unordered_map<block_key, std::shared_ptr<block>, block_key_hash> map_;
    std::deque<std::pair<block_key, std::shared_ptr<block>>> clock_;  // ready blocks, oldest first
    uint64_t bytes_ = 0;  // ready and fetching blocks' bytes
    uint64_t part_reads_ = 0;  // read_disk_part's calls, for its now-and-then promotion
    mutable spinlock disk_lock_;  // guards what follows (the files themselves are removed outside it)
    std::list<std::pair<std::string, uint64_t>> disk_order_;  // block files counted, oldest first
    /// Each counted file's place in disk_order_: a path is counted once.
    std::unordered_map<std::string, std::list<std::pair<std::string, uint64_t>>::iterator> disk_index_;
    std::unordered_set<std::string> disk_writing_;  // block files being written
    uint64_t disk_used_ = 0;
};

}  // namespace gluon::fs::detail
