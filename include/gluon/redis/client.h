// A Redis client for fibers: RESP2 or RESP3, commands of many fibers pipelined on one
// connection (each command's bytes go out with whatever else is queued, and the replies come
// back in order to the fibers that wait for them), a pool of connections per vCPU, pub/sub,
// timeouts and TLS.
//
//     redis::client db({.host = "127.0.0.1", .port = 6379});
//     auto r = db.command({"SET", "greeting", "hello"});   // reply or error
//     auto v = db.get("greeting");                          // "hello"
//
// A reply that is a Redis error (-ERR ...) is a reply of kind error, not a failed call: failed
// calls are the transport's (the connection broke, a timeout, the server is not there).
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/redis/reply.h"

namespace gluon::net::tls {
class context;
}

namespace gluon::redis {

struct options {
    std::string host = "127.0.0.1";
    uint16_t port = 6379;
    std::string unix_path;  // a Unix socket instead of host:port
    /// 2: RESP2 (what every server speaks); 3: RESP3 through HELLO 3 (Redis 6 and later).
    int protocol = 2;
    std::string username, password;  // AUTH (or HELLO's AUTH) when password is set
    int database = 0;                // SELECT when not 0
    /// TLS with this client context (verification as the context says); the server name for
    /// SNI and verification is tls_server_name, or host.
    const net::tls::context* tls = nullptr;
    std::string tls_server_name;
    duration connect_timeout = std::chrono::seconds(5);
    /// How long a command may wait for its reply. A command that times out closes its
    /// connection (later replies could no longer be matched): commands queued behind it fail
    /// with ECONNABORTED, and the pool opens a new connection for the next one.
    duration command_timeout = std::chrono::seconds(10);
    size_t pool_size = 1;  // connections per vCPU; commands go to the least busy one
};

class connection;

/// Connections per vCPU to one server. Thread-safe: fibers of every vCPU may use one client
/// (each vCPU has its own connections; a thread made a vCPU again after fini gets new ones).
class client {
public:
    explicit client(options o);
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Sends one command and returns its reply (which may be a Redis error reply). Errors:
    /// those of connecting (ECONNREFUSED, ETIMEDOUT, ENOENT for a missing Unix socket, the TLS
    /// handshake's; a command that waited while another opened a connection that failed gets
    /// that failure), EACCES (AUTH or HELLO refused), ETIMEDOUT (no reply within
    /// command_timeout), ECANCELED (the calling fiber was interrupted: its connection is
    /// closed, as after a timeout), ECONNRESET / EPIPE (the connection broke), ECONNABORTED (a
    /// command before it timed out or was interrupted and closed the connection), EPROTO (the
    /// server's bytes are not RESP), EPERM (not on a vCPU), EINVAL (a command that would change
    /// the pooled connection for its other callers: SUBSCRIBE and its kin, MONITOR and CLIENT
    /// REPLY, whose replies are not one per command, SELECT, HELLO, RESET, AUTH, whose state
    /// every caller of the connection would share and a new connection would not have, QUIT,
    /// which ends it for them, and MULTI, EXEC, DISCARD, WATCH, UNWATCH, whose transaction
    /// would take in other fibers' commands; use subscriber, options.database,
    /// options.protocol, options.username / password, close() and transaction()).
    result<reply> command(std::initializer_list<std::string_view> args);
    result<reply> command(const std::vector<std::string>& args);
    /// Runs the commands as one transaction (MULTI, the commands, EXEC), sent together on a
    /// pooled connection so that no other fiber's command falls inside it. Returns EXEC's
    /// reply: an array of the commands' replies, in order (each may be an error reply: Redis
    /// runs the rest), or, when the server refused one as it was queued (a wrong number of
    /// arguments, an unknown command), that refusal as an error reply, and none ran. WATCH
    /// has no place on a shared connection: use a script (EVAL) to act on what it reads.
    /// Errors: those of command; EINVAL (no command, an empty one, or one that command
    /// refuses, MULTI and EXEC included).
    result<reply> transaction(const std::vector<std::vector<std::string>>& commands);

    /// GET: the value, or nullopt if the key does not exist. Errors: those of command, and
    /// EPROTO for an answer of another kind (an error reply: its text is logged).
    result<std::optional<std::string>> get(std::string_view key);
    /// SET key value [PX ttl]. Errors: those of command, EPROTO unless the server says OK.
    result<void> set(std::string_view key, std::string_view value, duration ttl = duration::zero());
    /// DEL: how many keys existed. Errors: those of get.
    result<int64_t> del(std::string_view key);
    /// INCRBY. Errors: those of get.
    result<int64_t> incr(std::string_view key, int64_t by = 1);
    /// PUBLISH: how many subscribers got the message. Errors: those of get.
    result<int64_t> publish(std::string_view channel, std::string_view message);

