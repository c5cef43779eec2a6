#include "gluon/http/static_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>

#include <charconv>
#include <list>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "chars.h"
#include "date.h"
#include "lists.h"
#include "ranges.h"
#include "gluon/common/spinlock.h"
#include "gluon/sys/ops.h"

namespace gluon::http {

namespace {

/// The request's path as a relative file name: percent-decoded, "." and empty segments dropped.
/// EINVAL: a bad escape, an encoded '/', or NUL (400); EACCES: a ".." segment (403).
result<std::string> clean_path(std::string_view raw) {
    std::string out;
    out.reserve(raw.size());
    size_t seg_start = 0;
    auto end_segment = [&]() -> bool {
        std::string_view seg = std::string_view(out).substr(seg_start);
        if (seg == "..") return false;
        if (seg.empty() || seg == ".") out.resize(seg_start);
        else out += '/';
        seg_start = out.size();
        return true;
    };
    for (size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '%') {
            if (i + 2 >= raw.size() || !detail::is_hex(raw[i + 1]) || !detail::is_hex(raw[i + 2]))
                return errno_error(EINVAL);
            c = static_cast<char>(detail::hex_value(raw[i + 1]) * 16 + detail::hex_value(raw[i + 2]));
            i += 2;
            if (c == '/' || c == '\\') return errno_error(EINVAL);  // an encoded separator
        }
        if (c == '\0') return errno_error(EINVAL);
        if (c == '/') {
            if (!end_segment()) return errno_error(EACCES);
            continue;
        }
        out += c;
    }
    if (!end_segment()) return errno_error(EACCES);
    if (!out.empty() && out.back() == '/') out.pop_back();
    return out;
}

struct file_info {
    uint64_t size = 0;
    int64_t mtime_ns = 0;
    time_t mtime_s = 0;
    std::string etag;
    char last_modified[detail::k_http_date_len];
    std::string_view mime;
    std::string fields;  // Content-Type, Last-Modified, ETag, Accept-Ranges, formatted once
};

struct cached_file {
    file_info info;
    std::string bytes;
    int64_t checked_ns = 0;
};

class lru_cache {
public:
    explicit lru_cache(size_t cap) : cap_(cap) {}
    std::shared_ptr<cached_file> find(const std::string& key) {
        std::lock_guard g(lock_);
        auto it = map_.find(key);
        if (it == map_.end()) return nullptr;
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
    }
    void put(const std::string& key, std::shared_ptr<cached_file> f) {
        std::lock_guard g(lock_);
        erase_locked(key);
        bytes_ += f->bytes.size();
        order_.emplace_front(key, std::move(f));
        map_[key] = order_.begin();
        while (bytes_ > cap_ && !order_.empty()) erase_locked(order_.back().first);
    }
    void erase(const std::string& key) {
        std::lock_guard g(lock_);
        erase_locked(key);
    }

private:
    using entry = std::pair<std::string, std::shared_ptr<cached_file>>;
    void erase_locked(const std::string& key) {
        auto it = map_.find(key);
        if (it == map_.end()) return;
        bytes_ -= it->second->second->bytes.size();
        auto node = it->second;
        map_.erase(it);
        order_.erase(node);
    }
    spinlock lock_;
    size_t cap_;
    size_t bytes_ = 0;
    std::list<entry> order_;
    std::unordered_map<std::string, std::list<entry>::iterator> map_;
};

struct static_state {
    int root_fd = -1;
    static_options opts;
    lru_cache cache;
    static_state(int fd, static_options o) : root_fd(fd), opts(std::move(o)), cache(opts.cache_bytes) {}
    ~static_state() { (void)sys::close(root_fd); }
};

void plain(response& res, int status) {
    res.status(status);
    res.content_type("text/plain");
    res.body(std::to_string(status) + " " + std::string(reason_phrase(status)) + "\n");
}

int status_for_open_error(int e) {
    switch (e) {
        case ENOENT: case ENOTDIR: case ENAMETOOLONG: return 404;
        case EACCES: case EPERM: case EXDEV: case ELOOP: return 403;
        default: return 500;
    }
}

/// Opens rel under the root; a directory becomes its index file. Opened non-blocking, as the
/// file type is known only once it is open: a FIFO in the root would otherwise hold the vCPU's
/// thread in open(2) until something wrote to it. (Cleared again for a regular file, whose
/// reads it would not change but for io_uring, which may then answer EAGAIN.)
long open_beneath(const static_state& st, const std::string& rel, struct stat& sb, std::string& name) {
    open_how how{};
    how.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
    how.resolve = st.opts.allow_symlinks_outside_root ? RESOLVE_NO_MAGICLINKS : RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    name = rel.empty() ? "." : rel;
    long fd = sys::openat2(st.root_fd, name.c_str(), &how);
    if (fd < 0) return fd;
    if (long r = sys::fstat(static_cast<int>(fd), &sb); r < 0) return (void)sys::close(static_cast<int>(fd)), r;
    if (S_ISDIR(sb.st_mode)) {
        (void)sys::close(static_cast<int>(fd));
        if (st.opts.index_file.empty()) return -EACCES;
        name = (rel.empty() ? "" : rel + "/") + st.opts.index_file;
        fd = sys::openat2(st.root_fd, name.c_str(), &how);
        if (fd == -ENOENT) return -EACCES;  // a directory without an index: never a listing
        if (fd < 0) return fd;
        if (long r = sys::fstat(static_cast<int>(fd), &sb); r < 0) return (void)sys::close(static_cast<int>(fd)), r;
    }
    if (!S_ISREG(sb.st_mode)) return (void)sys::close(static_cast<int>(fd)), -EACCES;
    if (long r = sys::fcntl(static_cast<int>(fd), F_SETFL, 0); r < 0) return (void)sys::close(static_cast<int>(fd)), r;
    return fd;
}

/// The file's validators and fields. The ETag is made of its mtime and size and, for a file
/// served from memory (`bytes`, all of it), a hash of its bytes: two versions of a file written
/// within one timestamp tick (see racy()) have the same mtime and may have the same size, and
/// the second must not be answered 304 to a client holding the first.
file_info describe(const struct stat& sb, const std::string& name,
                   const std::string* bytes = nullptr) {
    file_info fi;
    fi.size = static_cast<uint64_t>(sb.st_size);
    fi.mtime_s = sb.st_mtim.tv_sec;
    fi.mtime_ns = sb.st_mtim.tv_sec * 1'000'000'000LL + sb.st_mtim.tv_nsec;
    char buf[64];
    auto r = std::to_chars(buf + 1, buf + 24, static_cast<uint64_t>(fi.mtime_ns), 16);
    buf[0] = '"';
    *r.ptr++ = '-';
    r = std::to_chars(r.ptr, buf + 46, fi.size, 16);
    if (bytes) {
        *r.ptr++ = '-';
        r = std::to_chars(r.ptr, buf + 63, std::hash<std::string_view>{}(*bytes), 16);
    }
    *r.ptr++ = '"';
    fi.etag.assign(buf, static_cast<size_t>(r.ptr - buf));
    detail::format_http_date(fi.mtime_s, fi.last_modified);
    fi.mime = mime_type(name);
    fi.fields = "Content-Type: " + std::string(fi.mime) + "\r\nLast-Modified: " +
                std::string(fi.last_modified, detail::k_http_date_len) + "\r\nETag: " + fi.etag +
                "\r\nAccept-Ranges: bytes\r\n";
    return fi;
}

/// CLOCK_REALTIME_COARSE in ns: the clock the kernel stamps mtimes with (a finer one where it
/// has multigrain timestamps), so a write that comes after this reading has an mtime no earlier.
int64_t wall_coarse_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return timespec_ns(ts);
}

