// The native RPC end to end on every engine, over TCP: multiplexing, pipelining, zero-copy
// receive, schema checks, deadlines and cancellation on both sides, server limits, malformed
// frames, the name table and the connection pool.
#include "gluon/net/server.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "native_messages.h"
#include "rpc/native/conn.h"
#include "rpc/native/wire.h"
#include "test_support.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gluon::rpc::testing {
namespace {

using namespace std::chrono_literals;

std::string pattern(size_t n, uint64_t seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i)
        s[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
    return s;
}

// Reads one frame off s: its header, and its payload into body.
wire::header read_frame(net::stream& s, std::string& body) {
    uint8_t head[wire::k_header_size];
    EXPECT_TRUE(s.read_exactly(head, sizeof head, 10s));
    wire::header h = wire::get(head);
    body.assign(h.length, '\0');
    EXPECT_TRUE(s.read_exactly(body.data(), body.size(), 10s));
    return h;
}

// The bytes of a successful answer to the request `req`, carrying m.
template <typename M> std::vector<uint8_t> answer(const wire::header& req, const M& m) {
    std::vector<uint8_t> fixed(fixed_size<M>());
    iov_list var;
    size_t var_len = encode(m, fixed.data(), var);
    wire::header h;
    h.type = wire::kind::response;
    h.service = req.service;
    h.method = req.method;
    h.id = req.id;
    h.length = uint32_t(fixed.size() + var_len);
    std::vector<uint8_t> out(wire::k_header_size);
    wire::put(h, out.data());
    out.insert(out.end(), fixed.begin(), fixed.end());
    for (size_t k = 0; k < var.size(); ++k) {
        auto* p = static_cast<const uint8_t*>(var[k].iov_base);
        out.insert(out.end(), p, p + var[k].iov_len);
    }
    return out;
}

// Reads s until the end of the stream (true), within 10 s (false: still open then).
bool reaches_the_end(net::stream& s) {
    std::vector<uint8_t> sink(64 << 10);
    const deadline_t until = deadline_after(10s);
    for (;;) {
        auto n = s.read_some(sink.data(), sink.size(), time_left(until));
        if (!n) return false;
        if (*n == 0) return true;
    }
}

class rpc_native : public test::engine_test {
protected:
    void TearDown() override {
        net_.reset();
        srv_.reset();
        test::engine_test::TearDown();
    }

    // An RPC server with the test methods, on a fresh loopback port.
    void start(server_options o = {}) {
        srv_ = std::make_unique<server>(o);
        ASSERT_TRUE(srv_->add_service(1, "test"));
        ASSERT_TRUE(srv_->add(
            echo, [this](call_context&, const echo_msg& in, echo_msg& out) -> result<void> {
                ++echoed_;
                out.seq = in.seq;
                out.text = in.text;
                out.payload = bytes::view(in.payload.data(),
                                          in.payload.size()); // the request outlives the reply
                return {};
            }));
        ASSERT_TRUE(srv_->add(mirror, [](call_context&, const rich& in, rich& out) -> result<void> {
            out = in;
            return {};
        }));
        ASSERT_TRUE(srv_->add(
            block, [this](call_context& ctx, const sleep_req& in, empty&) -> result<void> {
                ++blocked_;
                entered_.release();
                auto r = this_fiber::sleep_for(std::chrono::milliseconds(in.millis));
                handler_saw_cancel_ = !r && r.error() == std::errc::operation_canceled;
                handler_saw_ctx_cancel_ = ctx.cancelled();
                left_.release();
                return r;
            }));
        ASSERT_TRUE(srv_->add(fail_eio, [](call_context&, const empty&, empty&) -> result<void> {
            return errno_error(EIO);
        }));
        ASSERT_TRUE(srv_->add(throws, [](call_context&, const empty&, empty&) -> result<void> {
            throw std::runtime_error("handler bug");
        }));
        auto s = net::server::start(net::address::ipv4_loopback(0), srv_->handler());
        ASSERT_TRUE(s) << s.error().message();
        net_ = std::move(*s);
    }
    // A client whose server is played by hand on server_end: for what no gluon server sends.
    client open_raw(net::stream& server_end, const client_options& o = {}) {
        auto pair = net::stream::pair();
        EXPECT_TRUE(pair);
        if (!pair) return {};
        server_end = std::move(pair->first);
        // Small socket buffers: a few MiB cannot sit in the kernel, whatever the machine's
        // defaults.
        EXPECT_TRUE(server_end.set_buffer_sizes(16 << 10, 16 << 10));
        EXPECT_TRUE(pair->second.set_buffer_sizes(16 << 10, 16 << 10));
        auto c = client::open(std::make_unique<net::stream>(std::move(pair->second)), o);
        EXPECT_TRUE(c);
        return c ? std::move(*c) : client{};
    }
    client connect(client_options o = {}) {
        auto c = client::connect(net_->local_address(), o, 5s);
        EXPECT_TRUE(c) << c.error().message();
        return c ? std::move(*c) : client{};
    }