    /// Closes this vCPU's connections (commands in flight on them fail with ECONNABORTED).
    void close() noexcept;

    struct impl;

private:
    std::unique_ptr<impl> im_;
};

/// A connection of its own in subscriber mode: SUBSCRIBE / PSUBSCRIBE, then messages as they
/// come. Used by one fiber at a time.
class subscriber {
public:
    struct message {
        std::string channel;
        std::string pattern;  // for PSUBSCRIBE matches, else empty
        std::string payload;
    };

    /// Connects as options say (pool_size is ignored). Errors: those of client::command's
    /// connecting.
    static result<subscriber> connect(const options& o);
    subscriber(subscriber&&) noexcept;
    subscriber& operator=(subscriber&&) noexcept;
    ~subscriber();

    /// Subscribes to channels and waits for each confirmation, up to options.command_timeout
    /// for the whole call; messages that come first are kept for next(), up to
    /// k_max_early_bytes. Each confirmation is matched to the call it answers: those of a call
    /// that gave up (ETIMEDOUT, ECANCELED) are taken for it when they come, in a later call or
    /// next(), never for another call. Errors: EINVAL (no channel), ETIMEDOUT (not every
    /// confirmation came in time), ECANCELED, EPROTO (the server refused the call; or it sent
    /// a confirmation that answers no call made, and the subscriber is closed), ECONNRESET,
    /// EPIPE, ENOBUFS (more messages came first than are kept: the subscriber is closed, since
    /// the rest would be lost).
    result<void> subscribe(std::initializer_list<std::string_view> channels);
    /// As subscribe, to the channels matching each pattern. Errors: as subscribe.
    result<void> psubscribe(std::initializer_list<std::string_view> patterns);
    /// Unsubscribes from channels, or from every channel subscribed to when none is given (the
    /// server then confirms each subscription it has, or once with no name when it has none).
    /// Errors: as subscribe, EINVAL aside.
    result<void> unsubscribe(std::initializer_list<std::string_view> channels = {});
    /// As unsubscribe, for patterns. Errors: as unsubscribe.
    result<void> punsubscribe(std::initializer_list<std::string_view> patterns = {});
    /// The next message, waiting up to timeout. Errors: ETIMEDOUT (nothing came; the
    /// subscriber is still usable), ECANCELED (the fiber was interrupted; the subscriber is
    /// still usable), ECONNRESET (the server closed), EPROTO (not a pub/sub event, or a
    /// confirmation that answers no call made: the subscriber is then closed).
    result<message> next(duration timeout = forever);

    explicit subscriber(std::unique_ptr<connection> c) noexcept;

    /// What the messages kept while waiting for confirmations may hold (their bytes and
    /// sizeof(message) each): above Redis's own limit for a subscriber's output (32 MiB).
    static constexpr size_t k_max_early_bytes = 64u << 20;

private:
    result<void> change(std::string_view verb, std::initializer_list<std::string_view> names);
    /// Takes r, a confirmation of `kind` or an error reply, for the oldest call owed one.
    /// Errors: EPROTO (it answers no call owed one: the subscriber is closed).
    result<void> settle(const reply& r, std::string_view kind);

    /// A call whose confirmations have not all come (one that gave up included).
    struct owed_call {
        uint64_t id;
        std::string_view verb;          // "SUBSCRIBE", ... (a literal)
        std::deque<std::string> names;  // whose confirmations are still to come, in order
        // An (P)UNSUBSCRIBE of every subscription: its names, in any order, are those the
        // server has once the calls before it are answered (known then); none: one
        // confirmation without a name.
        bool all = false;
        bool known = false;
        bool unnamed = false;
    };
    std::unique_ptr<connection> c_;
    std::deque<owed_call> owed_;  // in the order the server answers them
    uint64_t calls_ = 0;
    // What the server has confirmed as subscribed (for an unsubscribe of every one).
    std::set<std::string, std::less<>> channels_, patterns_;
    std::deque<message> early_;  // messages that arrived while waiting for a confirmation
    size_t early_bytes_ = 0;      // what they hold (see k_max_early_bytes)
};

}  // namespace gluon::redis
