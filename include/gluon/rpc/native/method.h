// A native RPC method's identity: a service id and a method id (what the wire carries), a name
// for the name table, and its request and response types (whose schema hashes both sides check).
//
//     inline constexpr rpc::method<put_request, put_reply> kv_put{1, 1, "put"};
#pragma once

#include "gluon/rpc/native/message.h"

#include <cstdint>
#include <string>

namespace gluon::rpc {

template <typename Req, typename Resp> struct method {
    using request = Req;
    using response = Resp;
    uint16_t service;
    uint16_t id;
    const char* name;

    /// What the client sends and the server checks: a call whose types differ from the
    /// server's fails with errc::schema_mismatch.
    static uint32_t schema() { return schema_hash<Req>() * 0x9e3779b1u ^ schema_hash<Resp>(); }
};

/// A message with no fields (ping, requests without arguments).
struct empty {
    GLUON_RPC_FIELDS()
};

/// One row of a server's name table (server::methods, client::describe).
struct method_info {
    uint16_t service = 0;
    uint16_t id = 0;
    uint32_t schema = 0;
    std::string service_name;
    std::string name;
};

/// Service 0 is the server's own: ping (health checks) and the name table.
namespace builtin {
struct name_table {
    std::string text; // one "service\tmethod\tschema\tservice name\tmethod name\n" per method
    GLUON_RPC_FIELDS(text)
};
inline constexpr method<empty, empty> ping{0, 0, "ping"};
inline constexpr method<empty, name_table> methods{0, 1, "methods"};
} // namespace builtin

} // namespace gluon::rpc
