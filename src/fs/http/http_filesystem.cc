#include <dirent.h>

#include <functional>
#include <map>

#include "gluon/fs/http.h"
#include "gluon/fs/path.h"
#include "http_file.h"

namespace gluon::fs {
namespace {

using detail::http_meta;

bool unreserved(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-._~/!$&'()*+,;=:@").find(c) != std::string_view::npos;
}

/// A path as a URL path: what may not appear there raw is percent-encoded.
std::string encode_path(std::string_view p) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (char c : p) {
        if (unreserved(c)) {
            out += c;
        } else {
            auto u = static_cast<unsigned char>(c);
            out += '%';
            out += hex[u >> 4];
            out += hex[u & 15];
        }
    }
    return out;
}

uint64_t ino_of(const std::string& p) { return std::hash<std::string>{}(p) | 2; }
/// A version of a file has its own inode number: one replaced on the server (a new ETag, or a new
/// Last-Modified without one) is a new file, as one renamed over locally, and caches see it so.
uint64_t ino_of(const std::string& p, const http_meta& m) {
    const std::string& v = m.etag.empty() ? m.last_modified : m.etag;
    return (std::hash<std::string>{}(p) ^ (std::hash<std::string>{}(v) * 0x9E3779B97F4A7C15ULL)) | 2;
}

class list_dir final : public directory {
public:
    explicit list_dir(std::vector<dir_entry> e) : entries_(std::move(e)) {}
    result<std::optional<dir_entry>> next() noexcept override {
        if (at_ == entries_.size()) return std::optional<dir_entry>{};
        return std::optional<dir_entry>{entries_[at_++]};
    }

private:
    std::vector<dir_entry> entries_;
    size_t at_ = 0;
};

class http_fs final : public filesystem {
public:
    // p as a normal path from the root ("" and "x" are "/" and "/x").
    static std::string absolute(std::string_view p) {
        return path::normalize(p.empty() || p[0] != '/' ? "/" + std::string(p) : std::string(p));
    }

    http_fs(std::shared_ptr<detail::http_shared> sh, std::string base, std::map<std::string, std::string> files)
        : sh_(std::move(sh)), base_(std::move(base)), files_(std::move(files)) {}

    result<std::unique_ptr<file>> open(std::string_view p, int flags, mode_t) noexcept override {
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND))) return errno_error(EROFS);
        std::string n = absolute(p);
        if (n == "/") return errno_error(EISDIR);
        if (flags & O_DIRECTORY) return errno_error(ENOTDIR);
        auto url = GLUON_TRY(url_of(n));
        auto m = GLUON_TRY(sh_->head(url, k_no_deadline));
        uint64_t ino = ino_of(n, m);
        return std::unique_ptr<file>(new detail::http_file(sh_, std::move(m), ino));
    }
    result<struct stat> stat(std::string_view p) noexcept override {
        std::string n = absolute(p);
        if (n == "/") return detail::http_stat({}, 1, true);
        auto url = GLUON_TRY(url_of(n));
        auto m = GLUON_TRY(sh_->head(url, k_no_deadline));
        return detail::http_stat(m, ino_of(n, m));
    }
    result<struct stat> lstat(std::string_view p) noexcept override { return stat(p); }
    result<struct statvfs> statfs(std::string_view) noexcept override {
        struct statvfs s{};
        s.f_bsize = s.f_frsize = 4096;
        s.f_namemax = 255;
        s.f_flag = ST_RDONLY;
        return s;
    }
    result<void> access(std::string_view p, int mode) noexcept override {
        GLUON_TRY(stat(p));
        if (mode & W_OK) return errno_error(EROFS);
        return {};
    }
    result<std::unique_ptr<directory>> opendir(std::string_view p) noexcept override {
        std::string n = absolute(p);
        if (n != "/") {
            GLUON_TRY(stat(n));
            return errno_error(ENOTDIR);
        }
        if (files_.empty()) return errno_error(EOPNOTSUPP);  // HTTP has no listing to read
        std::vector<dir_entry> e;
        for (const auto& [name, url] : files_) e.push_back({name, ino_of("/" + name), DT_REG});
        return std::unique_ptr<directory>(new list_dir(std::move(e)));
    }
    result<std::string> readlink(std::string_view p) noexcept override {
        GLUON_TRY(stat(p));
        return errno_error(EINVAL);
    }
    result<void> mkdir(std::string_view, mode_t) noexcept override { return errno_error(EROFS); }
    result<void> rmdir(std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> unlink(std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> rename(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> link(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> symlink(std::string_view, std::string_view) noexcept override { return errno_error(EROFS); }
    result<void> truncate(std::string_view, int64_t) noexcept override { return errno_error(EROFS); }
    result<void> chmod(std::string_view, mode_t) noexcept override { return errno_error(EROFS); }
    result<void> utimes(std::string_view, const timespec*) noexcept override { return errno_error(EROFS); }

    http_fs_stats statistics() const noexcept {
        auto& c = sh_->counters();
        return {c.heads.load(), c.range_reads.load(), c.whole_reads.load(), c.retries.load(), c.stale.load(),
                c.bytes.load(), sh_->client().statistics().connections_opened};
    }

private:
    /// The URL of a normalised absolute path. Errors: ENOENT (not one of `files`).
    result<std::string> url_of(const std::string& n) const {
        if (files_.empty()) return base_ + encode_path(n);
        auto it = files_.find(n.substr(1));
        if (it == files_.end()) return errno_error(ENOENT);
        return it->second;
    }

    std::shared_ptr<detail::http_shared> sh_;
    std::string base_;  // no trailing '/'
    std::map<std::string, std::string> files_;
};

}  // namespace

result<std::unique_ptr<filesystem>> make_http_filesystem(http_fs_options opts) {
    std::map<std::string, std::string> files;
    for (const auto& [name, url] : opts.files) {
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") return errno_error(EINVAL);
        GLUON_TRY(http::url::parse(url));
        files[name] = url;
    }
    std::string base = opts.base_url;
    if (files.empty()) {
        if (base.empty()) return errno_error(EINVAL);
        GLUON_TRY(http::url::parse(base));
        while (!base.empty() && base.back() == '/') base.pop_back();
    }
    auto sh = std::make_shared<detail::http_shared>(std::move(opts));
    return std::unique_ptr<filesystem>(new http_fs(std::move(sh), std::move(base), std::move(files)));
}

http_fs_stats http_fs_statistics(const filesystem& fs) noexcept {
    auto* h = dynamic_cast<const http_fs*>(&fs);
    return h ? h->statistics() : http_fs_stats{};
}

}  // namespace gluon::fs
