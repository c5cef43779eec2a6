// The local filesystem and its files.
#include "gluon/fs/local.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <vector>

#include "gluon/fs/path.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sys/ops.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::fs {
namespace {

// Calls with no asynchronous form: on the offload pool, or inline for psync_inline.
long blocking(file_io::file_engine& e, const std::function<long()>& fn) {
    if (e.kind() == file_io::engine_kind::psync_inline) return fn();
    return offload_call(fn);  // inline off a vCPU
}

// Paths are relative to the root: drop leading slashes ("" is the root itself). A NUL is
// EINVAL: the kernel ends the path there, so "a\0b" would name "a".
result<std::string> rel(std::string_view p) {
    if (path::has_nul(p)) return errno_error(EINVAL);
    while (!p.empty() && p.front() == '/') p.remove_prefix(1);
    return p.empty() ? std::string(".") : std::string(p);
}

struct stat to_stat(const struct statx& x) {
    struct stat s {};
    s.st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    s.st_ino = x.stx_ino;
    s.st_mode = x.stx_mode;
    s.st_nlink = x.stx_nlink;
    s.st_uid = x.stx_uid;
    s.st_gid = x.stx_gid;
    s.st_rdev = makedev(x.stx_rdev_major, x.stx_rdev_minor);
    s.st_size = static_cast<off_t>(x.stx_size);
    s.st_blksize = x.stx_blksize;
    s.st_blocks = static_cast<blkcnt_t>(x.stx_blocks);
    s.st_atim = {x.stx_atime.tv_sec, x.stx_atime.tv_nsec};
    s.st_mtim = {x.stx_mtime.tv_sec, x.stx_mtime.tv_nsec};
    s.st_ctim = {x.stx_ctime.tv_sec, x.stx_ctime.tv_nsec};
    return s;
}

// statvfs from the kernel's statfs, as libc's fstatvfs fills it.
struct statvfs to_statvfs(const struct statfs& f) {
    struct statvfs v {};
    v.f_bsize = static_cast<unsigned long>(f.f_bsize);
    v.f_frsize = static_cast<unsigned long>(f.f_frsize ? f.f_frsize : f.f_bsize);
    v.f_blocks = f.f_blocks;
    v.f_bfree = f.f_bfree;
    v.f_bavail = f.f_bavail;
    v.f_files = f.f_files;
    v.f_ffree = f.f_ffree;
    v.f_favail = f.f_ffree;
    v.f_fsid = static_cast<unsigned int>(f.f_fsid.__val[0]);
    constexpr unsigned long k_st_valid = 0x20;  // the kernel's "f_flags is filled in" bit
    v.f_flag = static_cast<unsigned long>(f.f_flags) & ~k_st_valid;
    v.f_namemax = static_cast<unsigned long>(f.f_namelen);
    return v;
}

class local_file final : public file {
public:
    local_file(file_io::file_engine& e, int fd, size_t mem_align, size_t off_align)
        : e_(&e), fd_(fd), mem_align_(mem_align), off_align_(off_align) {}
    ~local_file() override { (void)close(); }

    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (long r = usable(buf, n, off)) return errno_error(static_cast<int>(r));
        return file_io::pread(*e_, fd_, buf, n, off, time_left(d));
    }
    result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (long r = usable(buf, n, off)) return errno_error(static_cast<int>(r));
        return file_io::pwrite(*e_, fd_, buf, n, off, time_left(d));
    }
    result<size_t> do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        if (long r = usable_v(iov, cnt, off)) return errno_error(static_cast<int>(r));
        return file_io::preadv(*e_, fd_, iov, cnt, off, time_left(d));
    }
    result<size_t> do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        if (long r = usable_v(iov, cnt, off)) return errno_error(static_cast<int>(r));
        return file_io::pwritev(*e_, fd_, iov, cnt, off, time_left(d));
    }
    result<struct stat> fstat() noexcept override {
        if (fd_ < 0) return errno_error(EBADF);
        auto x = GLUON_TRY(file_io::statx(*e_, fd_, "", AT_EMPTY_PATH));
        return to_stat(x);
    }
    result<void> fsync() noexcept override { return fd_ < 0 ? errno_error(EBADF) : file_io::fsync(*e_, fd_); }
    result<void> fdatasync() noexcept override {
        return fd_ < 0 ? errno_error(EBADF) : file_io::fsync(*e_, fd_, true);
    }
    result<void> ftruncate(int64_t len) noexcept override {
        return fd_ < 0 ? errno_error(EBADF) : file_io::ftruncate(*e_, fd_, len);
    }
    result<void> fallocate(int mode, int64_t off, int64_t len) noexcept override {
        return fd_ < 0 ? errno_error(EBADF) : file_io::fallocate(*e_, fd_, mode, off, len);
    }
    result<void> close() noexcept override {
        if (fd_ < 0) return {};
        int fd = std::exchange(fd_, -1);
        return file_io::close(*e_, fd);
    }
    int native_handle() const noexcept override { return fd_; }