    std::unique_ptr<server> srv_;
    std::unique_ptr<net::server> net_;
    counting_semaphore entered_{0}, left_{0};
    int blocked_ = 0, echoed_ = 0;
    bool handler_saw_cancel_ = false, handler_saw_ctx_cancel_ = false;
};

TEST_P(rpc_native, echo_round_trip) {
    start();
    client c = connect();
    echo_msg req, resp;
    req.seq = 42;
    req.text = "hello";
    std::string data = pattern(1000, 1);
    req.payload = bytes::view(data.data(), data.size());
    ASSERT_TRUE(c.call(echo, req, resp));
    EXPECT_EQ(resp.seq, 42u);
    EXPECT_EQ(resp.text, "hello");
    EXPECT_EQ(resp.payload.str(), data);

    rich r, back;
    r.flag = 3, r.on = true, r.at = {5, -6}, r.in.name = "n", r.in.values = {9, 8},
    r.path = {{1, 1}};
    ASSERT_TRUE(c.call(mirror, r, back));
    EXPECT_EQ(back.at.y, -6);
    EXPECT_EQ(back.in.values, r.in.values);
    EXPECT_EQ(back.path.size(), 1u);
}

TEST_P(rpc_native, many_fibers_share_one_connection_and_pipeline) {
    start();
    client c = connect();
    constexpr int k_fibers = 64, k_calls = 50;
    int bad = 0;
    std::vector<fiber> fs;
    for (int f = 0; f < k_fibers; ++f) {
        fs.push_back(*spawn([&, f] {
            for (int i = 0; i < k_calls; ++i) {
                echo_msg req, resp;
                req.seq = uint64_t(f) << 32 | unsigned(i);
                std::string data = pattern(size_t(17 * f + i), req.seq);
                req.text = std::to_string(f);
                req.payload = bytes::view(data.data(), data.size());
                if (!c.call(echo, req, resp) || resp.seq != req.seq || resp.payload.str() != data ||
                    resp.text != req.text)
                    ++bad;
            }
        }));
    }
    for (auto& f : fs)
        ASSERT_TRUE(f.join());
    EXPECT_EQ(bad, 0);
    auto st = c.stats();
    EXPECT_EQ(st.frames_sent, uint64_t(k_fibers * k_calls));
    EXPECT_LT(st.writes, st.frames_sent); // requests queued during a write left together
}

TEST_P(rpc_native, large_reply_lands_in_the_callers_buffer) {
    start();
    client c = connect();
    std::string data = pattern(8 << 20, 3);
    echo_msg req, resp;
    req.payload = bytes::view(data.data(), data.size());
    std::vector<uint8_t> buf(data.size());
    resp.payload.receive_into(buf.data(), buf.size());
    ASSERT_TRUE(c.call(echo, req, resp));
    EXPECT_EQ(resp.payload.data(), buf.data());
    ASSERT_EQ(resp.payload.size(), data.size());
    EXPECT_EQ(std::memcmp(buf.data(), data.data(), data.size()), 0);

    echo_msg small;
    small.payload.receive_into(buf.data(), 1000);
    auto r = c.call(echo, req, small);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::buffer_too_small);
    ASSERT_TRUE(c.call(echo, req, resp)); // the connection goes on
    EXPECT_EQ(resp.payload.size(), data.size());
}

TEST_P(rpc_native, a_frame_announcing_16_mib_holds_only_what_came) {
    // A peer sends a request header and fixed part that announce 16 MiB of text, then 100
    // bytes. The reader decoded the fixed part by sizing (and zero-filling) the text for all
    // 16 MiB at once: about 100 bytes pinned 16 MiB per connection. It grows as bytes come.
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    net::stream& peer = pair->second;
    std::vector<uint8_t> frame(wire::k_header_size + fixed_size<echo_msg>());
    wire::header h;
    h.service = echo.service;
    h.method = echo.id;
    h.schema = echo.schema();
    h.length = uint32_t(16 << 20);
    wire::put(h, frame.data());
    uint32_t text_len = h.length - uint32_t(fixed_size<echo_msg>());
    std::memcpy(frame.data() + wire::k_header_size + 8, &text_len, 4);
    frame.insert(frame.end(), 100, 'x');
    ASSERT_TRUE(peer.write_all(frame.data(), frame.size()));

    detail::frame_reader rd(pair->first, 64 << 10);
    auto head = rd.next_header();
    ASSERT_TRUE(head);
    ASSERT_FALSE(wire::check(*head, 16 << 20));
    auto fixed = rd.take(fixed_size<echo_msg>());
    ASSERT_TRUE(fixed);
    echo_msg m;
    rx_list targets;
    ASSERT_FALSE(decode_fixed(*fixed, head->length - fixed_size<echo_msg>(), m, targets));
    auto r = rd.fill(targets, deadline_after(100ms)); // the rest never comes
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_EQ(m.text, std::string(100, 'x'));
    EXPECT_LE(m.text.capacity(), size_t(64) << 10);
    EXPECT_EQ(rd.frame_left(), text_len - 100);
}

