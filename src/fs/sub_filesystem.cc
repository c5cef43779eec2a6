#include "gluon/fs/sub_filesystem.h"

#include "gluon/fs/path.h"

namespace gluon::fs {
namespace {

class sub_fs final : public filesystem {
public:
    sub_fs(std::shared_ptr<filesystem> base, std::string prefix) : base_(std::move(base)), prefix_(std::move(prefix)) {}

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t mode) noexcept override {
        auto m = GLUON_TRY(map(p));
        return base_->open(m, flags, mode);
    }
    result<void> mkdir(std::string_view p, mode_t mode) noexcept override {
        return with(p, [&](const std::string& m) { return base_->mkdir(m, mode); });
    }
    result<void> rmdir(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->rmdir(m); });
    }
    result<void> unlink(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->unlink(m); });
    }
    result<void> rename(std::string_view a, std::string_view b) noexcept override {
        auto ma = GLUON_TRY(map(a));
        auto mb = GLUON_TRY(map(b));
        return base_->rename(ma, mb);
    }
    result<void> link(std::string_view a, std::string_view b) noexcept override {
        auto ma = GLUON_TRY(map(a));
        auto mb = GLUON_TRY(map(b));
        return base_->link(ma, mb);
    }
    result<void> symlink(std::string_view target, std::string_view lp) noexcept override {
        return with(lp, [&](const std::string& m) { return base_->symlink(target, m); });
    }
    result<std::string> readlink(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->readlink(m); });
    }
    result<struct stat> stat(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->stat(m); });
    }
    result<struct stat> lstat(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->lstat(m); });
    }
    result<struct statvfs> statfs(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->statfs(m); });
    }
    result<void> access(std::string_view p, int mode) noexcept override {
        return with(p, [&](const std::string& m) { return base_->access(m, mode); });
    }
    result<void> truncate(std::string_view p, int64_t len) noexcept override {
        return with(p, [&](const std::string& m) { return base_->truncate(m, len); });
    }
    result<void> chmod(std::string_view p, mode_t mode) noexcept override {
        return with(p, [&](const std::string& m) { return base_->chmod(m, mode); });
    }
    result<void> utimes(std::string_view p, const timespec t[2]) noexcept override {
        return with(p, [&](const std::string& m) { return base_->utimes(m, t); });
    }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override {
        return with(p, [&](const std::string& m) { return base_->opendir(m); });
    }
    // The base's directory held open (EOPNOTSUPP where the base cannot), confined as this one:
    // '..' below it is refused the same way.
    result<std::unique_ptr<filesystem>> open_root(std::string_view p, int flags) noexcept override {
        auto m = GLUON_TRY(map(p));
        std::shared_ptr<filesystem> held = GLUON_TRY(base_->open_root(m, flags));
        return make_sub_filesystem(std::move(held), ".");
    }

private:
    // "/x/../y" -> prefix/y; anything that climbs above the root is EACCES. A NUL is EINVAL: the
    // base ends the path there, after this check, so "..\0" would reach prefix/.. unchecked.
    result<std::string> map(std::string_view p) const {
        if (path::has_nul(p)) return errno_error(EINVAL);
        while (!p.empty() && p.front() == '/') p.remove_prefix(1);
        std::string n = path::normalize(p);
        if (n == ".." || n.rfind("../", 0) == 0) return errno_error(EACCES);  // path::escapes
        return n == "." ? prefix_ : path::join(prefix_, n);
    }
    template <typename F>
    auto with(std::string_view p, F&& f) -> decltype(f(std::string())) {
        auto m = GLUON_TRY(map(p));
        return f(m);
    }

    std::shared_ptr<filesystem> base_;
    std::string prefix_;
};

}  // namespace

result<std::unique_ptr<filesystem>> make_sub_filesystem(std::shared_ptr<filesystem> base, std::string_view dir) {
    if (!base) return errno_error(EINVAL);
    std::string d = path::normalize(dir);
    auto st = GLUON_TRY(base->stat(d));
    if (!S_ISDIR(st.st_mode)) return errno_error(ENOTDIR);
    return std::unique_ptr<filesystem>(new sub_fs(std::move(base), std::move(d)));
}

}  // namespace gluon::fs
