// The "tls" error category, OpenSSL error-queue draining and the mapping from OpenSSL reasons to
// tls::errc, and the fiber-local last error message.
#include <openssl/err.h>

#include "gluon/common/lazy.h"
#include "gluon/runtime/fiber_local.h"
#include "internal.h"

namespace gluon::net::tls {
namespace {

class tls_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "tls"; }
    std::string message(int c) const override {
        switch (static_cast<errc>(c)) {
        case errc::handshake_failed:
            return "TLS handshake failed";
        case errc::verify_failed:
            return "certificate verification failed";
        case errc::no_application_protocol:
            return "no ALPN protocol in common";
        case errc::protocol_error:
            return "TLS protocol error";
        case errc::record_too_large:
            return "TLS record too large";
        case errc::bad_record_mac:
            return "TLS record failed authentication";
        case errc::unexpected_eof:
            return "connection closed without TLS close_notify";
        case errc::peer_alert:
            return "peer sent a fatal TLS alert";
        case errc::invalid_certificate:
            return "invalid certificate";
        case errc::invalid_private_key:
            return "invalid private key";
        case errc::invalid_configuration:
            return "invalid TLS configuration";
        case errc::broken:
            return "TLS connection already failed";
        }
        return "unknown TLS error";
    }
};

// Made on first use (the key is registered then, not during static init), and not as a
// function-local static: common/lazy.h says why.
constinit lazy_ptr<fiber_local<std::string>> g_last_message;

fiber_local<std::string>& last_message() {
    return g_last_message.get([] { return new fiber_local<std::string>; });
}

}  // namespace

// Not a function-local static: common/lazy.h says why.
constinit const immortal<tls_category> g_category;

const std::error_category& category() noexcept { return g_category.value; }

std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), category()};
}

const std::string& last_error_message() {
    return *last_message();
}

namespace detail {

std::string drain_errors(unsigned long* first) {
    std::string out;
    if (first) *first = 0;
    const char* data = nullptr;
    int flags = 0;
    while (unsigned long e = ERR_get_error_all(nullptr, nullptr, nullptr, &data, &flags)) {
        if (first && *first == 0) *first = e;
        const char* reason = ERR_reason_error_string(e);
        std::string item = reason ? reason : "OpenSSL error " + std::to_string(ERR_GET_REASON(e));
        if (data && (flags & ERR_TXT_STRING) && *data) item += std::string(" (") + data + ")";
        // OpenSSL often stacks the same reason at several levels; say it once.
        if (out.find(item) != std::string::npos) continue;
        if (!out.empty()) out += "; ";
        out += item;
    }
    return out;
}

errc classify(unsigned long err, bool handshaking) noexcept {
    int reason = ERR_GET_REASON(err);
    if (ERR_GET_LIB(err) == ERR_LIB_SSL) {
        switch (reason) {
        case SSL_R_CERTIFICATE_VERIFY_FAILED:
        case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
            return errc::verify_failed;
        case SSL_R_NO_APPLICATION_PROTOCOL:
        case SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL:
            return errc::no_application_protocol;
        case SSL_R_PACKET_LENGTH_TOO_LONG:
        case SSL_R_ENCRYPTED_LENGTH_TOO_LONG:
        case SSL_R_DATA_LENGTH_TOO_LONG:
        case SSL_R_EXCESSIVE_MESSAGE_SIZE:
            return errc::record_too_large;
        case SSL_R_DECRYPTION_FAILED:
        case SSL_R_DECRYPTION_FAILED_OR_BAD_RECORD_MAC:
            return errc::bad_record_mac;
        case SSL_R_UNEXPECTED_EOF_WHILE_READING:
            return errc::unexpected_eof;
        case SSL_R_WRONG_VERSION_NUMBER:
        case SSL_R_HTTP_REQUEST:
        case SSL_R_HTTPS_PROXY_REQUEST:
        case SSL_R_UNEXPECTED_MESSAGE:
        case SSL_R_UNEXPECTED_RECORD:
        case SSL_R_BAD_PACKET:
        case SSL_R_BAD_LENGTH:
        case SSL_R_LENGTH_MISMATCH:
        case SSL_R_RECORD_LENGTH_MISMATCH:
        case SSL_R_BAD_RECORD_TYPE:
        case SSL_R_UNKNOWN_PROTOCOL:
        case SSL_R_BAD_PROTOCOL_VERSION_NUMBER:
            return errc::protocol_error;
        default:
            break;
        }
        // Reasons SSL_AD_REASON_OFFSET + alert number: the peer told us why it gave up.
        if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256)
            return errc::peer_alert;
    }
    return handshaking ? errc::handshake_failed : errc::protocol_error;
}

unexpected fail(std::error_code e, std::string msg) {
    *last_message() = std::move(msg);
    return unexpected(e);
}

}  // namespace detail
}  // namespace gluon::net::tls