// The bytes of an echo request's header and fixed part announcing `text_len` bytes of text.
std::vector<uint8_t> echo_head(uint32_t text_len) {
    std::vector<uint8_t> frame(wire::k_header_size + fixed_size<echo_msg>());
    wire::header h;
    h.service = echo.service;
    h.method = echo.id;
    h.schema = echo.schema();
    h.id = 1;
    h.length = uint32_t(fixed_size<echo_msg>()) + text_len;
    wire::put(h, frame.data());
    std::memcpy(frame.data() + wire::k_header_size + 8, &text_len, 4);
    return frame;
}

TEST_P(rpc_native, a_frame_that_stops_coming_closes_its_connection_only) {
    // A request announcing 16 MiB whose bytes stop after a few, and a header cut short: each
    // held its reader fiber (and its buffer) for as long as the client kept the connection.
    // Past frame_timeout the connection is closed; an idle one, and a busy one, go on.
    start({.frame_timeout = 200ms});
    client good = connect();
    auto idle = net::stream::connect(net_->local_address(), 5s);
    ASSERT_TRUE(idle);

    auto stalled = net::stream::connect(net_->local_address(), 5s);
    ASSERT_TRUE(stalled);
    auto frame = echo_head(uint32_t(16 << 20) - uint32_t(fixed_size<echo_msg>()));
    frame.insert(frame.end(), 10, 'x');
    ASSERT_TRUE(stalled->write_all(frame.data(), frame.size()));

    auto cut = net::stream::connect(net_->local_address(), 5s);
    ASSERT_TRUE(cut);
    ASSERT_TRUE(cut->write_all(frame.data(), 5)); // 5 bytes of a 32-byte header

    echo_msg req, resp;
    req.text = "meanwhile";
    ASSERT_TRUE(good.call(echo, req, resp, {.timeout = 10s}));
    EXPECT_EQ(resp.text, "meanwhile");
    EXPECT_TRUE(reaches_the_end(*stalled)) << "a stalled frame kept its connection open";
    EXPECT_TRUE(reaches_the_end(*cut)) << "a cut header kept its connection open";

    // Both ends came after frame_timeout; the idle connection, older than both, is still
    // open (its read times out rather than ending) and still served.
    uint8_t b;
    auto n = idle->read_some(&b, 1, 50ms);
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
    auto ping = echo_head(0);
    ASSERT_TRUE(idle->write_all(ping.data(), ping.size()));
    std::string body;
    wire::header h = read_frame(*idle, body);
    EXPECT_EQ(h.type, wire::kind::response);
    EXPECT_EQ(h.schema, 0u);
    EXPECT_EQ(h.id, 1u);
    ASSERT_TRUE(good.call(echo, req, resp, {.timeout = 10s}));
}

TEST_P(rpc_native, serve_ends_with_etimedout_when_a_frame_trickles_past_frame_timeout) {
    // The frame's bytes keep coming, one now and then, but the whole frame takes longer than
    // frame_timeout: a deadline on each wait alone would never end it.
    server srv({.frame_timeout = 300ms});
    ASSERT_TRUE(srv.add(echo, [](call_context&, const echo_msg&, echo_msg&) -> result<void> {
        return {};
    }));
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    result<void> served;
    bool done = false;
    fiber f = *spawn([&] {
        served = srv.serve(pair->first);
        done = true;
    });
    auto frame = echo_head(1000);
    ASSERT_TRUE(pair->second.write_all(frame.data(), frame.size()));
    // A byte every 20 ms (the frame would take 20 s) until the server gives up.
    const deadline_t give_up = deadline_after(10s);
    while (!done && mono_now_ns() < give_up) {
        (void)pair->second.write_all("x", 1);
        (void)this_fiber::sleep_for(20ms); // the trickle's pace, not a wait for the server
    }
    EXPECT_TRUE(done) << "the trickled frame was still being waited for";
    if (!done) (void)f.interrupt();
    ASSERT_TRUE(f.join());
    ASSERT_FALSE(served);
    EXPECT_EQ(served.error(), std::errc::timed_out);
}

