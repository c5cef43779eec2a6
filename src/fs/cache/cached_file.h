// A file of the cache filesystem: reads served from the block cache, fetched from the source
// file on a miss, with read-ahead for sequential readers and revalidation against the source.
// Private to fs/cache.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "block_cache.h"
#include "gluon/fs/file.h"

namespace gluon::fs::detail {

/// The identity of a file version: its path, size, mtime, inode and the block size.
uint64_t file_identity(std::string_view path, const struct stat& st, size_t block_size) noexcept;
/// The identity of one open of a file whose stat does not tell its versions apart (not
/// file::versioned()): no other open has it, so each open fetches what it reads again.
uint64_t open_identity(std::string_view path, const struct stat& st, size_t block_size) noexcept;

class cached_file final : public file {
public:
    cached_file(std::shared_ptr<block_cache> cache, std::shared_ptr<filesystem> source, std::string path,
                std::shared_ptr<file> src, const struct stat& st) noexcept;

    result<struct stat> fstat() noexcept override;
    result<void> fsync() noexcept override { return closed_ ? errno_error(EBADF) : result<void>{}; }
    result<void> ftruncate(int64_t) noexcept override { return errno_error(EROFS); }
    result<void> fallocate(int, int64_t, int64_t) noexcept override { return errno_error(EROFS); }
    result<void> close() noexcept override;
    bool versioned() const noexcept override { return versioned_; }

protected:
    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override;
    result<size_t> do_pwrite(const void*, size_t, int64_t, deadline_t) noexcept override { return errno_error(EBADF); }
    result<size_t> do_pwritev(const iovec*, int, int64_t, deadline_t) noexcept override { return errno_error(EBADF); }

private:
    block_key key(uint64_t index) const noexcept { return {object_, index}; }
    size_t block_len(uint64_t index) const noexcept;
    int64_t offset(uint64_t index) const noexcept { return static_cast<int64_t>(index * cache_->options().block_size); }
    /// Fetches a block in the background unless present or too many are in flight.
    void prefetch(uint64_t index, bool ahead) noexcept;
    /// ESTALE once the source's size, mtime or inode differ from those at open. Waits for the
    /// source's answer until d at most. Errors: ESTALE, ETIMEDOUT, ECANCELED.
    result<void> revalidate(deadline_t d) noexcept;

    std::shared_ptr<block_cache> cache_;
    std::shared_ptr<filesystem> source_;
    const std::string path_;
    std::shared_ptr<file> src_;
    const struct stat st_;
    /// The source tells its versions apart: blocks are shared by later opens and kept on disk.
    /// Otherwise they serve this open file only, from memory.
    const bool versioned_;
    const uint64_t object_;
    const uint64_t blocks_;
    std::atomic<int64_t> next_off_{-1};  // where a sequential reader's next read starts
    std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
    std::atomic<int64_t> checked_at_;
    /// Set by a check that found the source changed (shared: a check may outlive its read).
    std::shared_ptr<std::atomic<bool>> stale_ = std::make_shared<std::atomic<bool>>(false);
    bool closed_ = false;
};

}  // namespace gluon::fs::detail
