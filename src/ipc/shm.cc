// Shared-memory objects: memfds, /dev/shm files, mappings.
#include "shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "gluon/sys/mm.h"
#include "gluon/sys/ops.h"

namespace gluon::ipc {
namespace {
result<void> check(long r) {
    if (r < 0) return errno_error(int(-r));
    return {};
}
}  // namespace

mapping& mapping::operator=(mapping&& o) noexcept {
    if (this != &o) {
        reset();
        p_ = std::exchange(o.p_, nullptr);
        n_ = std::exchange(o.n_, 0);
    }
    return *this;
}

void mapping::reset() noexcept {
    if (p_) (void)sys::munmap(p_, n_);
    p_ = nullptr;
    n_ = 0;
}

shm_file& shm_file::operator=(shm_file&& o) noexcept {
    if (this != &o) {
        close();
        fd_ = std::exchange(o.fd_, -1);
        path_ = std::move(o.path_);
        unlink_ = std::exchange(o.unlink_, false);
        size_ = o.size_;
        dev_ = o.dev_;
        ino_ = o.ino_;
    }
    return *this;
}

result<void> shm_file::stat_fd(uid_t* owner) {
    struct stat st {};
    GLUON_TRY(check(sys::fstat(fd_, &st)));
    if (owner) *owner = st.st_uid;
    if (!S_ISREG(st.st_mode) || st.st_size <= 0) return errno_error(EINVAL);
    size_ = size_t(st.st_size);
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    return {};
}

// Sizes a new object and allocates its pages now: a tmpfs (or memfd) short of room fails here
// with ENOSPC instead of raising SIGBUS in whichever process first touches a missing page.
result<void> size_and_allocate(int fd, size_t size) {
    GLUON_TRY(check(sys::ftruncate(fd, int64_t(size))));
    return check(sys::fallocate(fd, 0, 0, int64_t(size)));
}

result<shm_file> shm_file::create_memfd(const std::string& name, size_t size) {
    shm_file f;
    std::string label = "shmipc" + name;
    long fd = sys::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    GLUON_TRY(check(fd));
    f.fd_ = int(fd);
    GLUON_TRY(size_and_allocate(f.fd_, size));
    // Its size can no longer change: a peer given the fd cannot shrink it under our mapping.
    GLUON_TRY(check(sys::fcntl(f.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)));
    GLUON_TRY(f.stat_fd());
    return f;
}

result<shm_file> shm_file::create_file(const std::string& path, size_t size) {
    shm_file f;
    long fd = sys::openat(AT_FDCWD, path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    GLUON_TRY(check(fd));
    f.fd_ = int(fd);
    f.path_ = path;
    f.unlink_ = true;
    GLUON_TRY(size_and_allocate(f.fd_, size));
    GLUON_TRY(f.stat_fd());
    return f;
}

result<shm_file> shm_file::open_peer_file(const std::string& dir, const std::string& path, uid_t owner) {
    // The peer chooses the path, and this side may remove the file later: only a plain name
    // directly in the shared-memory directory, so no path leads to another of our files.
    const std::string lead = dir.ends_with('/') ? dir : dir + "/";
    if (dir.empty() || !path.starts_with(lead)) return errno_error(EPERM);
    const std::string name = path.substr(lead.size());
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
        return errno_error(EPERM);
    long dfd = sys::openat(AT_FDCWD, dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
    GLUON_TRY(check(dfd));
    // O_NOFOLLOW: a symbolic link under the name fails (ELOOP) rather than leading elsewhere;
    // O_NONBLOCK | O_NOCTTY: a FIFO or a terminal under the name is refused below, not waited on.
    long fd = sys::openat(int(dfd), name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0);
    (void)sys::close(int(dfd));
    GLUON_TRY(check(fd));
    shm_file f;
    f.fd_ = int(fd);
    uid_t uid = 0;
    GLUON_TRY(f.stat_fd(&uid));
    if (uid != owner) return errno_error(EPERM);
    f.path_ = lead + name;
    return f;
}

result<shm_file> shm_file::adopt(int fd) {
    shm_file f;
    f.fd_ = fd;
    GLUON_TRY(f.stat_fd());
    return f;
}

result<mapping> shm_file::map() const {
    if (size_ == 0) return errno_error(EINVAL);
    // MAP_POPULATE: the pages are faulted in now, at connect time, not one by one under the
    // first messages (the free lists hand slices out in order, so traffic walks the whole region).
    // Only when every page exists, as in the objects gluon makes: populating a hole allocates
    // it, and a peer's object may be a hole of any size, which this side would fill (and wait
    // for) before its checks could refuse it. Lazily, a page costs only when it is used.
    struct stat st {};
    GLUON_TRY(check(sys::fstat(fd_, &st)));
    const bool populate = st.st_blocks >= 0 && uint64_t(st.st_blocks) * 512 >= size_;
    void* p = sys::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd_, 0);
    if (sys::is_error(p)) return errno_error(int(-reinterpret_cast<long>(p)));
    mapping m(static_cast<uint8_t*>(p), size_);
    // A page past the object's end raises SIGBUS when touched: the size is checked again now
    // that the mapping exists. (Unless the object is sealed, the peer can still shrink it later.)
    GLUON_TRY(check(sys::fstat(fd_, &st)));
    if (st.st_size < 0 || size_t(st.st_size) < size_) return errno_error(EINVAL);
    return m;
}

bool shm_file::shrink_sealed() const noexcept {
    long seals = sys::fcntl(fd_, F_GET_SEALS);
    return seals >= 0 && (seals & F_SEAL_SHRINK) != 0;
}

void shm_file::unlink() noexcept {
    if (unlink_ && !path_.empty()) (void)sys::unlinkat(AT_FDCWD, path_.c_str(), 0);
    unlink_ = false;
}

void shm_file::close() noexcept {
    unlink();
    if (fd_ >= 0) (void)sys::close(fd_);
    fd_ = -1;
}

}  // namespace gluon::ipc