TEST_P(rpc_native, large_owned_values_grow_into_place_both_ways) {
    // Strings, owned bytes and vectors larger than the first piece grow as they arrive, on
    // the server (the request) and the client (the answer), split at any byte by small socket
    // buffers; every byte lands where it belongs.
    start();
    client c = connect();
    echo_msg req, resp;
    req.seq = 7;
    req.text = pattern((3 << 20) + 5, 1);
    std::string data = pattern((5 << 20) + 3, 2);
    req.payload = bytes::view(data.data(), data.size());
    ASSERT_TRUE(c.call(echo, req, resp, {.timeout = 30s}));
    EXPECT_EQ(resp.seq, 7u);
    EXPECT_TRUE(resp.text == req.text);
    EXPECT_TRUE(resp.payload.str() == data);

    rich r, back;
    r.in.values.resize((1 << 20) + 1);
    for (size_t i = 0; i < r.in.values.size(); ++i)
        r.in.values[i] = uint32_t(i * 2654435761u);
    r.path.resize(100'003);
    for (size_t i = 0; i < r.path.size(); ++i)
        r.path[i] = {int32_t(i), -int32_t(i)};
    r.second.name = pattern(70'000, 3);
    ASSERT_TRUE(c.call(mirror, r, back, {.timeout = 30s}));
    EXPECT_TRUE(back.in.values == r.in.values);
    ASSERT_EQ(back.path.size(), r.path.size());
    EXPECT_EQ(std::memcmp(back.path.data(), r.path.data(), r.path.size() * sizeof(point)), 0);
    EXPECT_TRUE(back.second.name == r.second.name);
}

TEST_P(rpc_native, mismatches_and_unknown_methods_get_clear_errors) {
    start();
    client c = connect();
    echo_msg_v2 a, b;
    auto r = c.call(echo_v2, a, b);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::schema_mismatch);
    empty e;
    r = c.call(nowhere, e, e);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::unknown_method);
    r = c.call(no_service, e, e);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::unknown_service);
    r = c.call(fail_eio, e, e);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::io_error);
    r = c.call(throws, e, e);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::handler_failed);
    EXPECT_TRUE(c.ping(5s));
}

TEST_P(rpc_native, name_table) {
    start();
    client c = connect();
    auto t = c.describe(5s);
    ASSERT_TRUE(t) << t.error().message();
    bool found = false;
    for (const auto& m : *t) {
        if (m.service == 1 && m.id == 1) {
            found = true;
            EXPECT_EQ(m.name, "echo");
            EXPECT_EQ(m.service_name, "test");
            EXPECT_EQ(m.schema, echo.schema());
        }
    }
    EXPECT_TRUE(found);
    EXPECT_EQ(t->size(), srv_->methods().size());
}

TEST_P(rpc_native, client_deadline_interrupts_the_handler) {
    start();
    client c = connect();
    sleep_req req{.millis = 60'000};
    empty resp;
    auto r = c.call(block, req, resp, {.timeout = 100ms});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::deadline_exceeded);
    ASSERT_TRUE(left_.acquire(10s)); // the handler's sleep ended early
    EXPECT_TRUE(handler_saw_cancel_);
    EXPECT_TRUE(handler_saw_ctx_cancel_);
    EXPECT_TRUE(c.ping(5s));
}

TEST_P(rpc_native, server_enforces_the_deadline_it_is_sent) {
    start();
    // A raw client that sends a 50 ms deadline and waits for the answer itself.
    auto s = net::stream::connect(net_->local_address(), 5s);
    ASSERT_TRUE(s);
    uint8_t frame[wire::k_header_size + 4];
    wire::header h;
    h.length = 4;
    h.service = block.service;
    h.method = block.id;
    h.schema = block.schema();
    h.id = 77;
    h.timeout_us = 50'000;
    wire::put(h, frame);
    uint32_t millis = 60'000;
    std::memcpy(frame + wire::k_header_size, &millis, 4);
    ASSERT_TRUE(s->write_all(frame, sizeof frame));
    uint8_t in[wire::k_header_size];
    ASSERT_TRUE(s->read_exactly(in, sizeof in, 10s));
    wire::header got = wire::get(in);
    EXPECT_EQ(got.id, 77u);
    EXPECT_EQ(got.type, wire::kind::response);
    EXPECT_EQ(wire::error_of_status(got.schema), errc::deadline_exceeded);
    EXPECT_TRUE(handler_saw_cancel_);
    EXPECT_EQ(srv_->stats().expired, 1u);
}

TEST_P(rpc_native, cancelling_the_caller_interrupts_the_handler) {
    start();
    client c = connect();
    result<void> r;
    fiber caller = *spawn([&] {
        sleep_req req{.millis = 60'000};
        empty resp;
        r = c.call(block, req, resp);
    });
    ASSERT_TRUE(entered_.acquire(10s)); // the handler runs
    ASSERT_TRUE(caller.interrupt());
    ASSERT_TRUE(caller.join());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::cancelled);
    ASSERT_TRUE(left_.acquire(10s));
    EXPECT_TRUE(handler_saw_cancel_);
    EXPECT_EQ(srv_->stats().cancelled, 1u);
    EXPECT_TRUE(c.ping(5s));
}

TEST_P(rpc_native, frame_limit_refuses_the_call_not_the_connection) {
    start({.max_frame_bytes = 4096});
    client c = connect();
    std::string big(10000, 'b');
    echo_msg req, resp;
    req.payload = bytes::view(big.data(), big.size());
    auto r = c.call(echo, req, resp);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::frame_too_large);
    req.payload = bytes::view(big.data(), 100);
    ASSERT_TRUE(c.call(echo, req, resp));
    EXPECT_EQ(resp.payload.size(), 100u);

    // The client's own limit, on a reply.
    client small = connect({.max_frame_bytes = 64});
    r = small.call(echo, req, resp);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::frame_too_large);
    EXPECT_TRUE(small.ping(5s));
}

