#include "gluon/fs/cache.h"
#include "gluon/fs/local.h"
#include "cached_file.h"

namespace gluon::fs {
namespace {

class cached_fs final : public filesystem {
public:
    cached_fs(std::shared_ptr<filesystem> source, std::shared_ptr<detail::block_cache> cache)
        : source_(std::move(source)), cache_(std::move(cache)) {}

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t) noexcept override {
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND))) return errno_error(EROFS);
        // The cache does its own buffering: the source is read with plain requests.
        auto src = GLUON_TRY(source_->open(p, flags & ~O_DIRECT));
        auto st = GLUON_TRY(src->fstat());
        if (S_ISDIR(st.st_mode)) return errno_error(EISDIR);
        return std::unique_ptr<file>(new detail::cached_file(cache_, source_, std::string(p),
                                                             std::shared_ptr<file>(std::move(src)), st));
    }
    result<struct stat> stat(std::string_view p) noexcept override { return source_->stat(p); }
    result<struct stat> lstat(std::string_view p) noexcept override { return source_->lstat(p); }
    result<struct statvfs> statfs(std::string_view p) noexcept override {
        auto s = GLUON_TRY(source_->statfs(p));
        s.f_flag |= ST_RDONLY;
        return s;
    }
    result<void> access(std::string_view p, int mode) noexcept override {
        if (mode & W_OK) {
            GLUON_TRY(source_->stat(p));
            return errno_error(EROFS);
        }
        return source_->access(p, mode);
    }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override { return source_->opendir(p); }
    result<std::string> readlink(std::string_view p) noexcept override { return source_->readlink(p); }
    result<void> mkdir(std::string_view, mode_t) noexcept override { return errno_error(EROFS); }
    result<void> rmdir(std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> unlink(std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> rename(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> link(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> symlink(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> truncate(std::string_view, int64_t) noexcept override { return errno_error(EROFS); }
    result<void> chmod(std::string_view, mode_t) noexcept override { return errno_error(EROFS); }
    result<void> utimes(std::string_view, const timespec*) noexcept override { return errno_error(EROFS); }

    detail::block_cache& cache() noexcept { return *cache_; }
    const detail::block_cache& cache() const noexcept { return *cache_; }

private:
    std::shared_ptr<filesystem> source_;
    std::shared_ptr<detail::block_cache> cache_;
};

}  // namespace

result<std::unique_ptr<filesystem>> make_cached(std::shared_ptr<filesystem> source, cache_options opts) {
    size_t bs = opts.block_size;
    if (!source || bs < 4096 || bs > (64u << 20) || (bs & (bs - 1)) != 0) return errno_error(EINVAL);
    std::unique_ptr<filesystem> disk;
    if (!opts.disk_dir.empty()) {
        auto root = GLUON_TRY(open_local(opts.disk_dir[0] == '/' ? "/" : "."));
        if (auto m = root->mkdir(opts.disk_dir, 0755); !m && m.error() != std::errc::file_exists) return unexpected(m.error());
        disk = GLUON_TRY(open_local(opts.disk_dir));
    }
    auto cache = std::make_shared<detail::block_cache>(std::move(opts), std::move(disk));
    GLUON_TRY(cache->scan_disk());
    return std::unique_ptr<filesystem>(new cached_fs(std::move(source), std::move(cache)));
}

cache_stats cache_statistics(const filesystem& fs) noexcept {
    auto* c = dynamic_cast<const cached_fs*>(&fs);
    return c ? c->cache().statistics() : cache_stats{};
}

void cache_drop_memory(filesystem& fs) noexcept {
    if (auto* c = dynamic_cast<cached_fs*>(&fs)) c->cache().drop_memory();
}

}  // namespace gluon::fs