/// Whether a file read from `read_ns` on (wall_coarse_ns) may yet change without its mtime or
/// size showing it ("racy git"): a write in the same kernel tick (a few ms) as the read, or
/// within the filesystem's timestamp granularity (up to 2 s, on FAT), may leave the mtime as
/// it was, and one that keeps the size then looks like the bytes read. A file whose mtime is
/// 2 s or more older than its read cannot be rewritten under that mtime (unless it is set back
/// by hand); a newer one, or one in the future (a clock set back), is served but not cached,
/// and read again at each request until it is old enough.
bool racy(const file_info& fi, int64_t read_ns) noexcept {
    constexpr int64_t k_granularity_ns = 2'000'000'000;
    return read_ns - fi.mtime_ns < k_granularity_ns;
}

/// Whether the request has a `name` field and, if so, whether an element of it matches
/// `etag`: a list split over several field lines is one list (RFC 9110 5.3), so every line
/// counts. `strong`: If-Match's comparison (RFC 9110 13.1.1), where a weak tag never matches;
/// otherwise the weak one of If-None-Match (13.1.2). "*" matches the file, which exists.
bool etag_listed(const request& req, std::string_view name, std::string_view etag, bool strong, bool& present) {
    present = false;
    for (const header& f : req.headers()) {
        if (f.value.empty() || !iequals(f.name, name)) continue;  // (an empty one lists nothing)
        present = true;
        const bool listed = !detail::for_each_element(f.value, [etag, strong](std::string_view t) {
            if (!strong && t.substr(0, 2) == "W/") t.remove_prefix(2);
            return !(t == "*" || t == etag);  // (false: found, stop)
        });
        if (listed) return true;
    }
    return false;
}

