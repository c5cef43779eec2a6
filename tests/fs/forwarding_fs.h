// A filesystem, and a file, that pass every call to another: tests derive from them and override
// the calls whose behaviour they change (counting reads, holding an open back, failing a read).
#pragma once

#include <memory>
#include <string>

#include "gluon/fs/filesystem.h"
#include "gluon/common/clock.h"

namespace gluon::test {

class forwarding_fs : public fs::filesystem {
public:
    using file = fs::file;
    using filesystem = fs::filesystem;
    using directory = fs::directory;
    explicit forwarding_fs(std::unique_ptr<filesystem> in) : in_(std::move(in)) {}

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t m) noexcept override {
        return in_->open(p, flags, m);
    }
    result<void> mkdir(std::string_view p, mode_t m) noexcept override { return in_->mkdir(p, m); }
    result<void> rmdir(std::string_view p) noexcept override { return in_->rmdir(p); }
    result<void> unlink(std::string_view p) noexcept override { return in_->unlink(p); }
    result<void> rename(std::string_view a, std::string_view b) noexcept override { return in_->rename(a, b); }
    result<void> link(std::string_view a, std::string_view b) noexcept override { return in_->link(a, b); }
    result<void> symlink(std::string_view a, std::string_view b) noexcept override { return in_->symlink(a, b); }
    result<std::string> readlink(std::string_view p) noexcept override { return in_->readlink(p); }
    result<struct stat> stat(std::string_view p) noexcept override { return in_->stat(p); }
    result<struct stat> lstat(std::string_view p) noexcept override { return in_->lstat(p); }
    result<struct statvfs> statfs(std::string_view p) noexcept override { return in_->statfs(p); }
    result<void> access(std::string_view p, int m) noexcept override { return in_->access(p, m); }
    result<void> truncate(std::string_view p, int64_t l) noexcept override { return in_->truncate(p, l); }
    result<void> chmod(std::string_view p, mode_t m) noexcept override { return in_->chmod(p, m); }
    result<void> utimes(std::string_view p, const timespec t[2]) noexcept override { return in_->utimes(p, t); }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override { return in_->opendir(p); }

protected:
    std::unique_ptr<filesystem> in_;
};

class forwarding_file : public fs::file {
public:
    explicit forwarding_file(std::unique_ptr<fs::file> f) : f_(std::move(f)) {}
    result<struct stat> fstat() noexcept override { return f_->fstat(); }
    result<void> fsync() noexcept override { return f_->fsync(); }
    result<void> ftruncate(int64_t l) noexcept override { return f_->ftruncate(l); }
    result<void> close() noexcept override { return f_->close(); }

protected:
    result<size_t> do_pread(void* b, size_t n, int64_t off, deadline_t d) noexcept override {
        return f_->pread(b, n, off, time_left(d));
    }
    result<size_t> do_pwrite(const void* b, size_t n, int64_t off, deadline_t d) noexcept override {
        return f_->pwrite(b, n, off, time_left(d));
    }
    std::unique_ptr<fs::file> f_;
};

}  // namespace gluon::test
