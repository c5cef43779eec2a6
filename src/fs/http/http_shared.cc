#include "http_shared.h"

#include <charconv>
#include <cstdint>

#include "gluon/runtime/fiber.h"

namespace gluon::fs::detail {
namespace {

http::client_options client_options_for(http::client_options o) {
    // Every body is streamed through a callback (into the caller's buffer, or skipped): the
    // client keeps none in memory, so its limit for such bodies does not apply. A request
    // that passed no callback would have a redirect's body kept whatever its size.
    o.max_body_bytes = UINT64_MAX;
    return o;
}

time_t parse_http_time(const std::string& s) {
    if (s.empty()) return 0;
    tm t{};
    const char* end = ::strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &t);
    if (!end || *end) return 0;
    return ::timegm(&t);
}

}  // namespace

bool transient_failure(const std::error_code& e) noexcept {
    return e == std::errc::connection_reset || e == std::errc::broken_pipe || e == std::errc::no_message_available ||
           e == std::errc::connection_aborted || e == std::errc::connection_refused || e == std::errc::timed_out;
}

http_shared::http_shared(http_fs_options o) : opts_(std::move(o)), client_(client_options_for(opts_.client)) {}

result<void> http_shared::back_off(int attempt, deadline_t d) noexcept {
    duration wait = opts_.backoff;
    for (int i = 0; i < attempt && wait < opts_.backoff_max; ++i) wait *= 2;
    if (wait > opts_.backoff_max) wait = opts_.backoff_max;
    if (time_left(d) <= wait) return errno_error(ETIMEDOUT);
    return this_fiber::sleep_for(wait);
}

result<http_meta> http_shared::head(const std::string& url, deadline_t d, bool fresh) noexcept {
    const int64_t ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.metadata_ttl).count();
    if (!fresh && ttl > 0) {
        std::lock_guard g(lock_);
        auto it = meta_.find(url);
        if (it != meta_.end() && mono_now_ns() - it->second.first < ttl) return it->second.second;
    }
    int64_t asked = mono_now_ns();
    auto m = retrying(d, [&](bool& transient) { return head_once(url, d, transient); });
    if (m && ttl > 0) {
        std::lock_guard g(lock_);
        if (meta_.size() >= 4096) meta_.clear();  // a bound, not a policy: the answers are cheap to ask again
        meta_[url] = {asked, *m};
    }
    return m;
}

result<http_meta> http_shared::head_once(const std::string& url, deadline_t d, bool& transient) noexcept {
    counters_.heads.fetch_add(1, std::memory_order_relaxed);
    http::client_request q;
    q.method = http::method::head;
    q.url = url;
    q.timeout = time_left(d);
    auto r = client_.send(q);
    if (!r) {
        transient = transient_failure(r.error());
        return unexpected(r.error());
    }
    if (r->status == 405 || r->status == 501) return probe_with_get(url, d, transient);  // no HEAD here
    switch (r->status) {
    case 200: break;
    case 404:
    case 410: return errno_error(ENOENT);
    case 401:
    case 403: return errno_error(EACCES);
    default:
        transient = r->status >= 500;
        return errno_error(EIO);
    }
    http_meta m;
    m.url = r->url;
    std::string_view len = r->header("Content-Length");
    auto [p, ec] = std::from_chars(len.data(), len.data() + len.size(), m.size);
    if (len.empty() || ec != std::errc() || p != len.data() + len.size()) return errno_error(EIO);
    m.etag = std::string(r->header("ETag"));
    m.last_modified = std::string(r->header("Last-Modified"));
    m.mtime = parse_http_time(m.last_modified);
    m.ranges = r->header("Accept-Ranges") != "none";
    return m;
}

result<http_meta> http_shared::probe_with_get(const std::string& url, deadline_t d, bool& transient) noexcept {
    http::client_request q;
    q.url = url;
    q.timeout = time_left(d);
    q.headers.emplace_back("Range", "bytes=0-0");
    http::client_response got;
    bool seen = false;
    q.on_head = [&](const http::client_response& h) {
        if (h.status >= 300 && h.status < 400) return true;  // followed by the client
        got = h;
        seen = true;
        return false;  // the head is all this needs
    };
    // Only heads matter here: a redirect's body is skipped rather than kept.
    auto r = client_.send(q, [](std::string_view) { return true; });
    if (!seen) {
        if (r) return errno_error(EIO);  // a redirect not followed
        transient = transient_failure(r.error());
        return unexpected(r.error());
    }
    http_meta m;
    m.url = got.url;
    m.etag = std::string(got.header("ETag"));
    m.last_modified = std::string(got.header("Last-Modified"));
    m.mtime = parse_http_time(m.last_modified);
    std::string_view total;
    if (got.status == 206) {
        std::string_view cr = got.header("Content-Range");
        auto slash = cr.rfind('/');
        if (slash != std::string_view::npos) total = cr.substr(slash + 1);
    } else if (got.status == 200) {
        total = got.header("Content-Length");
        m.ranges = false;
    } else if (got.status == 416) {
        // An empty file has no byte 0: its size is in "bytes */0".
        total = "0";
    } else {
        transient = got.status >= 500;
        return errno_error(got.status == 404 || got.status == 410 ? ENOENT
                           : got.status == 401 || got.status == 403 ? EACCES
                                                                    : EIO);
    }
    auto [p, ec] = std::from_chars(total.data(), total.data() + total.size(), m.size);
    if (total.empty() || ec != std::errc() || p != total.data() + total.size()) return errno_error(EIO);
    return m;
}

}  // namespace gluon::fs::detail
