// ipc::listener: accept, then the server handshake.
#include "gluon/ipc/listener.h"

#include <fcntl.h>
#include <sys/un.h>

#include "gluon/sys/ops.h"
#include "session_impl.h"

namespace gluon::ipc {

result<listener> listener::listen(const net::address& addr, const session_options& opts, bool replace) {
    if (replace && addr.family() == AF_UNIX) {
        const auto* un = reinterpret_cast<const sockaddr_un*>(addr.data());
        if (un->sun_path[0] != '\0') (void)sys::unlinkat(AT_FDCWD, un->sun_path, 0);
    }
    listener l;
    l.l_ = GLUON_TRY(net::listener::listen(addr));
    l.opts_ = opts;
    l.registry_ = std::make_shared<detail::region_registry>();
    return l;
}

result<session> listener::accept(duration timeout) {
    net::stream s = GLUON_TRY(l_.accept(timeout));
    auto si = GLUON_TRY(detail::server_handshake(std::move(s), opts_, registry_));
    si->start_reader();
    return session(std::move(si));
}

}  // namespace gluon::ipc
