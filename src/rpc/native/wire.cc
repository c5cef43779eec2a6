// Frame header checks and the status field of responses.
#include "wire.h"

namespace gluon::rpc::wire {

namespace {
constexpr uint32_t k_errno_status = 0x10000;
}

std::error_code check(const header& h, size_t max_frame) noexcept {
    if (h.version != k_version || h.flags != 0) return errc::malformed_frame;
    switch (h.type) {
    case kind::request:
    case kind::response:
        break;
    case kind::cancel:
        if (h.length != 0) return errc::malformed_frame;
        break;
    default:
        return errc::malformed_frame;
    }
    if (h.length > max_frame) return errc::frame_too_large;
    return {};
}

uint32_t status_of(const std::error_code& e) noexcept {
    if (!e) return 0;
    if (e.category() == category()) return static_cast<uint32_t>(e.value());
    if (e.category() == std::generic_category() && e.value() > 0 && e.value() < 0x10000)
        return k_errno_status | static_cast<uint32_t>(e.value());
    return static_cast<uint32_t>(errc::handler_failed);
}

std::error_code error_of_status(uint32_t status) noexcept {
    if (status == 0) return {};
    if (status & k_errno_status) {
        // No errno number: an error all the same (a zero error_code would read as success).
        int e = static_cast<int>(status & 0xffff);
        if (e == 0) return errc::handler_failed;
        return {e, std::generic_category()};
    }
    if (status > static_cast<uint32_t>(errc::handler_failed)) return errc::handler_failed;
    return static_cast<errc>(status);
}

} // namespace gluon::rpc::wire
