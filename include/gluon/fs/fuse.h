// FUSE export: any gluon filesystem mounted for unmodified programs, through libfuse3's
// low-level API. The /dev/fuse fd is served by vCPUs: a reader fiber on each serving vCPU takes
// requests off the device, and each request runs on a fiber of its own there, so many are in
// flight and a slow one (an HTTP read, a cold disk) blocks no other.
//
// Operations: lookup, forget, getattr, setattr (size, times, mode; owners are accepted and left
// as they are), readlink, symlink, mkdir, unlink, rmdir, rename, link, open, create, read,
// write, flush, release, fsync, opendir, readdir, readdirplus, releasedir, statfs, access.
// Inodes are assigned per path as the kernel looks names up and are dropped when it forgets them.
// An inode whose name goes (unlinked, or renamed over) while the kernel holds it keeps no path:
// its open files still read, write, truncate and answer fstat(2) (its attributes come from one
// of them), while what needs the name (opening it again through /proc; setting its times or mode) fails
// with ESTALE rather than reach the file that took the name.
// A read that fails after part of its bytes is answered with the error: the kernel takes a
// short answer through its page cache for the end of the file. With direct_io the part is
// answered, a short read to the program, whose next read gets the error. The filesystem's
// errno codes reach the program as they are; codes of other categories (TLS, DNS, HTTP: a
// filesystem over the network) are EIO.
//
// Mounting as root uses mount(2); otherwise libfuse runs fusermount3. stop() (and the
// destructor) unmounts; run_until_signalled() does so on SIGINT or SIGTERM too. An unmount from
// outside (fusermount3 -u, umount) ends the readers the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gluon/common/clock.h"
#include "gluon/fs/filesystem.h"

namespace gluon::fs {

struct fuse_options {
    std::string mountpoint;        // an existing directory
    std::string fsname = "gluon";  // the source column of /proc/mounts
    bool read_only = false;        // mounted ro (the filesystem may refuse writes anyway)
    bool allow_other = false;      // other users may enter (needs user_allow_other when not root)
    duration attr_timeout = std::chrono::seconds(1);   // how long the kernel trusts attributes
    duration entry_timeout = std::chrono::seconds(1);  // and name lookups
    bool keep_cache = false;  // keep the page cache of a file across opens (for sources that do not change)
    /// Bypass the kernel's page cache for the mount's files: every read and write reaches the
    /// filesystem (one with a cache of its own, or a measurement of the export itself).
    bool direct_io = false;
};

struct fuse_stats {
    uint64_t requests = 0;  // requests run (each on a fiber)
    uint64_t in_flight = 0;
    uint64_t bytes_read = 0;
    uint64_t bytes_written = 0;
};

class fuse_mount {
public:
    /// Mounts fs at opts.mountpoint and serves it on the calling vCPU.
    /// Errors: ENODEV (/dev/fuse missing or not usable), ENOENT (fusermount3 missing when not
    /// root; or no such mountpoint), ENOTDIR, EPERM (not on a vCPU), EIO (libfuse refused the
    /// session or the mount; its reason is on stderr).
    static result<std::unique_ptr<fuse_mount>> mount(std::shared_ptr<filesystem> fs, fuse_options opts);

    ~fuse_mount();
    fuse_mount(const fuse_mount&) = delete;
    fuse_mount& operator=(const fuse_mount&) = delete;

    /// Serves requests on the calling vCPU too (call it on each further vCPU that should).
    /// Errors: EPERM (not on a vCPU), ESHUTDOWN (stopped or unmounted).
    result<void> serve_here();
    /// Unmounts (lazily: programs with files open keep them until they close) and waits for the
    /// readers and the requests in flight to end. Idempotent.
    void stop() noexcept;
    /// Parks until the mount ends: stop(), or an unmount from outside. Errors: ECANCELED.
    result<void> wait();
    /// Parks until SIGINT, SIGTERM or an unmount from outside, then stops. ready, when given,
    /// is called once both signals are caught (wait_for_signals' ready): a "mounted" line
    /// printed there lets a script signal the program as soon as it reads it, where one printed
    /// before the call could meet the default disposition, ending the process and leaving a
    /// dead mount behind. It runs on another fiber of the calling vCPU.
    /// Errors: those of wait_for_signals (EBUSY: another call waits for signals already),
    /// returned once the mount is stopped, as a signal would stop it.
    result<void> run_until_signalled(const std::function<void()>& ready = {});

    const std::string& mountpoint() const noexcept;
    fuse_stats statistics() const noexcept;

    struct state;

private:
    explicit fuse_mount(std::unique_ptr<state> s) noexcept;
    std::unique_ptr<state> s_;
};

}  // namespace gluon::fs
