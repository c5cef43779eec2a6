#include "block_cache.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <vector>

#include "gluon/fs/path.h"
#include <mutex>

namespace gluon::fs::detail {
namespace {

std::string object_dir(uint64_t object) {
    char name[24];
    std::snprintf(name, sizeof name, "/%016llx", static_cast<unsigned long long>(object));
    return name;
}

std::string block_path(block_key k) { return object_dir(k.object) + "/" + std::to_string(k.index); }

}  // namespace

block_cache::block_cache(cache_options o, std::unique_ptr<filesystem> disk) noexcept
    : opts_(std::move(o)), disk_(std::move(disk)) {}

cache_stats block_cache::statistics() const noexcept {
    cache_stats s;
    s.hits = counters_.hits.load(std::memory_order_relaxed);
    s.disk_hits = counters_.disk_hits.load(std::memory_order_relaxed);
    s.misses = counters_.misses.load(std::memory_order_relaxed);
    s.waits = counters_.waits.load(std::memory_order_relaxed);
    s.read_ahead = counters_.read_ahead.load(std::memory_order_relaxed);
    s.background = counters_.background.load(std::memory_order_acquire);
    s.evictions = counters_.evictions.load(std::memory_order_relaxed);
    s.disk_evictions = counters_.disk_evictions.load(std::memory_order_relaxed);
    {
        std::lock_guard g(disk_lock_);
        s.disk_bytes = disk_used_;
    }
    std::lock_guard g(lock_);
    s.memory_bytes = bytes_;
    return s;
}

bool block_cache::present(block_key k) noexcept {
    std::lock_guard g(lock_);
    return map_.count(k) != 0;
}

result<std::shared_ptr<block>> block_cache::get(block_key k, size_t len, file& src, int64_t off, deadline_t d,
                                                bool on_disk) noexcept {
    std::unique_lock g(lock_);
    for (;;) {
        auto it = map_.find(k);
        if (it == map_.end()) break;
        std::shared_ptr<block> b = it->second;
        if (b->ready) {
            b->referenced = true;
            g.unlock();
            counters_.hits.fetch_add(1, std::memory_order_relaxed);
            return b;
        }
        // Another fiber fetches it: wait for that one fetch.
        counters_.waits.fetch_add(1, std::memory_order_relaxed);
        while (!b->ready && !b->failed) {
            if (long r = b->fetched.wait_interruptible(g, d); r < 0) return errno_error(static_cast<int>(-r));
        }
        if (b->ready) return b;
        // A fetch that ran out of its own caller's time or was interrupted says nothing about
        // this caller's: try again (this fiber may become the fetcher).
        if (b->failed != std::errc::timed_out && b->failed != std::errc::operation_canceled) return unexpected(b->failed);
    }
    auto b = std::make_shared<block>();
    b->len = len;
    map_.emplace(k, b);
    bytes_ += len;
    g.unlock();

    const bool disk = disk_ && on_disk;
    bool from_disk = disk && read_disk(k, *b);
    result<void> r;
    if (from_disk) {
        counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
    } else {
        counters_.misses.fetch_add(1, std::memory_order_relaxed);
        r = load(*b, src, off, d);
    }
    g.lock();
    if (!r) {
        b->failed = r.error();
        if (auto it = map_.find(k); it != map_.end() && it->second == b) map_.erase(it);
        bytes_ -= len;
        b->fetched.notify_all();
        return unexpected(r.error());
    }
    b->ready = true;
    clock_.emplace_back(k, b);
    make_room();
    b->fetched.notify_all();
    g.unlock();
    // Readers are on their way; the disk copy is written after.
    if (disk && !from_disk) write_disk(k, *b);
    return b;
}

bool block_cache::read_disk_part(block_key k, size_t len, char* out, size_t from, size_t n) noexcept {
    if (!disk_) return false;
    {
        std::lock_guard g(lock_);
        // In memory or on its way; or room for it; or one in 32: the whole block, through get().
        if (map_.count(k) || bytes_ + len <= opts_.memory_bytes || (++part_reads_ & 31) == 0) return false;
    }
    auto f = disk_->open(block_path(k), O_RDONLY);
    if (!f) return false;
    auto st = (*f)->fstat();
    bool ok = st && static_cast<size_t>(st->st_size) == len && (*f)->pread_exactly(out, n, static_cast<int64_t>(from));
    (void)(*f)->close();
    if (ok) counters_.disk_hits.fetch_add(1, std::memory_order_relaxed);
    return ok;
}

result<void> block_cache::load(block& b, file& src, int64_t off, deadline_t d) noexcept {
    b.data.reset(new (std::nothrow) char[b.len]);
    if (!b.data) return errno_error(ENOMEM);
    auto r = src.pread_exactly(b.data.get(), b.len, off, time_left(d));
    // The source ended before the size it had at open: it changed.
    if (!r && r.error() == std::errc::no_message_available) return errno_error(ESTALE);
    return r;
}

bool block_cache::read_disk(block_key k, block& b) noexcept {
    auto f = disk_->open(block_path(k), O_RDONLY);
    if (!f) return false;
    auto st = (*f)->fstat();
    if (!st || static_cast<size_t>(st->st_size) != b.len) return false;
    b.data.reset(new (std::nothrow) char[b.len]);
    if (!b.data) return false;
    bool ok = static_cast<bool>((*f)->pread_exactly(b.data.get(), b.len, 0));
    (void)(*f)->close();
    if (!ok) b.data.reset();
    return ok;
}

void block_cache::write_disk(block_key k, const block& b) noexcept {
    std::string final_path = block_path(k);
    {
        std::lock_guard g(disk_lock_);
        // A block fetched again before its first copy's rename landed (memory let it go
        // meanwhile): that copy is on its way.
        if (!disk_writing_.insert(final_path).second) return;
    }
    bool kept = write_file(k, b, final_path);
    std::vector<std::string> out;
    {
        std::lock_guard g(disk_lock_);
        disk_writing_.erase(final_path);
        if (kept && opts_.disk_bytes > 0) {
            count_disk(std::move(final_path), b.len);
            out = trim_disk(1);
        }
    }
    remove_disk(out);
}

bool block_cache::write_file(block_key k, const block& b, const std::string& final_path) noexcept {
    static std::atomic<uint64_t> seq{0};
    std::string tmp = final_path + ".tmp" + std::to_string(seq.fetch_add(1, std::memory_order_relaxed));
    auto f = disk_->open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!f && f.error() == std::errc::no_such_file_or_directory) {
        (void)disk_->mkdir(object_dir(k.object), 0755);
        f = disk_->open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    if (!f) return false;  // the disk tier is a cache: a block it cannot keep is fetched again later
    bool ok = static_cast<bool>((*f)->pwrite_all(b.data.get(), b.len, 0));
    ok = static_cast<bool>((*f)->close()) && ok;
    if (!ok || !disk_->rename(tmp, final_path)) {
        (void)disk_->unlink(tmp);
        return false;
    }
    return true;
}

void block_cache::count_disk(std::string path, uint64_t size) noexcept {
    // A file written again (one read back at the wrong size, say) replaced the one counted:
    // it is counted once, as the newest.
    if (auto it = disk_index_.find(path); it != disk_index_.end()) {
        disk_used_ -= it->second->second;
        disk_order_.erase(it->second);
        disk_index_.erase(it);
    }
    disk_order_.emplace_back(path, size);
    disk_index_.emplace(std::move(path), std::prev(disk_order_.end()));
    disk_used_ += size;
}

std::vector<std::string> block_cache::trim_disk(size_t keep) noexcept {
    std::vector<std::string> out;
    while (disk_used_ > opts_.disk_bytes && disk_order_.size() > keep) {
        disk_used_ -= disk_order_.front().second;
        disk_index_.erase(disk_order_.front().first);
        out.push_back(std::move(disk_order_.front().first));
        disk_order_.pop_front();
    }
    return out;
}

void block_cache::remove_disk(const std::vector<std::string>& paths) noexcept {
    for (const auto& p : paths) {
        (void)disk_->unlink(p);  // a reader that has it open keeps its bytes
        counters_.disk_evictions.fetch_add(1, std::memory_order_relaxed);
    }
}

result<void> block_cache::scan_disk() noexcept {
    if (!disk_ || opts_.disk_bytes == 0) return {};
    std::vector<std::pair<int64_t, std::pair<std::string, uint64_t>>> found;  // mtime, (path, size)
    GLUON_TRY(path::walk(*disk_, "/", [&](const std::string& p, const struct stat& st) {
        // Block files are <identity>/<number>; temporary files (".tmp") of a crashed writer go.
        if (S_ISREG(st.st_mode)) {
            if (p.find(".tmp") != std::string::npos) (void)disk_->unlink(p);
            else found.push_back({st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec, {p, static_cast<uint64_t>(st.st_size)}});
        }
        return path::walk_action::next;
    }));
    std::sort(found.begin(), found.end());
    std::vector<std::string> out;
    {
        std::lock_guard g(disk_lock_);
        for (auto& [t, f] : found) count_disk(std::move(f.first), f.second);
        out = trim_disk(0);
    }
    remove_disk(out);
    return {};
}

void block_cache::make_room() noexcept {
    // CLOCK: a block hit since the hand last passed gets a second chance at the back.
    size_t budget = 2 * clock_.size() + 1;
    while (bytes_ > opts_.memory_bytes && !clock_.empty() && budget-- > 0) {
        auto [k, b] = std::move(clock_.front());
        clock_.pop_front();
        if (b->evicted) continue;
        if (b->referenced) {
            b->referenced = false;
            clock_.emplace_back(k, std::move(b));
            continue;
        }
        b->evicted = true;
        if (auto it = map_.find(k); it != map_.end() && it->second == b) map_.erase(it);
        bytes_ -= b->len;
        counters_.evictions.fetch_add(1, std::memory_order_relaxed);
    }
}

void block_cache::drop_memory() noexcept {
    std::lock_guard g(lock_);
    for (auto& [k, b] : clock_) {
        if (b->evicted) continue;
        b->evicted = true;
        if (auto it = map_.find(k); it != map_.end() && it->second == b) map_.erase(it);
        bytes_ -= b->len;
    }
    clock_.clear();
}

}  // namespace gluon::fs::detail
