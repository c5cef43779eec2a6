#include "gluon/rpc/grpc/status.h"

namespace gluon::rpc::grpc {

const char* code_name(code c) noexcept {
    static constexpr const char* names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
        "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
        "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    };
    auto i = static_cast<unsigned>(c);
    return i < sizeof names / sizeof names[0] ? names[i] : "UNKNOWN";
}

}  // namespace gluon::rpc::grpc
