// Waiting for signals from a fiber: the usual end of a server's main fiber is
//
//     auto sig = gluon::wait_for_signals({SIGINT, SIGTERM});
//     server->stop(1s);
//
// The signals are caught by a process-wide handler while the call waits (whichever thread the
// kernel delivers them to), so nothing has to block them in every thread first. When the call
// returns, the signals get their earlier dispositions back: a second Ctrl-C during a graceful
// stop ends the process as usual.
#pragma once

#include <csignal>
#include <cstdio>
#include <functional>
#include <initializer_list>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"

namespace gluon {

/// Parks the calling fiber until one of `sigs` arrives, and returns its number.
/// Errors: ETIMEDOUT, ECANCELED (interrupted), EINVAL (empty set, or a signal that cannot be
/// caught: SIGKILL, SIGSTOP, or out of range), EBUSY (another call is waiting already),
/// EPERM (outside a vCPU), the errors of pipe2(2) and sigaction(2).
result<int> wait_for_signals(std::initializer_list<int> sigs, duration timeout = forever);

/// As above, and calls ready() once the signals are caught, just before parking: whoever learns
/// from it that the program is ready (a "listening" line) may send one of them at once, and the
/// wait returns it instead of the signal's earlier disposition (the default: the end of the
/// process) taking it. ready is not called when the call fails before that.
/// Errors: those of the form above.
result<int> wait_for_signals(std::initializer_list<int> sigs, duration timeout, const std::function<void()>& ready);

/// The end of a server program's main fiber: prints "listening PORT" on stdout (what scripts
/// and tests wait for) once SIGINT and SIGTERM are caught, so either may be sent as soon as the
/// line is read; parks until one comes, then stops the server, giving what is in flight up to
/// `grace`. For net::server, net::sharded_server, http::server and the like.
/// Errors: those of wait_for_signals (the server is stopped all the same; the line is not
/// printed when the signals could not be caught).
template <typename Server>
result<void> serve_until_signalled(Server& s, duration grace) {
    auto sig = wait_for_signals({SIGINT, SIGTERM}, forever, [&s] {
        std::printf("listening %u\n", static_cast<unsigned>(s.local_address().port()));
        std::fflush(stdout);
    });
    s.stop(grace);
    if (!sig) return unexpected(sig.error());
    return {};
}

}  // namespace gluon
