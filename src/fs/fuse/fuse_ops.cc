// The low-level operations: each request is copied out of the reader's buffer (names, written
// bytes) and runs on a fiber of its own, which answers it.
#include <dirent.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gluon/common/lazy.h"
#include "fuse_state.h"

namespace gluon::fs::detail {
namespace {

using state = fuse_mount::state;

state& st(fuse_req_t req) { return *static_cast<state*>(fuse_req_userdata(req)); }

/// Runs f on a new fiber (f answers req); ENOMEM at once if there is none.
template <typename F>
void run(fuse_req_t req, F&& f) {
    state* s = &st(req);
    s->requests.fetch_add(1, std::memory_order_relaxed);
    s->in_flight.fetch_add(1, std::memory_order_relaxed);
    auto fb = spawn([s, f = std::forward<F>(f)]() mutable {
        f();
        s->request_done();
    });
    if (!fb) {
        reply(fuse_reply_err, req, ENOMEM);
        s->request_done();
        return;
    }
    (void)fb->detach();
}

/// The errno the kernel answers the program with. Only errno codes are errnos: another
/// category's numbers (TLS, DNS, HTTP errors from a filesystem over the network) mean nothing
/// to the kernel, and a TLS verify failure (2) reached the program as ENOENT, a DNS failure
/// (negative) as libfuse's ERANGE. Those are EIO, as a network filesystem reports them.
int err(const std::error_code& e) {
    const std::error_condition c = e.default_error_condition();
    if (c.category() == std::generic_category() && c.value() > 0 && c.value() < 512) return c.value();
    return EIO;
}

/// The entry for path (looked up: the kernel holds one more reference).
fuse_entry_param entry(state& s, const std::string& path, const struct stat& a) {
    fuse_entry_param e{};
    e.ino = s.inodes.remember(path);
    e.generation = 1;
    e.attr = a;
    e.attr.st_ino = e.ino;
    e.attr_timeout = s.attr_timeout;
    e.entry_timeout = s.entry_timeout;
    return e;
}

void reply_entry_of(fuse_req_t req, state& s, const std::string& path) {
    auto a = s.fs->lstat(path);
    if (!a) return (void)reply(fuse_reply_err, req, err(a.error()));
    fuse_entry_param e = entry(s, path, *a);
    reply(fuse_reply_entry, req, &e);
}

void reply_attr(fuse_req_t req, state& s, fuse_ino_t ino, struct stat a) {
    a.st_ino = ino;
    reply(fuse_reply_attr, req, &a, s.attr_timeout);
}

/// An open file's handle: shared with the inode table, which answers the kernel's questions
/// about an inode whose name is gone through it.
using file_box = std::shared_ptr<file>;

file_box* box_of(fuse_file_info* fi) { return reinterpret_cast<file_box*>(fi->fh); }
file* file_of(fuse_file_info* fi) { return box_of(fi)->get(); }

/// Hands f to the kernel as info's handle (and to the inode table); false if the opener was
/// interrupted (f is closed and dropped then).
template <typename Answer>
bool hand_over(state& s, fuse_ino_t ino, std::unique_ptr<file> f, fuse_file_info& info, Answer&& answer) {
    auto* box = new file_box(std::move(f));
    s.inodes.opened(ino, *box);
    info.fh = reinterpret_cast<uint64_t>(box);
    if (answer(&info) == 0) return true;
    s.inodes.closed(ino, box->get());
    (void)(*box)->close();
    delete box;
    return false;
}

/// An open directory: its entries as opendir listed them. Not its path: the directory may be
/// renamed while open, and readdirplus names its entries by where it is now.
struct dir_handle {
    std::vector<dir_entry> entries;
};

dir_handle* dir_of(fuse_file_info* fi) { return reinterpret_cast<dir_handle*>(fi->fh); }

/// With the path of ino, or ESTALE if the kernel names an inode it has forgotten or whose name
/// is gone (unlinked or renamed over while open or cached: the name may be another file's now).
#define GLUON_FUSE_PATH(var, s, ino)                          \
    auto var##_opt = (s).inodes.path(ino);                    \
    if (!var##_opt) return (void)reply(fuse_reply_err, req, ESTALE); \
    const std::string& var = *var##_opt

void op_init(void* ud, fuse_conn_info* conn) {
    (void)ud;
    // Reads and writes of a file may be in flight together; directories too.
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
    run(req, [req, parent, n = std::string(name)] {
        state& s = st(req);
        auto p = s.inodes.child(parent, n);
        if (!p) return (void)reply(fuse_reply_err, req, ESTALE);
        reply_entry_of(req, s, *p);
    });
}

void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n) {
    st(req).inodes.forget(ino, n);
    reply(fuse_reply_none, req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* f) {
    for (size_t i = 0; i < count; ++i) st(req).inodes.forget(f[i].ino, f[i].nlookup);
    reply(fuse_reply_none, req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    file* f = fi ? file_of(fi) : nullptr;
    run(req, [req, ino, f] {
        state& s = st(req);
        if (f) {
            auto a = f->fstat();
            if (a) return reply_attr(req, s, ino, *a);
        }
        auto p = s.inodes.path(ino);
        if (!p) {
            // fstat(2) sends no open file: an inode whose name is gone answers through one of its own.
            auto of = s.inodes.open_file(ino);
            if (!of) return (void)reply(fuse_reply_err, req, ESTALE);
            auto a = of->fstat();
            if (!a) return (void)reply(fuse_reply_err, req, err(a.error()));
            return reply_attr(req, s, ino, *a);
        }
        auto a = s.fs->lstat(*p);
        if (!a) return (void)reply(fuse_reply_err, req, err(a.error()));
        reply_attr(req, s, ino, *a);
    });
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
    file* f = fi ? file_of(fi) : nullptr;
    struct stat a = *attr;
    run(req, [req, ino, f, a, to_set] {
        state& s = st(req);
        // An open file whose name is gone (unlinked, renamed over) is truncated and stated
        // through the file; its times and mode need the name.
        auto p = s.inodes.path(ino);
        const bool times = to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME);
        const bool mode = to_set & FUSE_SET_ATTR_MODE;
        if (!p && (!f || times || mode)) return (void)reply(fuse_reply_err, req, ESTALE);
        if (mode) {
            if (auto r = s.fs->chmod(*p, a.st_mode & 07777); !r) return (void)reply(fuse_reply_err, req, err(r.error()));
        }
        if (to_set & FUSE_SET_ATTR_SIZE) {
            auto r = f ? f->ftruncate(a.st_size) : s.fs->truncate(*p, a.st_size);
            if (!r) return (void)reply(fuse_reply_err, req, err(r.error()));
        }
        if (times) {
            timespec t[2];
            t[0] = to_set & FUSE_SET_ATTR_ATIME_NOW ? timespec{0, UTIME_NOW}
                   : to_set & FUSE_SET_ATTR_ATIME   ? a.st_atim
                                                    : timespec{0, UTIME_OMIT};
            t[1] = to_set & FUSE_SET_ATTR_MTIME_NOW ? timespec{0, UTIME_NOW}
                   : to_set & FUSE_SET_ATTR_MTIME   ? a.st_mtim
                                                    : timespec{0, UTIME_OMIT};
            if (auto r = s.fs->utimes(*p, t); !r) return (void)reply(fuse_reply_err, req, err(r.error()));
        }
        // Owners: a gluon filesystem has no call for them; left as they are.
        auto now = p ? s.fs->lstat(*p) : f->fstat();
        if (!now) return (void)reply(fuse_reply_err, req, err(now.error()));
        reply_attr(req, s, ino, *now);
    });
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
    run(req, [req, ino] {
        state& s = st(req);
        GLUON_FUSE_PATH(p, s, ino);
        auto t = s.fs->readlink(p);
        if (!t) return (void)reply(fuse_reply_err, req, err(t.error()));
        reply(fuse_reply_readlink, req, t->c_str());
    });
}

/// The common shape of calls that make a name and answer with its entry.
template <typename F>
void make_entry(fuse_req_t req, fuse_ino_t parent, const char* name, F&& make) {
    run(req, [req, parent, n = std::string(name), make = std::forward<F>(make)] {
        state& s = st(req);
        auto p = s.inodes.child(parent, n);
        if (!p) return (void)reply(fuse_reply_err, req, ESTALE);
        if (auto r = make(s, *p); !r) return (void)reply(fuse_reply_err, req, err(r.error()));
        reply_entry_of(req, s, *p);
    });
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
    make_entry(req, parent, name, [mode](state& s, const std::string& p) { return s.fs->mkdir(p, mode); });
}

void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name) {
    make_entry(req, parent, name, [t = std::string(target)](state& s, const std::string& p) { return s.fs->symlink(t, p); });
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name) {
    make_entry(req, parent, name, [ino](state& s, const std::string& p) -> result<void> {
        auto from = s.inodes.path(ino);
        if (!from) return errno_error(ESTALE);
        return s.fs->link(*from, p);
    });
}

template <typename F>
void remove_name(fuse_req_t req, fuse_ino_t parent, const char* name, F&& remove) {
    run(req, [req, parent, n = std::string(name), remove = std::forward<F>(remove)] {
        state& s = st(req);
        auto p = s.inodes.child(parent, n);
        if (!p) return (void)reply(fuse_reply_err, req, ESTALE);
        if (auto r = remove(s, *p); !r) return (void)reply(fuse_reply_err, req, err(r.error()));
        s.inodes.removed(*p);
        reply(fuse_reply_err, req, 0);
    });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
    remove_name(req, parent, name, [](state& s, const std::string& p) { return s.fs->unlink(p); });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
    remove_name(req, parent, name, [](state& s, const std::string& p) { return s.fs->rmdir(p); });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags) {
    if (flags) return (void)reply(fuse_reply_err, req, EINVAL);  // RENAME_NOREPLACE, RENAME_EXCHANGE: no such call
    run(req, [req, parent, newparent, a = std::string(name), b = std::string(newname)] {
        state& s = st(req);
        auto from = s.inodes.child(parent, a);
        auto to = s.inodes.child(newparent, b);
        if (!from || !to) return (void)reply(fuse_reply_err, req, ESTALE);
        if (auto r = s.fs->rename(*from, *to); !r) return (void)reply(fuse_reply_err, req, err(r.error()));
        s.inodes.renamed(*from, *to);
        reply(fuse_reply_err, req, 0);
    });
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    fuse_file_info info = *fi;
    run(req, [req, ino, info]() mutable {
        state& s = st(req);
        GLUON_FUSE_PATH(p, s, ino);
        auto f = s.fs->open(p, info.flags & ~(O_CREAT | O_EXCL | O_NOCTTY));
        if (!f) return (void)reply(fuse_reply_err, req, err(f.error()));
        info.keep_cache = s.opts.keep_cache;
        info.direct_io = s.opts.direct_io;
        hand_over(s, ino, std::move(*f), info, [req](fuse_file_info* i) { return reply(fuse_reply_open, req, i); });
    });
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
    fuse_file_info info = *fi;
    run(req, [req, parent, n = std::string(name), mode, info]() mutable {
        state& s = st(req);
        auto p = s.inodes.child(parent, n);
        if (!p) return (void)reply(fuse_reply_err, req, ESTALE);
        auto f = s.fs->open(*p, info.flags | O_CREAT, mode);
        if (!f) return (void)reply(fuse_reply_err, req, err(f.error()));
        auto a = (*f)->fstat();
        if (!a) return (void)reply(fuse_reply_err, req, err(a.error()));
        fuse_entry_param e = entry(s, *p, *a);
        info.direct_io = s.opts.direct_io;
        hand_over(s, e.ino, std::move(*f), info,
                  [req, &e](fuse_file_info* i) { return reply(fuse_reply_create, req, &e, i); });
    });
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
    file* f = file_of(fi);
    run(req, [req, f, size, off] {
        std::unique_ptr<char[]> buf(new (std::nothrow) char[size ? size : 1]);
        if (!buf) return (void)reply(fuse_reply_err, req, ENOMEM);
        // The kernel asks for whole pages and takes a short answer as the end of the file: fill
        // what the file has. A read that fails part way is answered with the error: through the
        // page cache the part would be taken for the end of the file (and the file's size cut
        // to it). With direct_io a short answer reaches the program as a short read, whose next
        // read meets the error, as read(2) reports an error after some bytes.
        const bool direct = st(req).opts.direct_io;
        size_t got = 0;
        while (got < size) {
            auto n = f->pread(buf.get() + got, size - got, off + static_cast<off_t>(got));
            if (!n) {
                if (got > 0 && direct) break;
                return (void)reply(fuse_reply_err, req, err(n.error()));
            }
            if (*n == 0) break;
            got += *n;
        }
        st(req).bytes_read.fetch_add(got, std::memory_order_relaxed);
        reply(fuse_reply_buf, req, buf.get(), got);
    });
}

void op_write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off, fuse_file_info* fi) {
    file* f = file_of(fi);
    run(req, [req, f, bytes = std::string(data, size), off] {
        auto r = f->pwrite_all(bytes.data(), bytes.size(), off);
        if (!r) return (void)reply(fuse_reply_err, req, err(r.error()));
        st(req).bytes_written.fetch_add(bytes.size(), std::memory_order_relaxed);
        reply(fuse_reply_write, req, bytes.size());
    });
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) { reply(fuse_reply_err, req, 0); }

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    file_box* box = box_of(fi);
    run(req, [req, ino, box] {
        st(req).inodes.closed(ino, box->get());
        auto r = (*box)->close();
        delete box;
        reply(fuse_reply_err, req, r ? 0 : err(r.error()));
    });
}

