#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "exchange.h"
#include "gluon/common/log.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fd.h"
#include "gluon/sys/ops.h"

namespace gluon::http {

// request

std::string_view request::param(std::string_view name) const noexcept {
    for (const auto& [k, v] : params_)
        if (k == name) return v;
    return {};
}

bool request::has_param(std::string_view name) const noexcept {
    for (const auto& kv : params_)
        if (kv.first == name) return true;
    return false;
}

result<size_t> request::read_body(void* buf, size_t n) { return conn_.read_body(buf, n, forever); }

result<size_t> request::read_body(void* buf, size_t n, duration timeout) { return conn_.read_body(buf, n, timeout); }

result<std::string_view> request::body() {
    // A length over the limit fails the first read (413): it must not size the buffer first.
    if (head_.body == framing::length && head_.content_length <= max_body_) body_.reserve(head_.content_length);
    for (;;) {
        size_t old = body_.size();
        body_.resize(old + 16 * 1024);
        auto n = read_body(body_.data() + old, 16 * 1024);
        body_.resize(old + (n ? *n : 0));
        if (!n) return unexpected(n.error());
        if (*n == 0) return std::string_view(body_);
    }
}

net::byte_stream& request::stream() noexcept { return conn_.stream(); }

result<void> request::wait_abandoned(duration timeout) { return conn_.wait_abandoned(timeout); }

bool request::abandoned() const noexcept { return conn_.abandoned(); }

result<void> request::interrupt_when_abandoned(deadline_t at) { return conn_.interrupt_when_abandoned(at); }

std::string_view request::client_ip() { return conn_.client_ip(); }

std::string_view detail::peer_ip_cache::get(net::byte_stream& s) {
    if (known_) return text_;
    known_ = true;
    net::socket_fd* sock = s.socket();
    auto a = sock ? sock->peer_address() : result<net::address>(errno_error(ENOTSOCK));
    if (!a) return text_;
    char buf[INET6_ADDRSTRLEN];
    const void* ip = nullptr;
    if (a->family() == AF_INET) ip = &reinterpret_cast<const sockaddr_in*>(a->data())->sin_addr;
    if (a->family() == AF_INET6) ip = &reinterpret_cast<const sockaddr_in6*>(a->data())->sin6_addr;
    if (ip && ::inet_ntop(a->family(), ip, buf, sizeof buf)) text_ = buf;
    return text_;
}

// response

namespace {
bool safe_field_text(std::string_view s) noexcept {
    for (char c : s)
        if (c == '\r' || c == '\n' || c == '\0') return false;
    return true;
}
}  // namespace

void response::header(std::string_view name, std::string_view value) {
    if (name.empty() || !safe_field_text(name) || !safe_field_text(value) || name.find(':') != name.npos) {
        GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1), "gluon: http: response field dropped (CR, LF, NUL or ':' in it)");
        return;
    }
    fields_ += name;
    fields_ += ": ";
    fields_ += value;
    fields_ += "\r\n";
}

result<std::string_view> response::upgrade(std::string_view raw_head) {
    detach();
    head_sent_ = true;
    status_ = 101;
    return conn_.upgrade(*this, raw_head);
}

void response::body(std::string_view data) {
    release();
    kind_ = body_kind::copy;
    body_.assign(data);
}

void response::body(std::string_view data, std::shared_ptr<const void> owner) {
    release();
    kind_ = body_kind::view;
    body_view_ = data;
    body_owner_ = std::move(owner);
}

void response::file(int fd, int64_t offset, uint64_t len, bool own_fd) {
    release();
    kind_ = body_kind::file;
    file_fd_ = fd;
    own_fd_ = own_fd;
    file_off_ = offset;
    file_len_ = len;
}

result<void> response::write(std::string_view data) {
    if (finished_) return errno_error(EINVAL);
    if (declared_length_ != UINT64_MAX && streamed_ + data.size() > declared_length_) return errno_error(EINVAL);
    streaming_ = true;
    streamed_ += data.size();
    return conn_.write_body(*this, data);
}

result<void> response::finish() {
    if (finished_) return {};
    if (!head_sent_) {
        streaming_ = true;
        if (declared_length_ == UINT64_MAX) declared_length_ = 0;
    }
    finished_ = true;
    return conn_.finish_body(*this, declared_length_ != UINT64_MAX && streamed_ != declared_length_);
}

void response::trailer(std::string_view name, std::string_view value) {
    if (name.empty() || !safe_field_text(name) || !safe_field_text(value) || name.find(':') != name.npos) {
        GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1), "gluon: http: response trailer dropped (CR, LF, NUL or ':' in it)");
        return;
    }
    trailers_ += name;
    trailers_ += ": ";
    trailers_ += value;
    trailers_ += "\r\n";
}

void response::release() noexcept {
    // Through the runtime: sending the file may have read it through the vCPU's engine (a TLS
    // stream has no sendfile), and the epoll engine would keep that state for the next fd of
    // the same number (a socket then never registered, its reads never woken).
    if (file_fd_ >= 0 && own_fd_) (void)fd::close(file_fd_);
    file_fd_ = -1;
    own_fd_ = false;
    body_owner_.reset();
    body_view_ = {};
}

void response::reset() noexcept {
    release();
    status_ = 200;
    close_ = detached_ = head_sent_ = streaming_ = chunked_ = finished_ = false;
    kind_ = body_kind::copy;
    declared_length_ = UINT64_MAX;
    streamed_ = 0;
    fields_.clear();
    trailers_.clear();
    body_.clear();
}

std::string_view reason_phrase(int s) noexcept {
    switch (s) {
        case 100: return "Continue";
        case 101: return "Switching Protocols";
        case 200: return "OK";
        case 201: return "Created";
        case 202: return "Accepted";
        case 204: return "No Content";
        case 206: return "Partial Content";
        case 301: return "Moved Permanently";
        case 302: return "Found";
        case 303: return "See Other";
        case 304: return "Not Modified";
        case 307: return "Temporary Redirect";
        case 308: return "Permanent Redirect";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 411: return "Length Required";
        case 412: return "Precondition Failed";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 416: return "Range Not Satisfiable";
        case 417: return "Expectation Failed";
        case 426: return "Upgrade Required";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        default: return "Unknown";
    }
}

}  // namespace gluon::http