/// The status the preconditions answer with (412 or 304), or 0 to serve the file. RFC 9110
/// 13.2.2's order: If-Match, or without it If-Unmodified-Since, comes first, so that a client
/// that updates only an unchanged file is never told 304 about a changed one; If-None-Match,
/// or without it If-Modified-Since (GET and HEAD only), next. A date that is not an HTTP-date
/// is ignored.
int precondition_status(const request& req, const file_info& fi) {
    bool present = false;
    if (const bool listed = etag_listed(req, "If-Match", fi.etag, true, present); present) {
        if (!listed) return 412;
    } else if (std::string_view ius = req.header("If-Unmodified-Since"); !ius.empty()) {
        time_t t = detail::parse_http_date(ius);
        if (t >= 0 && fi.mtime_s > t) return 412;
    }
    const bool get_or_head = req.method() == method::get || req.method() == method::head;
    if (const bool listed = etag_listed(req, "If-None-Match", fi.etag, false, present); present) {
        if (listed) return get_or_head ? 304 : 412;
    } else if (std::string_view ims = req.header("If-Modified-Since"); !ims.empty() && get_or_head) {
        time_t t = detail::parse_http_date(ims);
        if (t >= 0 && fi.mtime_s <= t) return 304;
    }
    return 0;
}

/// Whether an If-Range field lets Range apply (RFC 9110 13.1.5): an entity-tag when it is the
/// file's, compared strongly (a weak one never matches); an HTTP-date when it is the file's
/// Last-Modified, compared as a date, whichever of the three forms it is written in. (Dates
/// have one-second resolution; the ETag, which holds the mtime in nanoseconds, is the exact one.)
bool if_range_matches(std::string_view if_range, const file_info& fi) {
    if (if_range.empty()) return true;
    if (if_range[0] == '"' || if_range.starts_with("W/")) return if_range == fi.etag;
    const time_t t = detail::parse_http_date(if_range);
    return t >= 0 && t == fi.mtime_s;
}

/// Several ranges are sent as one multipart/byteranges body built in memory, up to this many
/// bytes of the file; asked for more, the file is sent whole (RFC 9110 lets a server ignore
/// Range).
constexpr uint64_t k_multipart_max = 16u << 20;

/// What is sent of a file: its ranges (the whole file when the request had no Range field) and,
/// for several, the multipart body's boundary.
struct selection {
    std::vector<detail::byte_range> parts;
    std::string boundary;
};

/// The file's fields without its Content-Type (their first line), for an answer whose body is
/// not the file's bytes.
std::string_view fields_but_type(const file_info& fi) {
    std::string_view fields = fi.fields;
    return fields.substr(fields.find("\r\n") + 2);
}