TEST_P(rpc_native, in_flight_limit) {
    start({.max_in_flight = 2});
    client c = connect();
    std::vector<result<void>> rs(2);
    std::vector<fiber> fs;
    for (int i = 0; i < 2; ++i) {
        fs.push_back(*spawn([&, i] {
            sleep_req req{.millis = 200};
            empty resp;
            rs[i] = c.call(block, req, resp);
        }));
    }
    ASSERT_TRUE(entered_.acquire(10s));
    ASSERT_TRUE(entered_.acquire(10s));
    empty e;
    auto r = c.call(fail_eio, e, e);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::too_many_requests);
    for (auto& f : fs)
        ASSERT_TRUE(f.join());
    EXPECT_TRUE(rs[0]);
    EXPECT_TRUE(rs[1]);
    EXPECT_TRUE(c.ping(5s));
}

TEST_P(rpc_native, a_client_that_reads_no_answers_is_no_longer_read) {
    // A raw client pipelines echo requests and never reads an answer. Once the kernel holds
    // what it can of the answers, max_in_flight of them wait in the server; then the server
    // stops reading that connection (the client's sends block) instead of taking its requests
    // and queueing their answers without bound, and serves other clients meanwhile.
    start({.max_in_flight = 4});
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto& [server_end, client_end] = *pair;
    // Small socket buffers: the kernel holds tens of answers, whatever the machine's defaults.
    ASSERT_TRUE(server_end.set_buffer_sizes(16 << 10, 16 << 10));
    ASSERT_TRUE(client_end.set_buffer_sizes(16 << 10, 16 << 10));

    constexpr uint64_t k_requests = 20000;
    std::string data = pattern(100, 9);
    std::vector<uint8_t> frames;
    for (uint64_t i = 0; i < k_requests; ++i) {
        echo_msg req;
        req.seq = i;
        req.payload = bytes::view(data.data(), data.size());
        std::vector<uint8_t> fixed(fixed_size<echo_msg>());
        iov_list var;
        size_t var_len = encode(req, fixed.data(), var);
        wire::header h;
        h.length = uint32_t(fixed.size() + var_len);
        h.service = echo.service;
        h.method = echo.id;
        h.schema = echo.schema();
        h.id = i + 1;
        uint8_t head[wire::k_header_size];
        wire::put(h, head);
        frames.insert(frames.end(), head, head + sizeof head);
        frames.insert(frames.end(), fixed.begin(), fixed.end());
        for (size_t k = 0; k < var.size(); ++k) {
            auto* p = static_cast<const uint8_t*>(var[k].iov_base);
            frames.insert(frames.end(), p, p + var[k].iov_len);
        }
    }
    fiber served = *spawn([&] { (void)srv_->serve(server_end); });
    bool all_sent = false;
    fiber sender =
        *spawn([&] { all_sent = bool(client_end.write_all(frames.data(), frames.size())); });

    // Requests the server took: run, or refused as over max_in_flight (each is answered).
    auto taken = [&] { return uint64_t(echoed_) + srv_->stats().refused; };
    // Either the server stops reading, or it takes every request (answers without bound).
    deadline_t until = deadline_after(10s);
    while (srv_->stats().throttled == 0 && taken() < k_requests && mono_now_ns() < until)
        (void)this_fiber::sleep_for(1ms);
    EXPECT_GE(srv_->stats().throttled, 1u);

    client other = connect();
    echo_msg req, resp;
    req.text = "other";
    ASSERT_TRUE(other.call(echo, req, resp, {.timeout = 5s}));
    EXPECT_EQ(resp.text, "other");

    // Taken: the answers the kernel holds (at most ~48 KiB of them, a refusal is 32 bytes),
    // the waiting ones and the calls still running; the rest were never read.
    EXPECT_LT(taken(), k_requests / 4);
    EXPECT_FALSE(all_sent);
    (void)sender.interrupt();
    ASSERT_TRUE(sender.join());
    (void)served.interrupt();
    ASSERT_TRUE(served.join());
}

TEST_P(rpc_native, malformed_frame_closes_only_its_connection) {
    start();
    client good = connect();
    auto raw = net::stream::connect(net_->local_address(), 5s);
    ASSERT_TRUE(raw);
    uint8_t junk[wire::k_header_size];
    std::memset(junk, 0xab, sizeof junk);
    ASSERT_TRUE(raw->write_all(junk, sizeof junk));
    uint8_t b;
    auto n = raw->read_some(&b, 1, 10s); // the server hangs up: EOF (or a reset)
    EXPECT_TRUE(!n || *n == 0);
    EXPECT_EQ(srv_->stats().malformed, 1u);
    echo_msg req, resp;
    req.text = "still here";
    ASSERT_TRUE(good.call(echo, req, resp));
    EXPECT_EQ(resp.text, "still here");
}

