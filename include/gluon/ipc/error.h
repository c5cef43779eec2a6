// Errors of the shared-memory IPC module (category "ipc"). A peer that breaks the protocol (a
// bad header, an offset outside the region, a slice chain with a cycle, a queue index out of
// range) has its session closed with one of these; every call on the session then returns it.
#pragma once

#include <system_error>

namespace gluon::ipc {

enum class errc : int {
    bad_header = 1,       ///< a control message with a wrong magic, version or type
    bad_message,          ///< a control message whose length does not fit its type
    unexpected_message,   ///< a control message not allowed at this point of the protocol
    unsupported_version,  ///< the peer speaks no protocol version gluon does (2 or 3)
    bad_region,           ///< a buffer region whose header or lists do not fit its mapping
    bad_queue,            ///< a queue whose capacity or indices are out of range
    bad_offset,           ///< a slice offset or length outside the region or off a slice boundary
    bad_chain,            ///< a slice chain that is too long (a cycle) or has an empty slice
    handshake_failed,     ///< the handshake ended early or sent the wrong file descriptors
    session_closed,       ///< the session was closed by this side
    message_too_large,    ///< a message larger than the session accepts
    unsealed_memory,      ///< shared memory the peer could shrink, where sealed memory is required
    backlog_exceeded,     ///< the peer sent more than this side holds unread (FallbackData bytes or new streams)
};

/// The "ipc" error category.
const std::error_category& category() noexcept;
std::error_code make_error_code(errc e) noexcept;

}  // namespace gluon::ipc

template <>
struct std::is_error_code_enum<gluon::ipc::errc> : std::true_type {};