private:
    // O_DIRECT: refuse what the kernel would refuse, before it sees it (0 = fine, else errno).
    long usable(const void* buf, size_t n, int64_t off) const noexcept {
        if (fd_ < 0) return EBADF;
        if (off < 0) return EINVAL;
        if (off_align_ == 0) return 0;
        if (reinterpret_cast<uintptr_t>(buf) % mem_align_ || n % off_align_ ||
            static_cast<uint64_t>(off) % off_align_)
            return EINVAL;
        return 0;
    }
    long usable_v(const iovec* iov, int cnt, int64_t off) const noexcept {
        if (cnt < 0 || cnt > IOV_MAX) return EINVAL;
        for (int i = 0; i < cnt; ++i)
            if (long r = usable(iov[i].iov_base, iov[i].iov_len, off)) return r;
        return usable(nullptr, 0, off);
    }

    file_io::file_engine* e_;
    int fd_;
    size_t mem_align_, off_align_;  // O_DIRECT requirements; 0 = buffered
};

result<std::unique_ptr<file>> make_file(file_io::file_engine& e, int fd) {
    long fl = sys::fcntl(fd, F_GETFL);
    size_t mem = 0, off = 0;
    if (fl >= 0 && (fl & O_DIRECT)) {
        auto x = file_io::statx(e, fd, "", AT_EMPTY_PATH, STATX_DIOALIGN);
        if (x && (x->stx_mask & STATX_DIOALIGN) && x->stx_dio_offset_align) {
            mem = x->stx_dio_mem_align;
            off = x->stx_dio_offset_align;
        } else {
            mem = off = 512;  // the traditional requirement: logical block size
        }
    }
    return std::unique_ptr<file>(new local_file(e, fd, mem, off));
}

class local_directory final : public directory {
public:
    local_directory(file_io::file_engine& e, int fd) : e_(&e), fd_(fd), buf_(32 * 1024) {}
    ~local_directory() override { (void)file_io::close(*e_, fd_); }

    result<std::optional<dir_entry>> next() noexcept override {
        for (;;) {
            if (pos_ >= len_) {
                long r = blocking(*e_, [&] { return sys::getdents64(fd_, buf_.data(), buf_.size()); });
                if (r < 0) return errno_error(static_cast<int>(-r));
                if (r == 0) return std::optional<dir_entry>{};
                len_ = static_cast<size_t>(r);
                pos_ = 0;
            }
            auto* d = reinterpret_cast<dirent64*>(buf_.data() + pos_);
            pos_ += d->d_reclen;
            if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
            return std::optional<dir_entry>(dir_entry{d->d_name, d->d_ino, d->d_type});
        }
    }

private:
    file_io::file_engine* e_;
    int fd_;
    std::vector<char> buf_;
    size_t pos_ = 0, len_ = 0;
};

class local_fs final : public filesystem {
public:
    local_fs(file_io::file_engine& e, int root) : e_(&e), root_(root) {}
    ~local_fs() override { (void)sys::close(root_); }

