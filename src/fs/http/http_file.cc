#include "http_file.h"

#include <charconv>
#include <cstring>
#include <string>

namespace gluon::fs::detail {
namespace {

/// Parses "bytes FIRST-LAST/TOTAL" (TOTAL may be "*": 0 then).
bool parse_content_range(std::string_view v, uint64_t& first, uint64_t& last, uint64_t& total) {
    if (v.rfind("bytes ", 0) != 0) return false;
    const char* p = v.data() + 6;
    const char* e = v.data() + v.size();
    auto r = std::from_chars(p, e, first);
    if (r.ec != std::errc() || r.ptr == e || *r.ptr != '-') return false;
    r = std::from_chars(r.ptr + 1, e, last);
    if (r.ec != std::errc() || r.ptr == e || *r.ptr != '/') return false;
    if (std::string_view(r.ptr + 1, e - r.ptr - 1) == "*") {
        total = 0;
        return true;
    }
    r = std::from_chars(r.ptr + 1, e, total);
    return r.ec == std::errc() && r.ptr == e;
}

}  // namespace

struct stat http_stat(const http_meta& m, uint64_t ino, bool dir) noexcept {
    struct stat st{};
    st.st_ino = ino;
    st.st_mode = dir ? (S_IFDIR | 0555) : (S_IFREG | 0444);
    st.st_nlink = dir ? 2 : 1;
    st.st_size = dir ? 0 : static_cast<off_t>(m.size);
    st.st_blksize = 1 << 20;  // reads of this size make good use of a request
    st.st_blocks = static_cast<blkcnt_t>((m.size + 511) / 512);
    st.st_mtim.tv_sec = st.st_ctim.tv_sec = st.st_atim.tv_sec = m.mtime;
    return st;
}

result<struct stat> http_file::fstat() noexcept {
    if (closed_) return errno_error(EBADF);
    return http_stat(meta_, ino_);
}

result<void> http_file::close() noexcept {
    if (closed_) return errno_error(EBADF);
    closed_ = true;
    return {};
}

void http_file::add_conditions(http::client_request& q) const {
    if (meta_.strong_etag()) q.headers.emplace_back("If-Match", meta_.etag);
    else if (!meta_.last_modified.empty()) q.headers.emplace_back("If-Unmodified-Since", meta_.last_modified);
}

bool http_file::changed(const http::client_response& r) const noexcept {
    std::string_view etag = r.header("ETag");
    if (!meta_.etag.empty() && !etag.empty() && etag != meta_.etag) return true;
    std::string_view lm = r.header("Last-Modified");
    return meta_.etag.empty() && !meta_.last_modified.empty() && !lm.empty() && lm != meta_.last_modified;
}

result<size_t> http_file::stale() noexcept {
    sh_->counters().stale.fetch_add(1, std::memory_order_relaxed);
    return errno_error(ESTALE);
}

result<size_t> http_file::do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept {
    if (closed_) return errno_error(EBADF);
    if (off < 0) return errno_error(EINVAL);
    uint64_t o = static_cast<uint64_t>(off);
    if (n == 0 || o >= meta_.size) return size_t{0};
    if (n > meta_.size - o) n = static_cast<size_t>(meta_.size - o);
    char* b = static_cast<char*>(buf);
    auto r = sh_->retrying(d, [&](bool& transient) -> result<size_t> {
        if (ranges_.load(std::memory_order_relaxed)) {
            auto got = range_once(b, n, o, d, transient);
            if (got || got.error() != std::errc::resource_unavailable_try_again) return got;
        }
        return whole_once(b, n, o, d, transient);
    });
    if (r) sh_->counters().bytes.fetch_add(*r, std::memory_order_relaxed);
    return r;
}

result<size_t> http_file::range_once(char* buf, size_t n, uint64_t off, deadline_t d, bool& transient) noexcept {
    sh_->counters().range_reads.fetch_add(1, std::memory_order_relaxed);
    http::client_request q;
    q.url = meta_.url;
    q.timeout = time_left(d);
    std::string range = "bytes=" + std::to_string(off) + "-" + std::to_string(off + n - 1);
    q.headers.emplace_back("Range", std::move(range));
    add_conditions(q);
    int verdict = 0;  // an errno decided from the head; EAGAIN: the server sent the whole file
    // The client keeps a body with no buffer or callback to take it in memory, and a redirect's
    // is not for the caller's buffer: a server could send gigabytes of it (the client's limit is
    // off for the filesystem). Bodies come through a callback instead, a redirect's skipped.
    bool redirect = false;
    q.on_head = [&](const http::client_response& h) {
        redirect = h.status >= 300 && h.status < 400;
        if (redirect) return true;  // followed by the client
        if (h.status == 206) {
            uint64_t first = 0, last = 0, total = 0;
            if (changed(h)) verdict = ESTALE;
            else if (!parse_content_range(h.header("Content-Range"), first, last, total)) verdict = EIO;
            else if (total != 0 && total != meta_.size) verdict = ESTALE;
            else if (first != off || last != off + n - 1) verdict = EIO;
            return verdict == 0;
        }
        if (h.status == 200) verdict = changed(h) ? ESTALE : EAGAIN;
        else if (h.status == 412 || h.status == 416 || h.status == 404 || h.status == 410) verdict = ESTALE;
        else verdict = EIO;
        transient = h.status >= 500;
        return false;
    };
    size_t got = 0;
    bool over = false;
    auto into = [&](std::string_view piece) {
        if (redirect) return true;
        if (piece.size() > n - got) return !(over = true);
        std::memcpy(buf + got, piece.data(), piece.size());
        got += piece.size();
        return true;
    };
    auto r = sh_->client().send(q, into);
    if (verdict == ESTALE) return stale();
    if (verdict == EAGAIN) {
        ranges_.store(false, std::memory_order_relaxed);
        return errno_error(EAGAIN);
    }
    if (verdict != 0) return errno_error(verdict);
    if (over) return errno_error(EMSGSIZE);
    if (!r) {
        transient = transient_failure(r.error());
        return unexpected(r.error());
    }
    if (r->status != 206) return errno_error(EIO);  // a redirect not followed
    if (got != n) {
        transient = true;
        return errno_error(EIO);
    }
    return n;
}

result<size_t> http_file::whole_once(char* buf, size_t n, uint64_t off, deadline_t d, bool& transient) noexcept {
    sh_->counters().whole_reads.fetch_add(1, std::memory_order_relaxed);
    http::client_request q;
    q.url = meta_.url;
    q.timeout = time_left(d);
    add_conditions(q);
    int verdict = 0;
    // The client hands a redirect's body to the callback too, before the file's: it is skipped.
    bool redirect = false;
    q.on_head = [&](const http::client_response& h) {
        redirect = h.status >= 300 && h.status < 400;
        if (redirect) return true;
        if (h.status == 200) {
            std::string_view len = h.header("Content-Length");
            if (changed(h) || (!len.empty() && len != std::to_string(meta_.size))) verdict = ESTALE;
            return verdict == 0;
        }
        verdict = h.status == 412 || h.status == 404 || h.status == 410 ? ESTALE : EIO;
        transient = h.status >= 500;
        return false;
    };
    uint64_t pos = 0;  // body bytes seen
    size_t copied = 0;
    auto keep = [&](std::string_view piece) {
        if (redirect) return true;
        uint64_t end = pos + piece.size();
        if (end > off && pos < off + n) {
            uint64_t from = off > pos ? off - pos : 0;
            uint64_t to = std::min<uint64_t>(piece.size(), off + n - pos);
            std::memcpy(buf + (pos + from - off), piece.data() + from, to - from);
            copied += to - from;
        }
        pos = end;
        return copied < n;  // stop (and drop the connection) once the window is full
    };
    auto r = sh_->client().send(q, keep);
    if (verdict == ESTALE) return stale();
    if (verdict != 0) return errno_error(verdict);
    if (copied == n) return n;
    if (!r) {
        transient = transient_failure(r.error());
        return unexpected(r.error());
    }
    if (redirect) return errno_error(EIO);  // a redirect not followed
    if (pos != meta_.size) return stale();  // the body was shorter than the file
    return errno_error(EIO);
}

}  // namespace gluon::fs::detail
