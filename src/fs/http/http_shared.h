// What the HTTP filesystem and its files share: the client and its connection pool, the
// options, the HEAD answers for a while, the retry loop and the counters. Private to fs/http.
#pragma once

#include <time.h>

#include <atomic>
#include <map>
#include <string>

#include "gluon/common/spinlock.h"
#include "gluon/fs/http.h"

namespace gluon::fs::detail {

/// What a HEAD says about a URL.
struct http_meta {
    std::string url;            // after redirects: where the reads go
    uint64_t size = 0;
    std::string etag;           // as sent, quotes and W/ included; empty if none
    std::string last_modified;  // as sent; empty if none
    time_t mtime = 0;
    bool ranges = true;  // Accept-Ranges is not "none"
    bool strong_etag() const noexcept { return !etag.empty() && etag.rfind("W/", 0) != 0; }
};

struct http_counters {
    std::atomic<uint64_t> heads{0}, range_reads{0}, whole_reads{0}, retries{0}, stale{0}, bytes{0};
};

class http_shared {
public:
    explicit http_shared(http_fs_options o);

    const http_fs_options& options() const noexcept { return opts_; }
    http::client& client() noexcept { return client_; }
    http_counters& counters() noexcept { return counters_; }

    /// The HEAD answer for url (cached for metadata_ttl unless fresh is set).
    /// Errors: ENOENT (404, 410), EACCES (401, 403), EIO (5xx after retries, other statuses, no
    /// Content-Length), the client's errors (ETIMEDOUT, ECONNREFUSED, TLS errors, ...).
    result<http_meta> head(const std::string& url, deadline_t d, bool fresh = false) noexcept;

    /// Runs attempt(transient) until it succeeds, fails for good (transient left false), or
    /// the retries or the deadline run out, sleeping with exponential backoff between attempts.
    template <class F>
    auto retrying(deadline_t d, F&& attempt) noexcept -> decltype(attempt(std::declval<bool&>()));

private:
    result<http_meta> head_once(const std::string& url, deadline_t d, bool& transient) noexcept;
    /// For servers that refuse HEAD (405, 501): the same facts from a GET of byte 0.
    result<http_meta> probe_with_get(const std::string& url, deadline_t d, bool& transient) noexcept;
    result<void> back_off(int attempt, deadline_t d) noexcept;  // ETIMEDOUT if the wait would pass d

    http_fs_options opts_;
    http::client client_;
    http_counters counters_;
    spinlock lock_;
    std::map<std::string, std::pair<int64_t, http_meta>> meta_;  // url -> (when asked, answer)
};

/// True for failures a new attempt may not meet: the connection broke, was refused, or timed out.
bool transient_failure(const std::error_code& e) noexcept;

template <class F>
auto http_shared::retrying(deadline_t d, F&& attempt) noexcept -> decltype(attempt(std::declval<bool&>())) {
    for (int i = 0;; ++i) {
        bool transient = false;
        auto r = attempt(transient);
        if (r || !transient || i >= opts_.retries) return r;
        if (!back_off(i, d)) return r;
        counters_.retries.fetch_add(1, std::memory_order_relaxed);
    }
}

}  // namespace gluon::fs::detail
