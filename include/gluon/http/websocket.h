// WebSocket (RFC 6455) for fibers: a server upgrades any HTTP route with websocket::accept, a
// client opens ws:// and wss:// URLs with websocket::connect. The API is blocking and
// sequential: recv() returns whole messages (fragments are joined, text is checked to be UTF-8
// across fragments, pings are answered); send_text/send_binary send one message each; close()
// runs the closing handshake. One fiber may recv while another (on the same vCPU) sends or
// closes: close() then leaves the reading to the recv(), which takes the peer's close frame
// and returns ENODATA, and returns after it. recv() calls from two fibers take turns.
//
// A peer that breaks the protocol gets a close frame with the RFC's code and the connection is
// failed: 1002 for framing errors (an unmasked frame from a client or a masked one from a
// server, reserved bits or opcodes, a fragmented or oversized control frame, a continuation
// without a start), 1007 for text that is not UTF-8, 1009 for a message over
// max_message_bytes, 1008 for a message spread over more than max_frames_per_message frames.
// No extensions are negotiated (permessage-deflate is refused by not answering it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"

namespace gluon::net {
class byte_stream;
}
namespace gluon::net::tls {
class context;
}

namespace gluon::http {

class request;
class response;

/// Status codes of a close frame (RFC 6455 7.4.1).
namespace close_code {
inline constexpr uint16_t normal = 1000;
inline constexpr uint16_t going_away = 1001;
inline constexpr uint16_t protocol_error = 1002;
inline constexpr uint16_t unsupported_data = 1003;
inline constexpr uint16_t no_status = 1005;  // reported only: the close frame had no code
inline constexpr uint16_t abnormal = 1006;   // reported only: the connection ended without one
inline constexpr uint16_t invalid_data = 1007;
inline constexpr uint16_t policy_violation = 1008;
inline constexpr uint16_t too_big = 1009;
inline constexpr uint16_t internal_error = 1011;
}  // namespace close_code

struct websocket_options {
    uint64_t max_message_bytes = 16 << 20;  // a larger message: close 1009, EMSGSIZE
    /// Frames (fragments and the control frames between them) one message may take: bounds the
    /// work a flood of empty fragments costs. Over it: close 1008, EPROTO.
    uint32_t max_frames_per_message = 4096;
    duration send_timeout = std::chrono::seconds(30);   // each send, pong and close frame
    duration close_timeout = std::chrono::seconds(5);   // waiting for the peer's close frame
    /// For a fiber that alternates recv() and sends (an echo, request and response): a small
    /// message or pong sent while a whole received frame is already waiting is held back and
    /// written with the next ones once recv() would wait for input (or 64 KiB gather), so a
    /// burst of messages is answered with one write. A held send has succeeded without being
    /// written: call flush() before waiting on anything other than recv().
    bool coalesce_sends = false;
    /// Server: the subprotocols it speaks, preferred first (the first one the client offers is
    /// chosen; a request's Sec-WebSocket-Protocol fields count as one list). Client: the ones
    /// it offers (the server must choose one of them or none). Names match exactly, case
    /// included (RFC 7936).
    std::vector<std::string> subprotocols;

    // Client only.
    duration connect_timeout = std::chrono::seconds(10);  // resolution, TCP, TLS and handshake
    /// For wss:// URLs; nullptr: a default context verifying against the system's CAs.
    const net::tls::context* tls = nullptr;
    /// Extra request fields ("Origin", "Authorization", ...).
    std::vector<std::pair<std::string, std::string>> headers;
};

class websocket {
public:
    enum class kind : uint8_t { text = 1, binary = 2 };
    struct message {
        kind type = kind::binary;
        std::string data;
        bool is_text() const noexcept { return type == kind::text; }
    };

    /// Accepts the upgrade request `req` (GET, Upgrade: websocket, Connection: upgrade,
    /// Sec-WebSocket-Version: 13, a valid Sec-WebSocket-Key; the lines of the Upgrade or
    /// Connection field count as one list): answers 101 and returns the WebSocket over
    /// req.stream(), valid until the handler returns (which closes the connection). Errors:
    /// EPROTO if req is not a valid upgrade (res then holds the answer: 400, or 426 with the
    /// version spoken; return from the handler to send it); the stream's write errors.
    static result<websocket> accept(request& req, response& res,
                                    const websocket_options& opts = {});
    /// Connects to a ws:// or wss:// URL and runs the opening handshake. Errors: EINVAL (a
    /// malformed URL or another scheme), resolution and connect errors, TLS errors, ETIMEDOUT
    /// (connect_timeout), EPROTO (the server did not answer 101 with a valid handshake),
    /// ENODATA (it closed first), ECANCELED.
    static result<websocket> connect(std::string_view url, const websocket_options& opts = {});
    /// Runs one side (server_side: frames in must be masked) over a stream whose upgrade was
    /// handled elsewhere (`buffered`: bytes already read past the handshake). The stream must
    /// outlive the websocket and stays the caller's: the websocket shuts it down at most, never
    /// closes it. Errors: none (it only allocates).
    static result<websocket> over(net::byte_stream& s, bool server_side,
                                  std::string_view buffered = {}, const websocket_options& opts = {});