TEST_P(rpc_native, a_connection_that_ends_closes_its_socket) {
    // A frame no server sends (a request) ends the connection; its socket was kept open until
    // the last handle went, so the server saw no end and the fd stayed taken.
    net::stream srv;
    client c = open_raw(srv);
    wire::header h; // kind::request
    uint8_t head[wire::k_header_size];
    wire::put(h, head);
    ASSERT_TRUE(srv.write_all(head, sizeof head));
    EXPECT_TRUE(reaches_the_end(srv)) << "the ended connection kept its socket open";
    EXPECT_FALSE(c.healthy());
    EXPECT_TRUE(c.close()); // closing it again is harmless
}

TEST_P(rpc_native, closed_connection_fails_calls_in_flight) {
    start();
    client c = connect();
    result<void> r;
    fiber caller = *spawn([&] {
        sleep_req req{.millis = 60'000};
        empty resp;
        r = c.call(block, req, resp);
    });
    ASSERT_TRUE(entered_.acquire(10s));
    net_->stop(0s); // the server goes: its connections end
    ASSERT_TRUE(caller.join());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::connection_closed);
    EXPECT_FALSE(c.healthy());
    empty e;
    EXPECT_EQ(c.call(fail_eio, e, e).error(), errc::connection_closed);
}

TEST_P(rpc_native, an_errno_status_without_an_errno_is_still_an_error) {
    // 0x10000 | errno with no errno in it: read as the error_code 0, it made the call succeed
    // with a response the server never sent.
    EXPECT_EQ(wire::error_of_status(0x10000), errc::handler_failed);
    net::stream srv;
    client c = open_raw(srv);
    result<void> r;
    fiber caller = *spawn([&] {
        empty e;
        r = c.call(fail_eio, e, e, {.timeout = 10s});
    });
    std::string body;
    wire::header req = read_frame(srv, body);
    wire::header h;
    h.type = wire::kind::response;
    h.service = req.service;
    h.method = req.method;
    h.id = req.id;
    h.schema = 0x10000;
    uint8_t head[wire::k_header_size];
    wire::put(h, head);
    ASSERT_TRUE(srv.write_all(head, sizeof head));
    ASSERT_TRUE(caller.join());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::handler_failed);
}

TEST_P(rpc_native, a_call_whose_request_the_server_does_not_read_still_ends) {
    // The server does not read, so a 4 MiB request cannot leave, and the writer writes it from
    // the caller's memory. Its caller still gets deadline_exceeded at its deadline, or cancelled
    // when interrupted, with its memory its own again: the rest of the frame goes out from a
    // copy, then the cancel, and the connection goes on once the server reads.
    for (bool interrupt : {false, true}) {
        SCOPED_TRACE(interrupt ? "interrupted" : "deadline");
        net::stream srv;
        client c = open_raw(srv);
        std::string data = pattern(4 << 20, 5);
        const std::string sent = data;
        result<void> r;
        fiber caller = *spawn([&] {
            echo_msg req, resp;
            req.payload = bytes::view(data.data(), data.size());
            r = c.call(echo, req, resp, {.timeout = interrupt ? duration(forever) : 100ms});
        });
        if (interrupt) {
            // Once the writer has taken the request (it is writing it and stays blocked).
            deadline_t until = deadline_after(10s);
            while (c.stats().frames_sent == 0 && mono_now_ns() < until)
                (void)this_fiber::sleep_for(1ms);
            ASSERT_TRUE(caller.interrupt());
        }
        bool in_time = bool(caller.join_for(10s));
        if (!in_time) {
            (void)srv.close(); // the write fails: the caller returns
            (void)caller.join();
        }
        ASSERT_TRUE(in_time) << "the call was still waiting 10 s later";
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), interrupt ? errc::cancelled : errc::deadline_exceeded);

        std::fill(data.begin(), data.end(), 'z'); // the caller's memory, no longer the frame's
        std::string body;
        wire::header h = read_frame(srv, body);
        EXPECT_EQ(h.type, wire::kind::request);
        ASSERT_GE(body.size(), sent.size());
        EXPECT_TRUE(body.compare(body.size() - sent.size(), sent.size(), sent) == 0);
        wire::header cancel = read_frame(srv, body);
        EXPECT_EQ(cancel.type, wire::kind::cancel);
        EXPECT_EQ(cancel.id, h.id);

        result<void> pinged;
        fiber pinger = *spawn([&] { pinged = c.ping(10s); });
        wire::header ping = read_frame(srv, body);
        auto out = answer(ping, empty{});
        ASSERT_TRUE(srv.write_all(out.data(), out.size()));
        ASSERT_TRUE(pinger.join());
        EXPECT_TRUE(pinged);
    }
}

