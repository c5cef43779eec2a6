// Errors of gluon's native RPC (category "rpc"). A call fails with one of these, with the
// transport's own error (ECONNRESET, tls::errc, ipc::errc, ...), or with the errno a handler
// returned (the generic category, carried across the wire as its number).
#pragma once

#include <system_error>

namespace gluon::rpc {

enum class errc : int {
    unknown_service = 1, ///< the server has no service with the call's service id
    unknown_method,      ///< the service has no method with the call's method id
    schema_mismatch,     ///< the two sides' request or response types differ (layout or version)
    deadline_exceeded,   ///< the call's deadline passed (on either side)
    cancelled,           ///< the call was cancelled (the caller was interrupted)
    frame_too_large,     ///< a frame larger than the receiver's max_frame_bytes
    too_many_requests,   ///< the connection already has max_in_flight calls running on the server
    malformed_frame,     ///< a frame that breaks the wire format: the connection is closed
    connection_closed,   ///< the connection ended (closed by either side, or broken) first
    buffer_too_small,    ///< a reply larger than the buffer the caller gave to receive it into
    handler_failed,      ///< the handler failed with an error that has no errno number
};

/// The "rpc" error category.
const std::error_category& category() noexcept;
std::error_code make_error_code(errc e) noexcept;

} // namespace gluon::rpc

template <> struct std::is_error_code_enum<gluon::rpc::errc> : std::true_type {};
