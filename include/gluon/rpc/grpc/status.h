// gRPC's status: a code and a message, what every call ends with (gRPC status codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gluon::rpc::grpc {

enum class code : int {
    ok = 0, cancelled = 1, unknown = 2, invalid_argument = 3, deadline_exceeded = 4, not_found = 5,
    already_exists = 6, permission_denied = 7, resource_exhausted = 8, failed_precondition = 9,
    aborted = 10, out_of_range = 11, unimplemented = 12, internal = 13, unavailable = 14,
    data_loss = 15, unauthenticated = 16,
};

struct status {
    grpc::code code = code::ok;
    std::string message;
    bool ok() const noexcept { return code == code::ok; }
};

/// The largest message either side sends: gRPC's length prefix is 32 bits, and peers read it
/// as a signed int (gRPC Java refuses a larger one; protobuf's messages stop at 2 GiB too).
inline constexpr size_t k_max_message = INT32_MAX;

/// The code's name as gRPC spells it ("DEADLINE_EXCEEDED"), for logs and messages.
const char* code_name(code c) noexcept;

}  // namespace gluon::rpc::grpc
