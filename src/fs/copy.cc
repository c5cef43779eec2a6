// copy: a reader fiber fills up to `depth` buffers ahead while the caller's fiber writes them
// out; two channels carry buffer indices back and forth, so no buffer is reused before its
// write finished.
#include "gluon/fs/copy.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <memory>
#include <vector>

#include "gluon/fs/path.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/channel.h"
#include "gluon/sys/ops.h"

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

// Puts a file opened O_NONBLOCK back to blocking before it is read. A regular file's reads
// mostly ignore the flag, but io_uring on some kernels ends one that would wait for the disk
// with EAGAIN on such an fd. A file without an fd of its own (HTTP, cache) is left as its
// filesystem made it.
result<void> clear_nonblock(file& f) {
    const int fd = f.native_handle();
    if (fd < 0) return {};
    const long fl = sys::fcntl(fd, F_GETFL);
    if (fl < 0) return errno_error(static_cast<int>(-fl));
    return void_from_syscall(sys::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK));
}

// copy_file with src opened with open_flags, and dst with dst_flags added to its own.
result<uint64_t> copy_opening(filesystem& src_fs, std::string_view src, int open_flags, filesystem& dst_fs,
                              std::string_view dst, int dst_flags, const copy_options& o) {
    if (o.chunk == 0 || o.depth == 0) return errno_error(EINVAL);
    // O_NONBLOCK: a FIFO put in src's place since it was looked at is opened at once, to be
    // refused below, instead of the open waiting for a writer that may never come.
    auto in = GLUON_TRY(src_fs.open(src, open_flags | O_NONBLOCK));
    // The kind is that of the file opened, not of what a stat of the path saw before (the path
    // may have been replaced since): a device or FIFO would be read without end or not at all.
    auto st = GLUON_TRY(in->fstat());
    if (S_ISDIR(st.st_mode)) return errno_error(EISDIR);
    if (!S_ISREG(st.st_mode)) return errno_error(EINVAL);
    GLUON_TRY(clear_nonblock(*in));
    // The same file by another name (the same path, a hard link, a symlink): truncating dst
    // would empty src before its first read.
    if (auto d = dst_fs.stat(dst); d && d->st_dev == st.st_dev && d->st_ino == st.st_ino)
        return errno_error(EINVAL);
    auto out = GLUON_TRY(dst_fs.open(dst, O_WRONLY | O_CREAT | O_TRUNC | dst_flags, st.st_mode & 07777));
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
    // A FIFO or device is refused before it is opened: opening a device may act on it. (One
    // that replaces src after this is refused once open; a FIFO is opened without waiting.)
    if (auto pre = src_fs.stat(src); pre && !S_ISREG(pre->st_mode) && !S_ISDIR(pre->st_mode))
        return errno_error(EINVAL);
    return copy_opening(src_fs, src, O_RDONLY | O_NOCTTY, dst_fs, dst, 0, o);
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

// A directory of a tree being copied: held open where its filesystem can (open_root), so its
// entries are reached from it by one name each and a directory above it replaced by a symlink
// does not lead the copy out of the tree; else named by its path, as the filesystem offers.
struct place {
    filesystem* fs;
    std::unique_ptr<filesystem> held;  // fs is held.get() when set
    std::string dir;                   // the path, when not held

    std::string at(std::string_view name) const {
        return held ? std::string(name) : path::join(dir, name);
    }
    std::string self() const { return held ? std::string(".") : dir; }
};

// The directory p of fs entered: held, or by path where fs cannot hold one (EOPNOTSUPP).
result<place> enter(filesystem& fs, const std::string& p, int flags) {
    auto h = fs.open_root(p, flags);
    if (h) {
        filesystem* f = h->get();
        return place{f, std::move(*h), {}};
    }
    if (h.error() != std::errc::operation_not_supported) return unexpected(h.error());
    return place{&fs, nullptr, p};
}

class tree_copy {
public:
    explicit tree_copy(const copy_options& o) : o_(o) {}

    // Copies the entry src_name of from, whose lstat is st, to dst_name of to, a directory with
    // everything below it. nofollow is O_NOFOLLOW below the destination's root (nothing there is
    // followed, a symlink put in place of a directory or file included) and 0 for the root the
    // caller named. The walk keeps its directories on a heap stack, not the fiber's: a deep
    // tree costs no stack, and under sanitizers a few KiB of frames per level would overflow it.
    result<void> run(place& from, const std::string& src_name, const struct stat& st, place& to,
                     const std::string& dst_name, int nofollow) {
        if (!S_ISDIR(st.st_mode)) return leaf(from, src_name, st, to, dst_name, nofollow);
        std::deque<level> open;  // (a deque: pushing keeps the references to the levels held)
        result<void> r = enter_dir(open, from, src_name, st, to, dst_name, nofollow);
        while (r && !open.empty()) {
            level& l = open.back();
            auto e = l.listing->next();
            if (!e) {
                r = unexpected(e.error());
                break;
            }
            if (!*e) {  // all of it copied
                r = leave_dir(open);
                continue;
            }
            const std::string name = std::move((*e)->name);
            auto est = l.src.fs->lstat(l.src.at(name));
            if (!est) {
                if (est.error() == std::errc::no_such_file_or_directory) continue;  // removed meanwhile
                r = unexpected(est.error());
                break;
            }
            r = S_ISDIR(est->st_mode) ? enter_dir(open, l.src, name, *est, l.dst, name, O_NOFOLLOW)
                                      : leaf(l.src, name, *est, l.dst, name, O_NOFOLLOW);
        }
        // Stopped at an error: the directories still open get their modes all the same.
        while (!open.empty())
            if (auto c = leave_dir(open); !c && r) r = c;
        return r;
    }

    copy_stats stats;

private:
    // A directory being copied: both sides held open (or named), its listing, and the owner bits
    // its copy is to lose once it is full.
    struct level {
        place src, dst;
        std::unique_ptr<directory> listing;
        mode_t clear = 0;
    };

    // A file or a symlink (other kinds are skipped).
    result<void> leaf(place& from, const std::string& src_name, const struct stat& st, place& to,
                      const std::string& dst_name, int nofollow) {
        if (S_ISREG(st.st_mode)) {
            copy_options one = o_;
            one.progress = nullptr;
            // Not following a symlink: one put in the file's place since its lstat would have
            // the copy take a file from outside the tree (ELOOP instead).
            auto c = copy_opening(*from.fs, from.at(src_name), O_RDONLY | O_NOFOLLOW | O_NOCTTY,
                                  *to.fs, to.at(dst_name), nofollow, one);
            if (!c) return unexpected(c.error());
            ++stats.files, stats.bytes += *c;
        } else if (S_ISLNK(st.st_mode)) {
            auto t = GLUON_TRY(from.fs->readlink(from.at(src_name)));
            GLUON_TRY(to.fs->symlink(t, to.at(dst_name)));
            ++stats.symlinks;
        }
        if (o_.progress) o_.progress(stats.bytes, 0);
        return {};
    }

    // A directory is created open to its owner, or one copied from a read-only source could
    // not be filled; the owner bits it should not have are taken away once it is full (after
    // its children: a parent without search permission would hide them), even if the copy
    // stopped inside it. What the umask took from mkdir's mode stays taken, as for the files.
    // An error after the level is pushed leaves it for run() to close.
    result<void> enter_dir(std::deque<level>& open, place& from, const std::string& src_name,
                           const struct stat& st, place& to, const std::string& dst_name, int nofollow) {
        // Three descriptors are held per level: a bound keeps the walk within the descriptor
        // limit and ends a copy that a mount of dst inside src would make endless (walking by
        // name, no path grows too long to stop it).
        if (open.size() > o_.max_depth) return errno_error(ENAMETOOLONG);
        auto m = to.fs->mkdir(to.at(dst_name), (st.st_mode & 07777) | S_IRWXU);
        if (!m && m.error() != std::errc::file_exists) return m;
        ++stats.dirs;
        if (o_.progress) o_.progress(stats.bytes, 0);
        level l;
        l.dst = GLUON_TRY(enter(*to.fs, to.at(dst_name), nofollow));
        if (m && (st.st_mode & S_IRWXU) != S_IRWXU) l.clear = S_IRWXU & ~st.st_mode;
        auto src = enter(*from.fs, from.at(src_name), O_NOFOLLOW);
        result<void> r = src ? result<void>() : result<void>(unexpected(src.error()));
        if (src) {
            l.src = std::move(*src);
            auto d = l.src.fs->opendir(l.src.self());
            if (d) l.listing = std::move(*d);
            else r = unexpected(d.error());
        }
        open.push_back(std::move(l));
        return r;
    }

    result<void> leave_dir(std::deque<level>& open) {
        level& l = open.back();
        result<void> r;
        if (l.clear) {
            auto now = l.dst.fs->stat(l.dst.self());
            r = now ? l.dst.fs->chmod(l.dst.self(), now->st_mode & 07777 & ~l.clear)
                    : result<void>(unexpected(now.error()));
        }
        open.pop_back();
        return r;
    }

    const copy_options& o_;
};

}  // namespace

result<copy_stats> copy_tree(filesystem& src_fs, std::string_view src, filesystem& dst_fs,
                             std::string_view dst, const copy_options& o) {
    const std::string base = path::normalize(src);
    auto st = GLUON_TRY(src_fs.lstat(base));
    if (S_ISDIR(st.st_mode) && inside(dst_fs, dst, st)) return errno_error(EINVAL);
    // The roots are the caller's paths, as given: src's is not followed if it is a symlink (it is
    // copied as one), dst's is (an existing directory reached through a symlink is filled).
    place top_src{&src_fs, nullptr, ""}, top_dst{&dst_fs, nullptr, ""};
    tree_copy t(o);
    GLUON_TRY(t.run(top_src, base, st, top_dst, std::string(dst), 0));
    return t.stats;
}

}  // namespace gluon::fs
