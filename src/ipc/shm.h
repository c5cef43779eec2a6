// Shared-memory objects of a session: created as memfds (protocol v3) or /dev/shm files (v2),
// mapped, and cleaned up. A mapping owns its pages, a shm_file its fd and, for a file the
// creator made, the duty to unlink it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "gluon/common/result.h"

namespace gluon::ipc {

/// An owned MAP_SHARED mapping; unmapped on destruction.
class mapping {
public:
    mapping() noexcept = default;
    mapping(uint8_t* p, size_t n) noexcept : p_(p), n_(n) {}
    mapping(mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
    mapping& operator=(mapping&& o) noexcept;
    mapping(const mapping&) = delete;
    mapping& operator=(const mapping&) = delete;
    ~mapping() { reset(); }

    uint8_t* data() const noexcept { return p_; }
    size_t size() const noexcept { return n_; }
    void reset() noexcept;

private:
    uint8_t* p_ = nullptr;
    size_t n_ = 0;
};

/// An owned fd of a shared-memory object, with its identity and (for files) its path.
class shm_file {
public:
    shm_file() noexcept = default;
    shm_file(shm_file&& o) noexcept
        : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), unlink_(std::exchange(o.unlink_, false)),
          size_(o.size_), dev_(o.dev_), ino_(o.ino_) {}
    shm_file& operator=(shm_file&& o) noexcept;
    shm_file(const shm_file&) = delete;
    shm_file& operator=(const shm_file&) = delete;
    ~shm_file() { close(); }

    /// A memfd of `size` zero bytes named "shmipc" + name (the name is only a label). Errors:
    /// those of memfd_create(2) and ftruncate(2).
    static result<shm_file> create_memfd(const std::string& name, size_t size);
    /// A new file at path (O_EXCL) of `size` zero bytes, unlinked when this object is closed
    /// (or earlier with unlink()). Errors: EEXIST, ENOSPC, those of open(2) and ftruncate(2).
    static result<shm_file> create_file(const std::string& path, size_t size);
    /// A file the peer made, named by `path`, which must be a plain entry of directory `dir`
    /// ("<dir>/<name>", the name without '/' and neither "." nor ".."). It is opened relative to
    /// dir with O_NOFOLLOW, so neither "..", a symbolic link nor a subdirectory leads elsewhere,
    /// and refused unless `owner` (the peer's uid) owns it: a peer names only its own files.
    /// Nothing is removed unless remove_on_close() is called, once the mapping has been checked.
    /// Errors: EPERM (a path outside dir, a file of another owner), ELOOP (a symbolic link),
    /// those of open(2) and fstat(2), EINVAL (not a regular file).
    static result<shm_file> open_peer_file(const std::string& dir, const std::string& path, uid_t owner);
    /// Takes a received fd (memfd). Errors: those of fstat(2); EINVAL (not a regular file).
    static result<shm_file> adopt(int fd);

    /// Maps the whole object read-write, shared, and checks that the object still holds every
    /// mapped byte (a peer may have shrunk it since it was opened). Its pages are faulted in now
    /// if all exist; an object with holes is mapped lazily. Errors: those of mmap(2) and
    /// fstat(2), EINVAL (empty, or now smaller than when opened).
    result<mapping> map() const;
    /// True if the object is sealed against shrinking (F_SEAL_SHRINK): only then can no other
    /// process cut pages from under a mapping of it.
    bool shrink_sealed() const noexcept;
    /// Removes the file now, if this side is to remove it (ENOENT ignored).
    void unlink() noexcept;
    /// Leaves the file in place when this object is closed (another object removes it).
    void keep_file() noexcept { unlink_ = false; }
    /// Removes the file (if this object has a path) when it is closed.
    void remove_on_close() noexcept { unlink_ = !path_.empty(); }
    void close() noexcept;

    int fd() const noexcept { return fd_; }
    const std::string& path() const noexcept { return path_; }
    size_t size() const noexcept { return size_; }
    /// (device, inode): what deduplicates regions received twice.
    std::pair<dev_t, ino_t> identity() const noexcept { return {dev_, ino_}; }

private:
    result<void> stat_fd(uid_t* owner = nullptr);

    int fd_ = -1;
    std::string path_;
    bool unlink_ = false;
    size_t size_ = 0;
    dev_t dev_ = 0;
    ino_t ino_ = 0;
};

}  // namespace gluon::ipc
