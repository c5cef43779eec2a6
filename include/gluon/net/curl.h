// HTTP(S) and the other libcurl protocols from fibers. Each vCPU has its own libcurl multi handle,
// driven by the vCPU's event engine through libcurl's socket interface (ADR 0008): a transfer
// parks only the calling fiber, and thousands of them share one OS thread and its connection
// cache.
//
// Easy handles are ordinary CURL* handles configured with curl_easy_setopt; perform() runs one.
// Callbacks set on a handle (CURLOPT_WRITEFUNCTION, ...) run on the vCPU's curl driver fiber,
// not on the fiber that called perform(): they must not block (park), or every transfer of that
// vCPU stalls until they return.
//
// Errors: libcurl's own failures come in category() (the CURLcode, message from
// curl_easy_strerror); CURLE_OPERATION_TIMEDOUT compares equal to std::errc::timed_out and
// CURLE_ABORTED_BY_CALLBACK to std::errc::operation_canceled. Failures of the multi interface
// come in multi_category(). gluon's own timeout is ETIMEDOUT and an interrupt is ECANCELED, both
// in the generic category. An HTTP status such as 404 is a response, not an error.
#pragma once

// Included (not forward-declared) because the API traffics in CURL* and CURLcode, and anyone
// who passes an easy handle to perform() configures it with libcurl's own functions anyway.
#include <curl/curl.h>

#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"

namespace gluon::net::curl {

/// The category of CURLcode values.
const std::error_category& category() noexcept;
/// The category of CURLMcode values (the multi interface refused a handle).
const std::error_category& multi_category() noexcept;
inline std::error_code make_error_code(CURLcode c) noexcept {
    return {static_cast<int>(c), category()};
}

/// Initialises libcurl for the process, once (thread-safe; never undone). perform(), get() and
/// post() call it; call it yourself before curl_easy_init when handles are created on several
/// threads at once (libcurl's implicit initialisation is not thread-safe before 7.84).
/// Errors: the CURLcode of curl_global_init.
result<void> global_init() noexcept;

/// Runs the transfer configured on `easy` and parks the calling fiber until it ends. Returns the
/// response code (HTTP status, FTP reply, ...; 0 for protocols without one). Sets
/// CURLOPT_NOSIGNAL on the handle (signals are per process; vCPUs are threads). The handle is
/// back under the caller's control, out of the multi handle, when perform() returns, whatever the
/// outcome.
///
/// Errors: a CURLcode in category() (connection refused is CURLE_COULDNT_CONNECT), a CURLMcode
/// in multi_category() (the handle is already in a transfer), ETIMEDOUT (the timeout passed),
/// ECANCELED (the fiber was interrupted, or its vCPU is shutting down), EPERM (not on a vCPU),
/// ENOMEM, or the error of libcurl's global initialisation.
result<long> perform(CURL* easy, duration timeout = forever) noexcept;

struct request_options {
    /// For the whole transfer, name resolution included.
    duration timeout = forever;
    /// Extra request headers, each "Name: value".
    std::vector<std::string> headers;
    bool follow_redirects = false;
    /// With follow_redirects: the most redirects followed; one more is CURLE_TOO_MANY_REDIRECTS
    /// (libcurl before 8.3 follows any number: a redirect loop went on for thousands of requests).
    long max_redirects = 30;
    /// Refuse bodies larger than this (CURLE_WRITE_ERROR); 0 = no limit.
    size_t max_body = 0;
};

struct response {
    long status = 0;
    std::string body;
    /// Headers of the final response, in order, names as received.
    std::vector<std::pair<std::string, std::string>> headers;

    /// The first header named `name` (ASCII case-insensitive), or nullptr.
    const std::string* header(std::string_view name) const noexcept;
};

/// GET `url` and collect the response. Errors: those of perform(), CURLE_WRITE_ERROR when
/// the body exceeds max_body, and CURLE_TOO_MANY_REDIRECTS past max_redirects.
result<response> get(std::string_view url, const request_options& opts = {}) noexcept;

/// POST `body` to `url` (Content-Type from opts.headers, else
/// application/x-www-form-urlencoded, libcurl's default). Errors: those of get().
result<response> post(std::string_view url, std::string_view body,
                      const request_options& opts = {}) noexcept;

} // namespace gluon::net::curl
