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
    listener& operator=(listener&&) noexcept;
    /// Closes it (handshakes under way finish on their own and their sessions are dropped).
    ~listener();

    /// Listens on addr (a Unix socket path or abstract name). replace: remove a socket file
    /// already at the path first (how a new server takes over from an old one in a hot
    /// restart). Errors: those of net::listener::listen (EADDRINUSE, ...).
    static result<listener> listen(const net::address& addr, const session_options& opts = {},
                                   bool replace = false);
    /// The next client whose handshake is done. From the first call on, clients are accepted
    /// and their handshakes run on fibers of their own (on the calling vCPU), so a client that
    /// connects and stays silent delays no other: it fails after opts.handshake_timeout.
    /// Errors: ETIMEDOUT (none within timeout), those of session::accept (a client whose
    /// handshake failed is reported, not skipped), those of net::listener::accept (EBADF once
    /// closed; EMFILE and the like are reported and accepting goes on), EPERM (not on a vCPU).
    result<session> accept(duration timeout = forever);
    /// Stops listening (sessions already accepted go on). Errors: those of close(2).
    result<void> close() noexcept;
    net::listener& socket() noexcept;

    struct state;

private:
    static void accept_loop(std::shared_ptr<state> st);
    static void handshake(std::shared_ptr<state> st, net::stream sock);
    std::shared_ptr<state> st_;
};

}  // namespace gluon::ipc
