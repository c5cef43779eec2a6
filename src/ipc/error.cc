// The "ipc" error category.
#include "gluon/common/lazy.h"
#include "gluon/ipc/error.h"

#include <string>

namespace gluon::ipc {
namespace {

class ipc_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "ipc"; }
    std::string message(int c) const override {
        switch (static_cast<errc>(c)) {
        case errc::bad_header: return "bad control message header from the peer";
        case errc::bad_message: return "control message length does not fit its type";
        case errc::unexpected_message: return "control message not allowed at this point";
        case errc::unsupported_version: return "peer speaks no supported protocol version";
        case errc::bad_region: return "peer's buffer region is malformed";
        case errc::bad_queue: return "peer's queue is malformed or its indices are out of range";
        case errc::bad_offset: return "slice offset or length outside the buffer region";
        case errc::bad_chain: return "slice chain too long (a cycle) or with an empty slice";
        case errc::handshake_failed: return "handshake failed";
        case errc::session_closed: return "session closed";
        case errc::message_too_large: return "message too large";
        case errc::unsealed_memory: return "peer's shared memory is not sealed against shrinking";
        case errc::backlog_exceeded: return "peer sent more than is held unread (FallbackData or new streams)";
        }
        return "unknown ipc error";
    }
};

}  // namespace

// Not a function-local static: common/lazy.h says why.
constinit const immortal<ipc_category> g_category;

const std::error_category& category() noexcept { return g_category.value; }

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), category()}; }

}  // namespace gluon::ipc
