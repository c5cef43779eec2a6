// A WebSocket connection's state, shared by the message loop (websocket.cc) and the opening
// handshakes (websocket_open.cc). Private to the http module.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gluon/http/websocket.h"
#include "gluon/net/byte_stream.h"
#include "gluon/sync/mutex.h"
#include "websocket_frame.h"
#include "websocket_utf8.h"

namespace gluon::http {

struct websocket::state {
    state(net::byte_stream& stream, bool server_side, const websocket_options& o);

    std::unique_ptr<net::byte_stream> owned;  // a client's transport
    net::byte_stream* s;
    bool server;
    websocket_options opts;
    std::string subprotocol;

    // Receive buffer: [rstart, rend) not yet decoded. Large payloads bypass it.
    static constexpr size_t k_buffer = 8 * 1024;
    std::unique_ptr<uint8_t[]> rbuf;
    size_t rcap = k_buffer;
    size_t rstart = 0, rend = 0;
    // The data frame being read, and the message being assembled (kept across a timeout).
    bool in_frame = false;
    ws::frame_head cur;
    uint64_t frame_done = 0;
    bool in_msg = false;
    uint8_t msg_op = 0;
    uint32_t frames = 0;
    std::string partial;
    ws::utf8_validator utf8;

    // Reading: one call at a time (recv() in two fibers, or close() beside a recv(), take
    // turns: two reads into rbuf would mix their bytes).
    mutex recv_mu;

    // Sending: one frame at a time, whoever sends it (a message, a pong from recv, a close).
    mutex send_mu;
    std::string sbuf;  // frames being written by the lock's holder, or held back
    // coalesce_sends kept frames in sbuf for a later write. Not sbuf's being non-empty: that is
    // also a send under way, which a reader must not wait for (it would wait for the peer to
    // read, and the peer may be waiting for us to read).
    bool held = false;
    // The last ping's payload while its pong waits for send_mu (RFC 6455 5.5.3: only the most
    // recent ping needs an answer).
    std::string pong;
    bool pong_due = false;
    // A fragmented message is being sent: only its continuations may be (RFC 6455 5.4).
    bool out_msg = false;

    bool close_sent = false, close_received = false, failed = false, ended = false;
    uint16_t peer_code = 0;
    std::string peer_reason;

    /// Appends bytes already read past the handshake.
    void preload(std::string_view bytes);
};

}  // namespace gluon::http