    result<std::unique_ptr<file>> open(std::string_view path, int flags, mode_t mode) noexcept override {
        const std::string r = GLUON_TRY(rel(path));
        auto fd = GLUON_TRY(file_io::openat(*e_, root_, r.c_str(), flags | O_CLOEXEC, mode));
        return make_file(*e_, fd);
    }
    result<void> mkdir(std::string_view p, mode_t mode) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return file_io::mkdirat(*e_, root_, r.c_str(), mode);
    }
    result<void> rmdir(std::string_view p) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return file_io::unlinkat(*e_, root_, r.c_str(), AT_REMOVEDIR);
    }
    result<void> unlink(std::string_view p) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return file_io::unlinkat(*e_, root_, r.c_str(), 0);
    }
    result<void> rename(std::string_view from, std::string_view to) noexcept override {
        const std::string a = GLUON_TRY(rel(from)), b = GLUON_TRY(rel(to));
        return file_io::renameat(*e_, root_, a.c_str(), root_, b.c_str());
    }
    result<void> link(std::string_view existing, std::string_view np) noexcept override {
        const std::string a = GLUON_TRY(rel(existing)), b = GLUON_TRY(rel(np));
        return void_from_syscall(blocking(*e_, [&] { return sys::linkat(root_, a.c_str(), root_, b.c_str(), 0); }));
    }
    result<void> symlink(std::string_view target, std::string_view lp) noexcept override {
        if (path::has_nul(target)) return errno_error(EINVAL);  // stored cut at the NUL
        const std::string t(target), l = GLUON_TRY(rel(lp));
        return void_from_syscall(blocking(*e_, [&] { return sys::symlinkat(t.c_str(), root_, l.c_str()); }));
    }
    // readlink(2) cuts a target longer than the buffer without saying so: one that fills it
    // is read again into one twice the size. Targets can be longer than PATH_MAX (a FUSE or
    // network filesystem's, a page of 64 KiB); most are short, so the first buffer is small and
    // the rare retry costs a system call, within the same hand-off to the offload pool.
    result<std::string> readlink(std::string_view p) noexcept override {
        constexpr size_t k_first = 256, k_most = size_t{1} << 20;
        const std::string r = GLUON_TRY(rel(p));
        std::string out;
        long n = blocking(*e_, [&] {
            for (size_t size = k_first;; size *= 2) {
                out.resize(size);
                const long got = sys::readlinkat(root_, r.c_str(), out.data(), size);
                if (got < 0 || static_cast<size_t>(got) < size) return got;
                if (size >= k_most) return long{-ENAMETOOLONG};
            }
        });
        if (n < 0) return errno_error(static_cast<int>(-n));
        out.resize(static_cast<size_t>(n));
        return out;
    }
    result<struct stat> stat(std::string_view p) noexcept override { return do_stat(p, 0); }
    result<struct stat> lstat(std::string_view p) noexcept override {
        return do_stat(p, AT_SYMLINK_NOFOLLOW);
    }
    result<struct statvfs> statfs(std::string_view p) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        struct statvfs out {};
        long rc = blocking(*e_, [&] {
            long fd = sys::openat(root_, r.c_str(), O_PATH | O_CLOEXEC, 0);
            if (fd < 0) return fd;
            struct statfs sf;
            long v = sys::fstatfs(static_cast<int>(fd), &sf);
            if (v == 0) out = to_statvfs(sf);
            (void)sys::close(static_cast<int>(fd));
            return v;
        });
        if (rc < 0) return errno_error(static_cast<int>(-rc));
        return out;
    }
    result<void> access(std::string_view p, int mode) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return void_from_syscall(blocking(*e_, [&] { return sys::faccessat(root_, r.c_str(), mode); }));
    }
    // truncate(2) has no *at form, so the file is opened to be cut. A FIFO or device must not
    // be: opening a FIFO for writing waits for a reader (the vCPU itself on psync_inline), and
    // opening a device may act on it. They are refused as truncate(2) refuses them, before the
    // open; O_NONBLOCK keeps a FIFO put in the file's place since then from waiting, and the
    // open file is checked again.
    result<void> truncate(std::string_view p, int64_t len) noexcept override {
        if (len < 0) return errno_error(EINVAL);
        const struct stat before = GLUON_TRY(do_stat(p, 0));
        GLUON_TRY(regular(before.st_mode));
        auto f = GLUON_TRY(open(p, O_WRONLY | O_NONBLOCK | O_NOCTTY, 0));
        const struct stat opened = GLUON_TRY(f->fstat());
        GLUON_TRY(regular(opened.st_mode));
        return f->ftruncate(len);
    }
    result<void> chmod(std::string_view p, mode_t mode) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return void_from_syscall(blocking(*e_, [&] { return sys::fchmodat(root_, r.c_str(), mode & 07777); }));
    }
    result<void> utimes(std::string_view p, const timespec times[2]) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        return void_from_syscall(blocking(*e_, [&] { return sys::utimensat(root_, r.c_str(), times, 0); }));
    }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override {
        const std::string r = GLUON_TRY(rel(p));
        auto fd = GLUON_TRY(file_io::openat(*e_, root_, r.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        return std::unique_ptr<directory>(new local_directory(*e_, fd));
    }
    result<std::unique_ptr<filesystem>> open_root(std::string_view dir, int flags) noexcept override {
        if (flags & ~O_NOFOLLOW) return errno_error(EINVAL);
        const std::string r = GLUON_TRY(rel(dir));
        // O_PATH: holding a directory to resolve names from needs no read permission on it (a
        // write-only destination directory can still be filled).
        auto fd = GLUON_TRY(
            file_io::openat(*e_, root_, r.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | flags));
        return std::unique_ptr<filesystem>(new local_fs(*e_, fd));
    }

private:
    // What truncate(2) says of a file that is not a regular one.
    static result<void> regular(mode_t mode) noexcept {
        if (S_ISDIR(mode)) return errno_error(EISDIR);
        if (!S_ISREG(mode)) return errno_error(EINVAL);
        return {};
    }
    result<struct stat> do_stat(std::string_view p, int flags) {
        const std::string r = GLUON_TRY(rel(p));
        auto x = GLUON_TRY(file_io::statx(*e_, root_, r.c_str(), flags));
        return to_stat(x);
    }

    file_io::file_engine* e_;
    int root_;
};

}  // namespace

result<std::unique_ptr<filesystem>> open_local(const std::string& root, file_io::engine_kind engine) {
    if (path::has_nul(root)) return errno_error(EINVAL);
    auto e = GLUON_TRY(file_io::get(engine));
    long fd = sys::openat(AT_FDCWD, root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return errno_error(static_cast<int>(-fd));
    return std::unique_ptr<filesystem>(new local_fs(*e, static_cast<int>(fd)));
}

result<std::unique_ptr<file>> adopt_fd(int fd, file_io::engine_kind engine) {
    auto e = GLUON_TRY(file_io::get(engine));
    if (sys::fcntl(fd, F_GETFD) < 0) return errno_error(EBADF);
    return make_file(*e, fd);
}

}  // namespace gluon::fs
