// A client's sessions to one shmipc server with a pool of streams, as shmipc-go's
// SessionManager: streams are taken, used for a request and its answer, and put back for the
// next request. All sessions share one buffer region (one per server: a crashed server takes
// only its own region down). A HotRestart from the server is followed by itself: the next
// get_stream() connects new sessions (with new shared memory) to the same address, acknowledges
// on the old ones, and retires them once the old server hangs up. A session that dies another
// way (the server closed it, crashed, or restarted without a HotRestart) is dialled again by
// get_stream(), at once and then with a doubling backoff while the server stays away.
#pragma once

#include <memory>
#include <vector>

#include "gluon/ipc/session.h"

namespace gluon::ipc {

struct manager_options {
    net::address address;
    session_options session;
    /// Sessions (connections), used in turn: 32 streams from one, then the next.
    unsigned sessions = 1;
    /// Pooled streams kept per session.
    size_t max_pooled = 4096;
    /// Backoff between redials of a dead session: the first comes at once, the next after
    /// redial_min, doubling up to redial_max while the server stays unreachable.
    duration redial_min = std::chrono::milliseconds(10);
    duration redial_max = std::chrono::seconds(1);
};

class session_manager {
public:
    session_manager() noexcept;
    session_manager(session_manager&&) noexcept;
    session_manager& operator=(session_manager&&) noexcept;
    ~session_manager();

    /// Creates the region and connects every session. Errors: those of session::connect.
    static result<session_manager> connect(const manager_options& opts);
    /// A pooled stream, or a new one. A pooled stream the server closed (or sent bytes on)
    /// while it sat in the pool is closed and passed over. Dead sessions are dialled again
    /// first (within their backoff). Errors: those of session::connect (while following a hot restart, or the last
    /// redial's when every session is down and could not be dialled again), ECONNRESET or
    /// ipc::errc (every session is down, none due for a redial), EBADF (closed).
    result<stream> get_stream();
    /// Gives a stream back for reuse; one with unread bytes, in fallback, closed by either side,
    /// or whose session is down is closed instead.
    void put_back(stream s);
    /// Closes every session.
    result<void> close();
    /// The current sessions (for counters and occupancy).
    std::vector<const session*> sessions() const;
    /// Hot restarts followed so far.
    unsigned hot_restarts() const noexcept;
    /// Dead sessions dialled again successfully so far.
    unsigned redials() const noexcept;

private:
    struct state;
    std::unique_ptr<state> st_;
};

}  // namespace gluon::ipc