TEST_P(rpc_native, cancels_a_server_does_not_read_are_bounded) {
    // Five calls whose requests the server has, then a 4 MiB request it does not read: the
    // writer stays blocked on it, and the cancels of the five calls, interrupted, wait behind
    // it. The fifth is one over the limit: the connection ends, and with it the blocked call.
    net::stream srv;
    client c = open_raw(srv, {.max_queued_cancels = 4});
    constexpr int k = 5;
    std::vector<result<void>> rs(k);
    std::vector<fiber> callers;
    for (int i = 0; i < k; ++i)
        callers.push_back(*spawn([&, i] {
            echo_msg req, resp;
            rs[i] = c.call(echo, req, resp);
        }));
    std::string body;
    for (int i = 0; i < k; ++i)
        EXPECT_EQ(read_frame(srv, body).type, wire::kind::request); // written: cancels follow
    std::string data = pattern(4 << 20, 7);
    result<void> big;
    fiber blocked = *spawn([&] {
        echo_msg req, resp;
        req.payload = bytes::view(data.data(), data.size());
        big = c.call(echo, req, resp);
    });
    // Once the writer has taken the large request (it is writing it and stays blocked).
    deadline_t until = deadline_after(10s);
    while (c.stats().frames_sent < k + 1 && mono_now_ns() < until)
        ASSERT_TRUE(this_fiber::sleep_for(1ms));
    ASSERT_EQ(c.stats().frames_sent, uint64_t(k + 1));
    for (int i = 0; i < k; ++i) {
        ASSERT_TRUE(callers[i].interrupt());
        ASSERT_TRUE(callers[i].join());
        ASSERT_FALSE(rs[i]);
        EXPECT_EQ(rs[i].error(), errc::cancelled);
    }
    bool in_time = bool(blocked.join_for(10s));
    if (!in_time) {
        (void)srv.close(); // the write fails: the call returns
        (void)blocked.join();
    }
    ASSERT_TRUE(in_time) << "the cancels were still queued 10 s later";
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error(), errc::connection_closed);
    EXPECT_FALSE(c.healthy());
    EXPECT_EQ(c.in_flight(), 0u);
    empty req, resp;
    auto after = c.call(builtin::ping, req, resp);
    ASSERT_FALSE(after);
    EXPECT_EQ(after.error(), errc::connection_closed);
    // The socket went with the connection, though c is still held: the server's end reads what
    // was written of the large request, then the end of the stream.
    EXPECT_TRUE(reaches_the_end(srv)) << "the ended connection kept its socket open";
}

TEST_P(rpc_native, a_deadline_bounds_a_call_whose_answer_stops_halfway) {
    // The server sends the head and 100 bytes of a 1 MiB answer, then nothing: the reader is
    // reading it into the caller's buffer. The caller still gets deadline_exceeded at its
    // deadline; the reader skips the rest of that answer when it comes, and the connection
    // goes on.
    net::stream srv;
    client c = open_raw(srv);
    result<void> r;
    fiber caller = *spawn([&] {
        echo_msg req, resp;
        r = c.call(echo, req, resp, {.timeout = 100ms});
    });
    std::string body;
    wire::header h = read_frame(srv, body);
    std::string data = pattern(1 << 20, 6);
    echo_msg m;
    m.payload = bytes::view(data.data(), data.size());
    auto out = answer(h, m);
    const size_t cut = wire::k_header_size + fixed_size<echo_msg>() + 100;
    ASSERT_TRUE(srv.write_all(out.data(), cut));
    bool in_time = bool(caller.join_for(10s));
    if (!in_time) {
        (void)srv.close(); // the read fails: the caller returns
        (void)caller.join();
    }
    ASSERT_TRUE(in_time) << "the call was still waiting 10 s later";
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), errc::deadline_exceeded);

    ASSERT_TRUE(srv.write_all(out.data() + cut, out.size() - cut, 10s));
    result<void> pinged;
    fiber pinger = *spawn([&] { pinged = c.ping(10s); });
    wire::header ping = read_frame(srv, body);
    auto pong = answer(ping, empty{});
    ASSERT_TRUE(srv.write_all(pong.data(), pong.size()));
    ASSERT_TRUE(pinger.join());
    EXPECT_TRUE(pinged);
}

TEST_P(rpc_native, pool_replaces_broken_and_silent_connections) {
    start();
    // A listener that accepts and never answers: its connections fail their health checks.
    auto silent = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(silent);
    auto silent_addr = silent->local_address();
    std::vector<net::stream> held;
    fiber acceptor = *spawn([&] {
        while (auto s = silent->accept())
            held.push_back(std::move(*s));
    });
    bool use_silent = true;
    auto connector = [&]() -> result<std::unique_ptr<net::byte_stream>> {
        auto s =
            GLUON_TRY(net::stream::connect(use_silent ? *silent_addr : net_->local_address(), 5s));
        return std::unique_ptr<net::byte_stream>(std::make_unique<net::stream>(std::move(s)));
    };
    auto p =
        pool::start(connector, {.connections = 2, .health_interval = 20ms, .health_timeout = 50ms});
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ((*p)->healthy(), 2u); // open, not yet checked
    use_silent = false;
    // The checks find the silent connections and replace them with good ones.
    deadline_t until = deadline_after(10s);
    while ((*p)->replaced() < 2 && mono_now_ns() < until)
        (void)this_fiber::sleep_for(10ms);
    EXPECT_GE((*p)->replaced(), 2u);
    echo_msg req, resp;
    req.text = "pooled";
    for (int i = 0; i < 4; ++i) {
        ASSERT_TRUE((*p)->call(echo, req, resp, {.timeout = 5s}));
        EXPECT_EQ(resp.text, "pooled");
    }
    (*p)->stop();
    (void)silent->close();
    (void)acceptor.interrupt();
    (void)acceptor.join();
}

