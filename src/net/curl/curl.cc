// The public curl API: error categories, libcurl's process-wide initialisation, perform() on the
// vCPU's multi handle, and the get/post conveniences built on it.
#include "gluon/common/lazy.h"
#include "gluon/net/curl.h"

#include <memory>
#include <mutex>
#include <new>

#include "gluon/common/misuse.h"
#include "gluon/runtime/vcpu.h"
#include "multi.h"

namespace gluon::net::curl {

namespace {

class easy_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "curl"; }
    std::string message(int c) const override {
        return curl_easy_strerror(static_cast<CURLcode>(c));
    }
    std::error_condition default_error_condition(int c) const noexcept override {
        switch (c) {
        case CURLE_OPERATION_TIMEDOUT:
            return std::errc::timed_out;
        case CURLE_ABORTED_BY_CALLBACK:
            return std::errc::operation_canceled;
        case CURLE_OUT_OF_MEMORY:
            return std::errc::not_enough_memory;
        case CURLE_URL_MALFORMAT:
        case CURLE_BAD_FUNCTION_ARGUMENT:
            return std::errc::invalid_argument;
        case CURLE_UNSUPPORTED_PROTOCOL:
            return std::errc::protocol_not_supported;
        default:
            return {c, *this};
        }
    }
};

class multi_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "curl_multi"; }
    std::string message(int c) const override {
        return curl_multi_strerror(static_cast<CURLMcode>(c));
    }
    std::error_condition default_error_condition(int c) const noexcept override {
        switch (c) {
        case CURLM_OUT_OF_MEMORY:
            return std::errc::not_enough_memory;
        case CURLM_BAD_HANDLE:
        case CURLM_BAD_EASY_HANDLE:
            return std::errc::invalid_argument;
        case CURLM_ADDED_ALREADY:
            return std::errc::device_or_resource_busy;
        default:
            return {c, *this};
        }
    }
};

struct easy_deleter {
    void operator()(CURL* e) const noexcept { curl_easy_cleanup(e); }
};
struct slist_deleter {
    void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};

// Where a get/post collects its response.
struct sink {
    response* resp;
    size_t max_body;
};

size_t on_body(char* p, size_t size, size_t n, void* ud) noexcept {
    auto* s = static_cast<sink*>(ud);
    const size_t len = size * n;
    if (s->max_body && s->resp->body.size() + len > s->max_body) return 0;  // CURLE_WRITE_ERROR
    try {
        s->resp->body.append(p, len);
    } catch (...) {  // std::bad_alloc: fail the transfer rather than throw through C
        return 0;
    }
    return len;
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

size_t on_header(char* p, size_t size, size_t n, void* ud) noexcept {
    auto* s = static_cast<sink*>(ud);
    const size_t len = size * n;
    const std::string_view line(p, len);
    // Each status line starts a new response (a redirect, 100 Continue): keep the last one's.
    if (line.starts_with("HTTP/")) {
        s->resp->headers.clear();
        return len;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return len;  // the blank line that ends the headers
    try {
        s->resp->headers.emplace_back(std::string(trim(line.substr(0, colon))),
                                      std::string(trim(line.substr(colon + 1))));
    } catch (...) {
        return 0;
    }
    return len;
}

bool iequal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        auto lower = [](char c) {
            return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        };
        if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
}

// get() and post(): body == nullptr means GET.
result<response> request(std::string_view url, const std::string_view* body,
                         const request_options& opts) noexcept {
    try {
        GLUON_TRY(global_init());
        std::unique_ptr<CURL, easy_deleter> easy(curl_easy_init());
        if (!easy) return errno_error(ENOMEM);
        CURL* e = easy.get();
        if (CURLcode c = curl_easy_setopt(e, CURLOPT_URL, std::string(url).c_str()); c != CURLE_OK)
            return unexpected(make_error_code(c));
        std::unique_ptr<curl_slist, slist_deleter> headers;
        for (const std::string& h : opts.headers) {
            curl_slist* l = curl_slist_append(headers.get(), h.c_str());  // returns the head
            if (!l) return errno_error(ENOMEM);
            if (!headers) headers.reset(l);
        }
        response resp;
        sink s{&resp, opts.max_body};
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &on_body);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
        curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &on_header);
        curl_easy_setopt(e, CURLOPT_HEADERDATA, &s);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, opts.follow_redirects ? 1L : 0L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, opts.max_redirects);
        if (body) {
            // libcurl reads the body in place (no copy); it outlives the transfer. A null
            // pointer would make libcurl read the body from stdin instead.
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, body->empty() ? "" : body->data());
        }
        auto status = GLUON_TRY(perform(e, opts.timeout));
        resp.status = status;
        return resp;
    } catch (...) {  // std::bad_alloc from a std::string or std::vector above
        return errno_error(ENOMEM);
    }
}

} // namespace

// Not a function-local static: common/lazy.h says why.
constinit const immortal<easy_category> g_category;

const std::error_category& category() noexcept { return g_category.value; }

// Not a function-local static: common/lazy.h says why.
constinit const immortal<multi_category_impl> g_multi_category;

const std::error_category& multi_category() noexcept { return g_multi_category.value; }

result<void> global_init() noexcept {
    // curl_global_init is not thread-safe before libcurl 7.84. It is never undone: there is no
    // safe moment for curl_global_cleanup while other threads may still hold handles, and the
    // process exit reclaims everything anyway.
    static std::once_flag once;
    static CURLcode rc = CURLE_OK;
    std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (rc != CURLE_OK) return unexpected(make_error_code(rc));
    return {};
}

result<long> perform(CURL* easy, duration timeout) noexcept {
    if (!is_vcpu()) {
        gluon::detail::report_misuse(
            "gluon::net::curl::perform on a thread that is not a vCPU (call gluon::init)");
        return errno_error(EPERM);
    }
    if (!easy) return errno_error(EINVAL);
    const deadline_t deadline = deadline_after(timeout);
    GLUON_TRY(global_init());
    std::error_code err;
    detail::multi* m = detail::multi::for_current_vcpu(err);
    if (!m) return unexpected(err);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    CURLcode code = CURLE_OK;
    if (auto e = m->run(easy, deadline, code)) return unexpected(e);
    if (code != CURLE_OK) return unexpected(make_error_code(code));
    long status = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

result<response> get(std::string_view url, const request_options& opts) noexcept {
    return request(url, nullptr, opts);
}

result<response> post(std::string_view url, std::string_view body,
                      const request_options& opts) noexcept {
    return request(url, &body, opts);
}

const std::string* response::header(std::string_view name) const noexcept {
    for (const auto& [n, v] : headers)
        if (iequal(n, name)) return &v;
    return nullptr;
}

} // namespace gluon::net::curl