    websocket(websocket&&) noexcept;
    websocket& operator=(websocket&&) noexcept;
    ~websocket();

    /// Sends one text message (`text` must be UTF-8: not checked) or binary message. `timeout`
    /// (and send_timeout) bounds the whole call: the wait for another fiber's send and the
    /// write. Errors: EINVAL (a fragmented message is unfinished: messages may not be
    /// interleaved, RFC 6455 5.4), EPIPE (a close frame was sent or the connection failed),
    /// ETIMEDOUT (timeout, or send_timeout), ECANCELED, the stream's errors. A write that
    /// fails (ETIMEDOUT, ECANCELED or the stream's error: a frame may be half written) fails the
    /// connection and shuts it down: a recv() parked in another fiber returns, finding it gone
    /// (close_status() 1006).
    result<void> send_text(std::string_view text, duration timeout = forever);
    result<void> send_binary(std::string_view data, duration timeout = forever);
    /// Sends one frame of a fragmented message: the first with `first` true (its kind counts),
    /// the last with `fin` true. Control frames may go between fragments, no other message.
    /// Errors: those of send_text; EINVAL also for a fragment that is not `first` when no
    /// fragmented message is unfinished.
    result<void> send_fragment(kind type, std::string_view data, bool first, bool fin,
                               duration timeout = forever);
    /// Writes what coalesce_sends held back. Errors: those of send_text.
    result<void> flush(duration timeout = forever);
    /// Sends a ping (payload up to 125 bytes). Pongs are consumed by recv(). Errors: EINVAL (a
    /// payload over 125 bytes), those of send_text.
    result<void> ping(std::string_view payload = {}, duration timeout = forever);

    /// Receives the next whole message into `m` (its buffer is reused), answering pings on the
    /// way (a pong waits for another fiber's send within `timeout`; when that runs out first,
    /// the next recv() sends it). Errors: ENODATA (the connection closed: close_status() tells
    /// how; a close frame from the peer has been answered within `timeout` and send_timeout (a
    /// send that holds the connection past that ends with it: the connection is shut down under
    /// it), and a client has waited, up to close_timeout within what is left of `timeout`, for
    /// the server to end the connection first), EPROTO (the peer broke the
    /// protocol: the connection was failed with 1002 or 1008), EILSEQ (invalid UTF-8: 1007),
    /// EMSGSIZE (over max_message_bytes: 1009), ETIMEDOUT (nothing complete in time; a partial
    /// message is kept for the next call), ECANCELED, the stream's errors (the connection is
    /// then failed). Failing the connection (its close frame, then a moment of reading what
    /// the peer still sends, so that a reset does not destroy that frame) takes up to a second
    /// within what is left of `timeout`.
    result<void> recv(message& m, duration timeout = forever);
    /// As recv(m), into a new message. Errors: those of recv(m).
    result<message> recv(duration timeout = forever);

    /// Starts (or completes) the closing handshake: sends a close frame with `code` (0: none)
    /// and `reason` (UTF-8, up to 123 bytes), reads and discards messages until the peer's
    /// close frame arrives or `timeout` (default close_timeout) passes, then ends the
    /// connection (a client waits for the server to end it first, within the same `timeout`:
    /// it bounds the whole call, the close frame's send included, which send_timeout bounds
    /// too). While another fiber is in recv(), that recv() reads (two reads would share one
    /// buffer): close() waits for it to return, and at `timeout` shuts the connection down
    /// under it. Success means the closing handshake completed: the peer's close frame came
    /// (close_status() its code), now or before the call. Errors: EINVAL (a code that may not
    /// be sent, or a reason over 123 bytes), ETIMEDOUT (the peer did not answer; the
    /// connection is closed anyway), ECONNRESET (the connection ended without the peer's close
    /// frame, close_status() 1006: the peer ended TCP, or the connection had failed), EPROTO,
    /// EILSEQ, EMSGSIZE (a message read and discarded broke the protocol: the connection was
    /// failed as recv() fails it), ECANCELED, the stream's.
    result<void> close(uint16_t code = close_code::normal, std::string_view reason = {},
                       duration timeout = forever);

    /// The peer's close status once the connection ended: its code (1005 if its close frame had
    /// none, 1006 if it ended without a close frame), or 0 while open.
    uint16_t close_status() const noexcept;
    std::string_view close_reason() const noexcept;
    /// The subprotocol agreed on, or empty.
    std::string_view subprotocol() const noexcept;
    /// True until a close frame was sent or received or the connection failed.
    bool is_open() const noexcept;
    /// The transport, for addresses and options.
    net::byte_stream& stream() noexcept;

    struct state;

private:
    explicit websocket(std::unique_ptr<state> st) noexcept;
    std::unique_ptr<state> st_;
};

}  // namespace gluon::http
