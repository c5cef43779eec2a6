// The "rpc" error category of the native RPC.
#include "gluon/common/lazy.h"
#include "gluon/rpc/native/error.h"

#include <string>

namespace gluon::rpc {
namespace {

class rpc_category final : public std::error_category {
public:
    const char* name() const noexcept override { return "rpc"; }
    std::string message(int c) const override {
        switch (static_cast<errc>(c)) {
        case errc::unknown_service:
            return "the server has no such service";
        case errc::unknown_method:
            return "the service has no such method";
        case errc::schema_mismatch:
            return "the peer's request or response type for this method differs (layout or "
                   "version)";
        case errc::deadline_exceeded:
            return "deadline exceeded";
        case errc::cancelled:
            return "call cancelled";
        case errc::frame_too_large:
            return "frame larger than the receiver's max_frame_bytes";
        case errc::too_many_requests:
            return "too many calls in flight on this connection";
        case errc::malformed_frame:
            return "malformed frame (connection closed)";
        case errc::connection_closed:
            return "connection closed";
        case errc::buffer_too_small:
            return "reply larger than the caller's receive buffer";
        case errc::handler_failed:
            return "the handler failed";
        }
        return "unknown rpc error";
    }
};

} // namespace

// Not a function-local static: common/lazy.h says why.
constinit const immortal<rpc_category> g_category;

const std::error_category& category() noexcept { return g_category.value; }

std::error_code make_error_code(errc e) noexcept {
    return {static_cast<int>(e), category()};
}

} // namespace gluon::rpc