TEST_P(rpc_native, a_pool_stopped_by_an_interrupted_fiber_still_waits_for_its_checks) {
    // fini interrupts every fiber again and again, so the one that stops a pool may have an
    // interrupt pending: the stop must still wait for the health checks, which use the pool
    // (its connector, its connections) and would otherwise run on into a freed pool.
    std::vector<net::stream> peers;
    int connects = 0;
    bool in_connect = false;
    counting_semaphore never{0};
    auto connector = [&]() -> result<std::unique_ptr<net::byte_stream>> {
        if (connects++ > 0) { // the checks' reconnect: slow
            in_connect = true;
            (void)never.acquire(10s);
            in_connect = false;
            return errno_error(ECONNREFUSED);
        }
        auto pair = GLUON_TRY(net::stream::pair());
        peers.push_back(std::move(pair.first));
        return std::unique_ptr<net::byte_stream>(
            std::make_unique<net::stream>(std::move(pair.second)));
    };
    auto p =
        pool::start(connector, {.connections = 1, .health_interval = 1ms, .health_timeout = 10s});
    ASSERT_TRUE(p) << p.error().message();
    peers.clear(); // the server goes: the connection breaks and the checks reconnect
    deadline_t until = deadline_after(10s);
    while (!in_connect && mono_now_ns() < until)
        (void)this_fiber::sleep_for(1ms);
    ASSERT_TRUE(in_connect);
    bool checks_ran_on = true, interrupt_kept = false;
    fiber stopper = *spawn([&] {
        restore_interrupt(); // an interrupt arrived
        (*p)->stop();
        checks_ran_on = in_connect;
        interrupt_kept = take_interrupt() == -ECANCELED;
    });
    ASSERT_TRUE(stopper.join());
    EXPECT_FALSE(checks_ran_on);
    EXPECT_TRUE(interrupt_kept); // for the stopping fiber's next blocking call
    until = deadline_after(10s);
    while (in_connect && mono_now_ns() < until) // let a check that ran on end before p goes
        (void)this_fiber::sleep_for(1ms);
}

TEST_P(rpc_native, calls_that_time_out_or_are_cancelled_at_any_point_leave_the_rest_intact) {
    // Deadlines and interrupts that land while a request is queued, being written, waiting or
    // having its (large) response decoded; every call either succeeds with its own bytes or
    // fails with its deadline or cancellation, and the connection serves on.
    start();
    client c = connect();
    constexpr int k_fibers = 32, k_calls = 60;
    int bad = 0, ok = 0, timed_out = 0, cancelled = 0;
    std::vector<fiber> fs;
    for (int f = 0; f < k_fibers; ++f) {
        fs.push_back(*spawn([&, f] {
            uint64_t rnd = 0x9e3779b97f4a7c15ull * uint64_t(f + 1);
            for (int i = 0; i < k_calls; ++i) {
                rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
                size_t size = (rnd & 1) ? (rnd >> 8) % (256 << 10) : (rnd >> 8) % 200;
                std::string data = pattern(size, rnd);
                echo_msg req, resp;
                req.seq = rnd;
                req.payload = bytes::view(data.data(), data.size());
                // Most deadlines are shorter than a call takes here (a few ms with 32 callers
                // moving up to 256 KiB each); one call in four has time to finish.
                auto timeout = (rnd >> 40) % 4 == 0
                                   ? duration(5s)
                                   : duration(std::chrono::microseconds(20 + (rnd >> 20) % 3000));
                auto r = c.call(echo, req, resp, {.timeout = timeout});
                if (r) {
                    ++ok;
                    if (resp.seq != req.seq || resp.payload.str() != data) ++bad;
                } else if (r.error() == errc::deadline_exceeded) {
                    ++timed_out;
                } else if (r.error() == errc::cancelled) {
                    ++cancelled;
                } else {
                    ++bad;
                }
            }
        }));
    }
    // Interrupt callers now and then while they run.
    for (int round = 0; round < 40; ++round) {
        (void)this_fiber::sleep_for(200us);
        (void)fs[size_t(round) % fs.size()].interrupt();
    }
    for (auto& f : fs)
        ASSERT_TRUE(f.join());
    EXPECT_EQ(bad, 0) << ok << " ok, " << timed_out << " timed out, " << cancelled << " cancelled";
    EXPECT_EQ(ok + timed_out + cancelled, k_fibers * k_calls);
    EXPECT_GT(ok, 0);
    EXPECT_EQ(c.in_flight(), 0u);
    echo_msg req, resp;
    req.text = "after";
    ASSERT_TRUE(c.call(echo, req, resp, {.timeout = 5s}));
    EXPECT_EQ(resp.text, "after");
}

GLUON_ENGINE_TEST_SUITE(rpc_native);

} // namespace
} // namespace gluon::rpc::testing
