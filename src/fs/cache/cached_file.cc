#include "cached_file.h"

#include <cstring>
#include <mutex>

#include "gluon/fs/filesystem.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/condition_variable.h"

namespace gluon::fs::detail {
namespace {

uint64_t fnv(uint64_t h, const void* p, size_t n) noexcept {
    auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

bool same_version(const struct stat& a, const struct stat& b) noexcept {
    return a.st_size == b.st_size && a.st_ino == b.st_ino && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
           a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

uint64_t file_identity(std::string_view path, const struct stat& st, size_t block_size) noexcept {
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv(h, path.data(), path.size());
    int64_t v[5] = {st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec, static_cast<int64_t>(st.st_ino),
                    static_cast<int64_t>(block_size)};
    return fnv(h, v, sizeof v);
}

uint64_t open_identity(std::string_view path, const struct stat& st, size_t block_size) noexcept {
    static std::atomic<uint64_t> opens{0};
    uint64_t n = opens.fetch_add(1, std::memory_order_relaxed);
    return fnv(file_identity(path, st, block_size), &n, sizeof n);
}

cached_file::cached_file(std::shared_ptr<block_cache> cache, std::shared_ptr<filesystem> source, std::string path,
                         std::shared_ptr<file> src, const struct stat& st) noexcept
    : cache_(std::move(cache)),
      source_(std::move(source)),
      path_(std::move(path)),
      src_(std::move(src)),
      st_(st),
      versioned_(src_->versioned()),
      object_(versioned_ ? file_identity(path_, st, cache_->options().block_size)
                         : open_identity(path_, st, cache_->options().block_size)),
      blocks_((static_cast<uint64_t>(st.st_size) + cache_->options().block_size - 1) / cache_->options().block_size),
      checked_at_(mono_now_ns()) {}

result<struct stat> cached_file::fstat() noexcept {
    if (closed_) return errno_error(EBADF);
    return st_;
}

result<void> cached_file::close() noexcept {
    if (closed_) return errno_error(EBADF);
    closed_ = true;
    src_.reset();  // closed when the last background fetch using it ends
    return {};
}

size_t cached_file::block_len(uint64_t index) const noexcept {
    const uint64_t bs = cache_->options().block_size;
    uint64_t start = index * bs;
    uint64_t left = static_cast<uint64_t>(st_.st_size) - start;
    return static_cast<size_t>(left < bs ? left : bs);
}

void cached_file::prefetch(uint64_t index, bool ahead) noexcept {
    if (index >= blocks_ || cache_->present(key(index))) return;
    if (in_flight_->fetch_add(1, std::memory_order_relaxed) >= static_cast<int>(cache_->options().read_ahead_blocks) + 1) {
        in_flight_->fetch_sub(1, std::memory_order_relaxed);
        return;
    }
    if (ahead) cache_->counters().read_ahead.fetch_add(1, std::memory_order_relaxed);
    auto& background = cache_->counters().background;  // counted before the fiber can end
    background.fetch_add(1, std::memory_order_relaxed);
    auto f = spawn([cache = cache_, k = key(index), len = block_len(index), src = src_, off = offset(index), n = in_flight_,
                    disk = versioned_] {
        (void)cache->get(k, len, *src, off, k_no_deadline, disk);  // a failure is met again by the reader
        n->fetch_sub(1, std::memory_order_relaxed);
        cache->counters().background.fetch_sub(1, std::memory_order_release);  // the block is in
    });
    if (f) {
        (void)f->detach();
        return;
    }
    in_flight_->fetch_sub(1, std::memory_order_relaxed);
    background.fetch_sub(1, std::memory_order_relaxed);
}

result<void> cached_file::revalidate(deadline_t d) noexcept {
    if (stale_->load(std::memory_order_relaxed)) return errno_error(ESTALE);
    const int64_t every = std::chrono::duration_cast<std::chrono::nanoseconds>(cache_->options().revalidate_after).count();
    int64_t last = checked_at_.load(std::memory_order_relaxed);
    int64_t now = mono_now_ns();
    if (now - last < every || !checked_at_.compare_exchange_strong(last, now)) return {};
    // A stat has no deadline (over HTTP a HEAD, which may take the client's whole timeout for
    // each of its retries): the source is asked on a fiber of its own, and this read waits for
    // the answer no longer than its own deadline. A check it stops waiting for goes on, and its
    // verdict serves the reads after.
    struct check {
        spinlock lk;
        condition_variable done_cv;
        bool done = false;
        bool changed = false;
    };
    auto c = std::make_shared<check>();
    auto ask = [c, source = source_, path = path_, st = st_, stale = stale_] {
        auto now = source->stat(path);
        // An error other than ENOENT says nothing of the file: checked again later.
        const bool changed = now ? !same_version(*now, st) : now.error() == std::errc::no_such_file_or_directory;
        if (changed) stale->store(true, std::memory_order_relaxed);
        std::lock_guard g(c->lk);
        c->done = true;
        c->changed = changed;
        c->done_cv.notify_all();
    };
    if (auto f = spawn(ask)) {
        (void)f->detach();
    } else {
        ask();  // no fiber for it: asked here
    }
    std::unique_lock g(c->lk);
    while (!c->done)
        if (long r = c->done_cv.wait_interruptible(g, d); r < 0) return errno_error(static_cast<int>(-r));
    return c->changed ? errno_error(ESTALE) : result<void>{};
}

result<size_t> cached_file::do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept {
    if (closed_) return errno_error(EBADF);
    if (off < 0) return errno_error(EINVAL);
    GLUON_TRY(revalidate(d));
    const uint64_t size = static_cast<uint64_t>(st_.st_size);
    uint64_t o = static_cast<uint64_t>(off);
    if (n == 0 || o >= size) return size_t{0};
    if (n > size - o) n = static_cast<size_t>(size - o);
    const uint64_t bs = cache_->options().block_size;
    const uint64_t first = o / bs, last = (o + n - 1) / bs;
    for (uint64_t b = first + 1; b <= last; ++b) prefetch(b, false);  // fetched side by side
    char* out = static_cast<char*>(buf);
    for (uint64_t b = first; b <= last; ++b) {
        const size_t len = block_len(b);
        const uint64_t start = b * bs;
        const uint64_t from = o > start ? o - start : 0;
        const uint64_t to = std::min<uint64_t>(len, o + n - start);
        char* dst = out + (start + from - o);
        // Part of a block: straight from the cache directory if memory has no room for it.
        if (to - from < len && versioned_ && cache_->read_disk_part(key(b), len, dst, from, to - from)) continue;
        auto blk = GLUON_TRY(cache_->get(key(b), len, *src_, offset(b), d, versioned_));
        std::memcpy(dst, blk->data.get() + from, to - from);
    }
    const size_t ra = cache_->options().read_ahead_blocks;
    if (ra > 0 && next_off_.exchange(static_cast<int64_t>(o + n), std::memory_order_relaxed) == off)
        for (uint64_t b = last + 1; b <= last + ra && b < blocks_; ++b) prefetch(b, true);
    return n;
}

}  // namespace gluon::fs::detail
