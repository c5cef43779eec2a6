// The server side of shmipc: a Unix-socket listener whose connections become sessions after
// the handshake. Sessions of one client share one mapping of its buffer region, found by the
// memfd's or file's (device, inode) rather than by the name the client sent.
#pragma once

#include <memory>

#include "gluon/ipc/session.h"
#include "gluon/net/socket.h"

namespace gluon::ipc {

class listener {
public:
    listener() noexcept = default;
    listener(listener&&) noexcept = default;
    listener& operator=(listener&&) noexcept = default;

    /// Listens on addr (a Unix socket path or abstract name). replace: remove a socket file
    /// already at the path first (how a new server takes over from an old one in a hot
    /// restart). Errors: those of net::listener::listen (EADDRINUSE, ...).
    static result<listener> listen(const net::address& addr, const session_options& opts = {},
                                   bool replace = false);
    /// The next client, handshake done. Errors: those of net::listener::accept and of
    /// session::accept (a client whose handshake fails is reported, not skipped).
    result<session> accept(duration timeout = forever);
    /// Stops listening (sessions already accepted go on).
    result<void> close() noexcept { return l_.close(); }
    net::listener& socket() noexcept { return l_; }

private:
    net::listener l_;
    session_options opts_;
    std::shared_ptr<detail::region_registry> registry_;
};

}  // namespace gluon::ipc
