// Message types and methods shared by the native RPC tests.
#pragma once

#include "gluon/rpc/rpc.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gluon::rpc::testing {

struct echo_msg {
    uint64_t seq = 0;
    std::string text;
    bytes payload;
    GLUON_RPC_FIELDS(seq, text, payload)
};

struct point {
    int32_t x, y;
};

struct inner {
    std::string name;
    std::vector<uint32_t> values;
    GLUON_RPC_FIELDS(name, values)
};

struct rich {
    uint8_t flag = 0;
    bool on = false;
    point at{};
    inner in;
    std::vector<point> path;
    double ratio = 0;
    inner second;
    GLUON_RPC_FIELDS(flag, on, at, in, path, ratio, second)
};

/// Same field types as echo_msg but a newer version: a different schema.
struct echo_msg_v2 {
    static constexpr uint32_t rpc_version = 2;
    uint64_t seq = 0;
    std::string text;
    bytes payload;
    GLUON_RPC_FIELDS(seq, text, payload)
};

struct sleep_req {
    uint32_t millis = 0;
    GLUON_RPC_FIELDS(millis)
};

inline constexpr method<echo_msg, echo_msg> echo{1, 1, "echo"};
inline constexpr method<rich, rich> mirror{1, 2, "mirror"};
inline constexpr method<sleep_req, empty> block{1, 3, "block"};
inline constexpr method<empty, empty> fail_eio{1, 4, "fail"};
inline constexpr method<empty, empty> throws{1, 5, "throws"};
inline constexpr method<echo_msg_v2, echo_msg_v2> echo_v2{1, 1, "echo"};
inline constexpr method<empty, empty> nowhere{1, 99, "nowhere"};
inline constexpr method<empty, empty> no_service{7, 1, "nothing"};

} // namespace gluon::rpc::testing