/// Applies conditionals and Range, and sets the status and fields; nullopt if that answered
/// the request (304, 412, 416).
std::optional<selection> select_parts(request& req, response& res, const file_info& fi) {
    if (int s = precondition_status(req, fi)) {
        if (s == 304) res.header_lines(fi.fields);  // (a 412 has no body and describes none)
        res.status(s);
        return std::nullopt;
    }
    selection sel;
    std::string_view range = req.header("Range");
    const bool ranges_apply = !range.empty() && if_range_matches(req.header("If-Range"), fi);
    detail::range_answer a = ranges_apply ? detail::parse_ranges(range, fi.size, sel.parts) : detail::range_answer::whole;
    if (a == detail::range_answer::parts && sel.parts.size() > 1) {
        uint64_t total = 0;
        for (const auto& p : sel.parts) total += p.len;
        if (total > k_multipart_max) a = detail::range_answer::whole;
    }
    if (a == detail::range_answer::unsatisfiable) {
        // The file's validators, but not its type: the 416's (empty) body is not the file.
        res.header_lines(fields_but_type(fi));
        res.status(416);
        res.header("Content-Range", "bytes */" + std::to_string(fi.size));
        return std::nullopt;
    }
    if (a == detail::range_answer::whole) {
        res.header_lines(fi.fields);
        sel.parts.assign(1, {0, fi.size});
        return sel;
    }
    res.status(206);
    if (sel.parts.size() == 1) {
        res.header_lines(fi.fields);
        res.header("Content-Range", detail::content_range(sel.parts[0], fi.size));
        return sel;
    }
    // Several: the file's fields but its Content-Type, which each part carries.
    res.header_lines(fields_but_type(fi));
    sel.boundary = detail::new_boundary();
    res.header("Content-Type", "multipart/byteranges; boundary=" + sel.boundary);
    return sel;
}

/// Appends n bytes of fd from offset off to out; false if the file ends early or fails.
bool append_from(int fd, uint64_t off, uint64_t n, std::string& out) {
    const size_t at = out.size();
    out.resize(at + n);
    for (uint64_t got = 0; got < n;) {
        long r = sys::read(fd, out.data() + at + got, n - got, static_cast<int64_t>(off + got));
        if (r <= 0) return false;
        got += static_cast<uint64_t>(r);
    }
    return true;
}

/// HEAD of several ranges: declares the length of the multipart body GET would get (its
/// framing, formatted as GET's is, and its parts' lengths) and sends none, so that the parts'
/// bytes (up to k_multipart_max of them) are not read for a body that is dropped.
void declare_multipart(response& res, const file_info& fi, const selection& sel) {
    std::string framing;
    uint64_t part_bytes = 0;
    detail::multipart_body(sel.parts, fi.size, fi.mime, sel.boundary, framing,
                           [&part_bytes](const detail::byte_range& r, std::string&) {
                               part_bytes += r.len;
                               return true;
                           });
    res.content_length(framing.size() + part_bytes);
    (void)res.finish();  // (the head alone; a stream already gone has nothing to be told)
}

void serve_cached(request& req, response& res, std::shared_ptr<cached_file> f) {
    auto sel = select_parts(req, res, f->info);
    if (!sel) return;
    if (sel->boundary.empty()) {
        const detail::byte_range& p = sel->parts[0];
        const std::string_view bytes = std::string_view(f->bytes).substr(static_cast<size_t>(p.first), p.len);
        res.body(bytes, std::move(f));  // (bytes first: an argument's move may come before the other)
        return;
    }
    if (req.method() == method::head) return declare_multipart(res, f->info, *sel);
    auto body = std::make_shared<std::string>();
    detail::multipart_body(sel->parts, f->info.size, f->info.mime, sel->boundary, *body,
                           [&f](const detail::byte_range& r, std::string& out) {
                               out.append(f->bytes, static_cast<size_t>(r.first), r.len);
                               return true;
                           });
    res.body(*body, body);  // (the response keeps the string; its bytes are not copied again)
}

// Several ranges of a file too large for the cache: read into one multipart body.
void serve_multipart(response& res, int fd, const file_info& fi, const selection& sel) {
    auto body = std::make_shared<std::string>();
    const bool ok = detail::multipart_body(sel.parts, fi.size, fi.mime, sel.boundary, *body,
                                           [fd](const detail::byte_range& r, std::string& out) {
                                               return append_from(fd, r.first, r.len, out);
                                           });
    (void)sys::close(fd);
    if (!ok) return res.abort();  // (the head is set: a read error ends the connection instead)
    res.body(*body, body);
}

