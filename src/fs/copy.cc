// copy: a reader fiber fills up to `depth` buffers ahead while the caller's fiber writes them
// out; two channels carry buffer indices back and forth, so no buffer is reused before its
// write finished.
#include "gluon/fs/copy.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "gluon/fs/path.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/channel.h"

namespace gluon::fs {
namespace {

struct filled {
    unsigned idx;
    size_t n;
    int64_t off;
};

struct free_deleter {
    void operator()(char* p) const noexcept { std::free(p); }
};

// copy_file with src opened with open_flags.
result<uint64_t> copy_opening(filesystem& src_fs, std::string_view src, int open_flags, filesystem& dst_fs,
                              std::string_view dst, const copy_options& o) {
    if (o.chunk == 0 || o.depth == 0) return errno_error(EINVAL);
    auto in = GLUON_TRY(src_fs.open(src, open_flags));
    // The kind is that of the file opened, not of what a stat of the path saw before (the path
    // may have been replaced since): a device or FIFO would be read without end or not at all.
    auto st = GLUON_TRY(in->fstat());
    if (S_ISDIR(st.st_mode)) return errno_error(EISDIR);
    if (!S_ISREG(st.st_mode)) return errno_error(EINVAL);
    // The same file by another name (the same path, a hard link, a symlink): truncating dst
    // would empty src before its first read.
    if (auto d = dst_fs.stat(dst); d && d->st_dev == st.st_dev && d->st_ino == st.st_ino)
        return errno_error(EINVAL);
    auto out = GLUON_TRY(dst_fs.open(dst, O_WRONLY | O_CREAT | O_TRUNC, st.st_mode & 07777));
    const uint64_t total = static_cast<uint64_t>(st.st_size);

    // Small files get small buffers: one chunk just over the size, so EOF is seen at once.
    const size_t chunk = std::min<uint64_t>(o.chunk, (total + 4096) / 4096 * 4096);
    const unsigned depth = static_cast<unsigned>(std::min<uint64_t>(o.depth, total / chunk + 1));
    std::vector<std::unique_ptr<char, free_deleter>> bufs;
    for (unsigned i = 0; i < depth; ++i) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, chunk) != 0) return errno_error(ENOMEM);
        bufs.emplace_back(static_cast<char*>(p));
    }
    channel<unsigned> free_q(depth);
    channel<filled> full_q(depth);
    for (unsigned i = 0; i < depth; ++i) (void)free_q.send(i);

    std::error_code read_err;
    file& rf = *in;
    auto read_ahead = [&] {
        int64_t off = 0;
        for (;;) {
            auto idx = free_q.recv();
            if (!idx) break;  // the writer gave up
            auto r = rf.pread(bufs[*idx].get(), chunk, off);
            if (!r) {
                read_err = r.error();
                break;
            }
            if (*r == 0) break;  // end of file (the file may have changed size: copy what is there)
            if (!full_q.send(filled{*idx, *r, off})) break;
            off += static_cast<int64_t>(*r);
        }
        full_q.close();
    };
    fiber reader = GLUON_TRY(spawn(read_ahead));

    std::error_code write_err;
    uint64_t done = 0;
    for (;;) {
        auto f = full_q.recv();
        if (!f) break;
        if (auto w = out->pwrite_all(bufs[f->idx].get(), f->n, f->off); !w) {
            write_err = w.error();
            break;
        }
        done += f->n;
        if (o.progress) o.progress(done, total);
        (void)free_q.send(f->idx);
    }
    free_q.close();
    (void)reader.join();
    if (write_err) return unexpected(write_err);
    if (read_err) return unexpected(read_err);
    if (o.fsync)
        GLUON_TRY(out->fsync());
    GLUON_TRY(out->close());
    return done;
}

}  // namespace

result<uint64_t> copy_file(filesystem& src_fs, std::string_view src, filesystem& dst_fs,
                           std::string_view dst, const copy_options& o) {
    // A FIFO or device is refused before it is opened: opening a FIFO waits for a writer, and
    // opening a device may act on it. (One that replaces src after this is refused once open.)
    if (auto pre = src_fs.stat(src); pre && !S_ISREG(pre->st_mode) && !S_ISDIR(pre->st_mode))
        return errno_error(EINVAL);
    return copy_opening(src_fs, src, O_RDONLY | O_NOCTTY, dst_fs, dst, o);
}

namespace {

// True if dst or a directory above it is the directory src_st: the copy would walk into what
// it creates, deeper each level, until a path or the disk gives out.
bool inside(filesystem& dst_fs, std::string_view dst, const struct stat& src_st) {
    for (std::string p = path::normalize(dst);; p = path::dirname(p)) {
        if (auto st = dst_fs.stat(p); st && st->st_dev == src_st.st_dev && st->st_ino == src_st.st_ino)
            return true;
        if (p == "/" || p == "." || path::basename(p) == "..") return false;
    }
}

}  // namespace

result<copy_stats> copy_tree(filesystem& src_fs, std::string_view src, filesystem& dst_fs,
                             std::string_view dst, const copy_options& o) {
    copy_stats stats;
    std::error_code err;
    const std::string base = path::normalize(src);
    if (auto st = src_fs.lstat(base); st && S_ISDIR(st->st_mode) && inside(dst_fs, dst, *st))
        return errno_error(EINVAL);
    // A directory is created open to its owner, or one copied from a read-only source could
    // not be filled; the owner bits it should not have are taken away once it is full.
    std::vector<std::pair<std::string, mode_t>> to_close;  // (directory, owner bits to clear)
    auto visit = [&](const std::string& p, const struct stat& st) {
        std::string rel = p.size() > base.size() ? p.substr(base.size() + (base == "/" ? 0 : 1)) : "";
        std::string target = rel.empty() ? std::string(dst) : path::join(dst, rel);
        if (S_ISDIR(st.st_mode)) {
            auto m = dst_fs.mkdir(target, (st.st_mode & 07777) | S_IRWXU);
            if (!m && m.error() != std::errc::file_exists) err = m.error();
            else ++stats.dirs;
            if (m && (st.st_mode & S_IRWXU) != S_IRWXU) to_close.emplace_back(target, S_IRWXU & ~st.st_mode);
        } else if (S_ISREG(st.st_mode)) {
            copy_options one = o;
            one.progress = nullptr;
            // Not following a symlink: one put in the file's place since the walk's lstat
            // would have the copy take a file from outside the tree (ELOOP instead).
            auto c = copy_opening(src_fs, p, O_RDONLY | O_NOFOLLOW | O_NOCTTY, dst_fs, target, one);
            if (!c) err = c.error();
            else ++stats.files, stats.bytes += *c;
        } else if (S_ISLNK(st.st_mode)) {
            auto t = src_fs.readlink(p);
            auto s = t ? dst_fs.symlink(*t, target) : result<void>(unexpected(t.error()));
            if (!s) err = s.error();
            else ++stats.symlinks;
        }
        if (o.progress) o.progress(stats.bytes, 0);
        return err ? path::walk_action::stop : path::walk_action::next;
    };
    auto walked = path::walk(src_fs, base, visit);
    // Children first: a parent without search permission would hide them. What the umask took
    // from mkdir's mode stays taken, as for the files.
    for (auto it = to_close.rbegin(); it != to_close.rend(); ++it) {
        auto st = dst_fs.stat(it->first);
        auto c = st ? dst_fs.chmod(it->first, st->st_mode & 07777 & ~it->second) : result<void>(unexpected(st.error()));
        if (!c && !err) err = c.error();
    }
    GLUON_TRY(walked);
    if (err) return unexpected(err);
    return stats;
}

}  // namespace gluon::fs