void op_fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
    file* f = file_of(fi);
    run(req, [req, f, datasync] {
        auto r = datasync ? f->fdatasync() : f->fsync();
        reply(fuse_reply_err, req, r ? 0 : err(r.error()));
    });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
    fuse_file_info info = *fi;
    run(req, [req, ino, info]() mutable {
        state& s = st(req);
        GLUON_FUSE_PATH(p, s, ino);
        auto d = s.fs->opendir(p);
        if (!d) return (void)reply(fuse_reply_err, req, err(d.error()));
        auto h = std::make_unique<dir_handle>();
        for (;;) {
            auto e = (*d)->next();
            if (!e) return (void)reply(fuse_reply_err, req, err(e.error()));
            if (!*e) break;
            h->entries.push_back(std::move(**e));
        }
        info.fh = reinterpret_cast<uint64_t>(h.release());
        if (reply(fuse_reply_open, req, &info) != 0) delete dir_of(&info);
    });
}

void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi, bool plus) {
    dir_handle* h = dir_of(fi);
    run(req, [req, ino, h, size, off, plus] {
        state& s = st(req);
        // readdirplus hands the kernel an inode per entry, looked up by path: the directory's
        // path now, not at opendir. With that one, a directory renamed while open (and its
        // old name made again) had its entries bound to the new directory's files of the same
        // names, which then served their reads and stats.
        std::string dir;
        if (plus) {
            auto d = s.inodes.path(ino);
            if (!d) return (void)reply(fuse_reply_err, req, ESTALE);
            dir = std::move(*d);
        }
        std::vector<char> buf(size);
        size_t used = 0;
        for (size_t i = static_cast<size_t>(off); i < h->entries.size(); ++i) {
            const dir_entry& de = h->entries[i];
            size_t n;
            if (plus) {
                std::string p = dir == "/" ? "/" + de.name : dir + "/" + de.name;
                auto a = s.fs->lstat(p);
                if (!a) continue;  // gone since the listing
                fuse_entry_param e{};
                e.attr = *a;
                e.attr_timeout = s.attr_timeout;
                e.entry_timeout = s.entry_timeout;
                // Count the reference only if the entry fits: the kernel takes only those.
                n = fuse_add_direntry_plus(req, nullptr, 0, de.name.c_str(), &e, 0);
                if (used + n > size) break;
                e.ino = s.inodes.remember(p);
                e.attr.st_ino = e.ino;
                e.generation = 1;
                fuse_add_direntry_plus(req, buf.data() + used, size - used, de.name.c_str(), &e, static_cast<off_t>(i + 1));
            } else {
                struct stat a{};
                a.st_ino = de.ino;
                a.st_mode = static_cast<mode_t>(de.type) << 12;
                n = fuse_add_direntry(req, buf.data() + used, size - used, de.name.c_str(), &a, static_cast<off_t>(i + 1));
                if (used + n > size) break;
            }
            used += n;
        }
        reply(fuse_reply_buf, req, buf.data(), used);
    });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    readdir_common(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
    readdir_common(req, ino, size, off, fi, true);
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
    delete dir_of(fi);
    reply(fuse_reply_err, req, 0);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
    run(req, [req] {
        auto s = st(req).fs->statfs("/");
        if (!s) return (void)reply(fuse_reply_err, req, err(s.error()));
        reply(fuse_reply_statfs, req, &*s);
    });
}

void op_access(fuse_req_t req, fuse_ino_t ino, int mask) {
    run(req, [req, ino, mask] {
        state& s = st(req);
        GLUON_FUSE_PATH(p, s, ino);
        auto r = s.fs->access(p, mask);
        reply(fuse_reply_err, req, r ? 0 : err(r.error()));
    });
}

fuse_lowlevel_ops make_ops() {
    fuse_lowlevel_ops o{};
    o.init = op_init;
    o.lookup = op_lookup;
    o.forget = op_forget;
    o.forget_multi = op_forget_multi;
    o.getattr = op_getattr;
    o.setattr = op_setattr;
    o.readlink = op_readlink;
    o.mkdir = op_mkdir;
    o.symlink = op_symlink;
    o.link = op_link;
    o.unlink = op_unlink;
    o.rmdir = op_rmdir;
    o.rename = op_rename;
    o.open = op_open;
    o.create = op_create;
    o.read = op_read;
    o.write = op_write;
    o.flush = op_flush;
    o.release = op_release;
    o.fsync = op_fsync;
    o.opendir = op_opendir;
    o.readdir = op_readdir;
    o.readdirplus = op_readdirplus;
    o.releasedir = op_releasedir;
    o.statfs = op_statfs;
    o.access = op_access;
    return o;
}

}  // namespace

namespace {
constinit lazy_ptr<fuse_lowlevel_ops> g_ops;  // not a function-local static: common/lazy.h says why
}  // namespace

const fuse_lowlevel_ops& fuse_ops() noexcept {
    return g_ops.get([] { return new fuse_lowlevel_ops(make_ops()); });
}

}  // namespace gluon::fs::detail