void serve(static_state& st, request& req, response& res) {
    std::string_view raw = req.has_param("*") ? req.param("*") : req.path();
    auto rel = clean_path(raw);
    if (!rel) return plain(res, rel.error() == std::errc::invalid_argument ? 400 : 403);

    // Freshness needs no more than the coarse clock (a tick is a few ms; the interval is 1 s).
    int64_t now = mono_coarse_ns();
    int64_t fresh_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(st.opts.revalidate_after).count();
    std::shared_ptr<cached_file> hit = st.opts.cache_file_max ? st.cache.find(*rel) : nullptr;
    if (hit && now - hit->checked_ns < fresh_ns) {
        return serve_cached(req, res, std::move(hit));
    }
    struct stat sb;
    std::string name;
    long fd = open_beneath(st, *rel, sb, name);
    if (fd < 0) {
        if (hit) st.cache.erase(*rel);
        return plain(res, status_for_open_error(static_cast<int>(-fd)));
    }
    file_info fi = describe(sb, name);
    if (hit && hit->info.size == fi.size && hit->info.mtime_ns == fi.mtime_ns) {
        (void)sys::close(static_cast<int>(fd));
        auto fresh = std::make_shared<cached_file>(*hit);  // entries are immutable once shared
        fresh->checked_ns = now;
        st.cache.put(*rel, fresh);
        return serve_cached(req, res, std::move(fresh));
    }
    if (fi.size <= st.opts.cache_file_max) {
        auto entry = std::make_shared<cached_file>();
        entry->checked_ns = now;
        const int64_t read_ns = wall_coarse_ns();  // (before the read: a write during it is after)
        bool ok = append_from(static_cast<int>(fd), 0, fi.size, entry->bytes);
        (void)sys::close(static_cast<int>(fd));
        if (!ok) return plain(res, 500);
        entry->info = describe(sb, name, &entry->bytes);
        if (!racy(entry->info, read_ns)) st.cache.put(*rel, entry);
        else if (hit) st.cache.erase(*rel);  // (it holds an older version)
        return serve_cached(req, res, std::move(entry));
    }
    auto sel = select_parts(req, res, fi);
    if (!sel) return (void)sys::close(static_cast<int>(fd));
    if (!sel->boundary.empty() && req.method() == method::head) {
        (void)sys::close(static_cast<int>(fd));
        return declare_multipart(res, fi, *sel);
    }
    if (!sel->boundary.empty()) return serve_multipart(res, static_cast<int>(fd), fi, *sel);
    res.file(static_cast<int>(fd), static_cast<int64_t>(sel->parts[0].first), sel->parts[0].len, true);
}

}  // namespace

result<handler> static_files(const std::string& root, static_options opts) {
    long fd = sys::openat(AT_FDCWD, root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) return errno_error(static_cast<int>(-fd));
    auto st = std::make_shared<static_state>(static_cast<int>(fd), std::move(opts));
    return handler([st](request& req, response& res) { serve(*st, req, res); });
}

std::string_view mime_type(std::string_view name) noexcept {
    static constexpr std::pair<std::string_view, std::string_view> types[] = {
        {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
        {"css", "text/css; charset=utf-8"},   {"js", "text/javascript; charset=utf-8"},
        {"mjs", "text/javascript; charset=utf-8"}, {"json", "application/json"},
        {"txt", "text/plain; charset=utf-8"}, {"md", "text/markdown; charset=utf-8"},
        {"xml", "application/xml"},           {"svg", "image/svg+xml"},
        {"png", "image/png"},                 {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},               {"gif", "image/gif"},
        {"webp", "image/webp"},               {"avif", "image/avif"},
        {"ico", "image/x-icon"},              {"woff", "font/woff"},
        {"woff2", "font/woff2"},              {"ttf", "font/ttf"},
        {"pdf", "application/pdf"},           {"zip", "application/zip"},
        {"gz", "application/gzip"},           {"tar", "application/x-tar"},
        {"wasm", "application/wasm"},         {"mp4", "video/mp4"},
        {"webm", "video/webm"},               {"mp3", "audio/mpeg"},
        {"ogg", "audio/ogg"},                 {"csv", "text/csv; charset=utf-8"},
    };
    size_t slash = name.rfind('/');
    size_t dot = name.rfind('.');
    if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
        return "application/octet-stream";
    std::string_view ext = name.substr(dot + 1);
    for (const auto& [e, t] : types)
        if (iequals(e, ext)) return t;
    return "application/octet-stream";
}

}  // namespace gluon::http
