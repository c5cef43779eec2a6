// gluon's gRPC server called by gRPC C++ (tests/rpc/grpc_cpp_peer.cc): every call kind,
// metadata, an error status with a message to percent-encode, a deadline that expires and a
// call cancelled by the client, on every engine. Then, called by gluon's client, the status the
// typed helpers answer when a request cannot be read.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gluon/http/client.h"
#include "gluon/http/server.h"
#include "gluon/net/socket.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "echo_service.h"
#include "net/tls_test_support.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::rpc::grpc {
namespace {

using namespace std::chrono_literals;

class grpc_server_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }
    void start() {
        testing::add_echo_service(g_, slow_);
        auto s = http::server::start(net::address::ipv4_loopback(0), g_.as_handler());
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    server g_;
    std::unique_ptr<http::server> srv_;
    testing::slow_counts slow_;
};

TEST_P(grpc_server_test, grpc_cpp_client_calls_every_kind) {
    start();
    std::string dir = net::tls_testing::certs().dir;
    std::string out = dir + "/grpc-client-" + engine::kind_name(GetParam());
    test::child c({GLUON_GRPC_PEER, "client", "127.0.0.1:" + std::to_string(srv_->local_address().port())},
                  "/dev/null", out);
    ASSERT_TRUE(c.started());
    EXPECT_EQ(c.wait(60s), 0) << net::tls_testing::read_file(out) << net::tls_testing::read_file(out + ".err");
    EXPECT_EQ(net::tls_testing::read_file(out), "");
    // The deadline reached the server as grpc-timeout, and the cancelled call's handler saw
    // the cancellation. The client may have exited before those handlers ran: wait for them.
    slow_.await(2);
    EXPECT_EQ(slow_.expired, 1);
    EXPECT_EQ(slow_.cancelled, 1);
}

/// Bytes as a message type of the typed helpers (the protobuf-style calls they make).
struct raw {
    std::string s;
    bool ParseFromArray(const void* p, int n) {
        s.assign(static_cast<const char*>(p), static_cast<size_t>(n));
        return true;
    }
    size_t ByteSizeLong() const { return s.size(); }
    bool SerializeToArray(void* p, int n) const {
        std::memcpy(p, s.data(), static_cast<size_t>(n));
        return true;
    }
};

/// Echo methods of every helper kind, by name.
std::vector<std::pair<std::string, method_handler>> small_echo_methods() {
    std::vector<std::pair<std::string, method_handler>> m;
    m.emplace_back("/t.S/Unary", unary<raw, raw>([](server_context&, const raw& a, raw& b) {
                       b = a;
                       return status{};
                   }));
    m.emplace_back("/t.S/ServerStream", server_streaming<raw, raw>([](server_context&, const raw& a,
                                                                      const std::function<bool(const raw&)>& send) {
                       return send(a) ? status{} : status{code::unavailable, "send failed"};
                   }));
    // Answers OK with what it read: a request it could not read must still fail the call.
    m.emplace_back("/t.S/ClientStream", streaming<raw, raw>([](server_context&, const std::function<bool(raw&)>& next,
                                                               const std::function<bool(const raw&)>& send) {
                       raw one, all;
                       while (next(one)) all.s += one.s;
                       return send(all) ? status{} : status{code::unavailable, "send failed"};
                   }));
    return m;
}

/// Echo methods of every helper kind on a server that takes messages of at most 16 bytes.
void add_small_echo(server& g) {
    for (auto& [name, h] : small_echo_methods()) g.add(name, std::move(h));
}

TEST_P(grpc_server_test, typed_helpers_answer_why_a_request_could_not_be_read) {
    server g({.max_message_bytes = 16});
    add_small_echo(g);
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    std::string out;
    const std::string big(100, 'y');
    for (const char* m : {"/t.S/Unary", "/t.S/ServerStream", "/t.S/ClientStream"}) {
        status s = ch.unary(m, big, out);
        EXPECT_EQ(s.code, code::resource_exhausted) << m << ": " << code_name(s.code) << " " << s.message;
        s = ch.unary(m, "small", out);
        EXPECT_TRUE(s.ok()) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_EQ(out, "small");
    }
    {
        // Past a first message that was read: the handler saw an end, the client must not.
        client_call c = ch.call("/t.S/ClientStream");
        EXPECT_TRUE(c.write("small"));
        (void)c.write(big);  // the answer may have closed the stream already
        (void)c.writes_done();
        status s = c.finish();  // after what the handler sent of its own
        EXPECT_EQ(s.code, code::resource_exhausted) << code_name(s.code) << " " << s.message;
    }
    {
        // A cancel is the client's, not the server's fault: the handler's status says so.
        server g2;
        method_handler h = unary<raw, raw>([](server_context&, const raw&, raw&) { return status{}; });
        std::optional<status> seen;
        g2.add("/t.S/Watched", [&](server_context& ctx) {
            status s = h(ctx);
            seen = s;
            return s;
        });
        auto srv2 = http::server::start(net::address::ipv4_loopback(0), g2.as_handler());
        ASSERT_TRUE(srv2) << srv2.error().message();
        channel ch2("127.0.0.1", (*srv2)->local_address().port());
        client_call c = ch2.call("/t.S/Watched");  // a head, then no message: the handler waits
        ASSERT_TRUE(this_fiber::sleep_for(100ms));
        c.cancel();
        EXPECT_EQ(c.finish().code, code::cancelled);
        for (int i = 0; i < 500 && !seen; ++i) ASSERT_TRUE(this_fiber::sleep_for(10ms));
        ASSERT_TRUE(seen.has_value());
        EXPECT_EQ(seen->code, code::cancelled) << code_name(seen->code) << " " << seen->message;
    }
}

/// A request body of one message: its flag byte, the length it claims, and the bytes given.
std::string framed(uint8_t flag, std::string_view msg, uint32_t claimed) {
    std::string out(1, static_cast<char>(flag));
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>(claimed >> shift & 0xff);
    out += msg;
    return out;
}

TEST_P(grpc_server_test, compressed_requests_are_unimplemented_and_bad_framing_internal) {
    // Raw HTTP/2 requests (gluon's client neither compresses nor breaks the framing). A typed
    // helper that cannot read its request ends the call with the reason's status, seen here by
    // wrapping each; a request that names an encoding other than identity is refused before
    // its handler runs. Compression is answered with the encodings taken.
    server g;
    std::optional<status> seen;
    for (auto& [name, h] : small_echo_methods()) {
        g.add(name, [h = std::move(h), &seen](server_context& ctx) {
            status s = h(ctx);
            seen = s;
            return s;
        });
    }
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    http::client_options co;
    co.http2_prior_knowledge = true;
    http::client hc(co);
    const std::string origin = "http://127.0.0.1:" + std::to_string((*srv)->local_address().port());
    auto post = [&](const std::string& method, std::string body, std::string_view encoding) {
        seen.reset();
        http::client_request rq;
        rq.method = http::method::post;
        rq.url = origin + method;
        rq.headers = {{"content-type", "application/grpc"}, {"te", "trailers"}};
        if (!encoding.empty()) rq.headers.emplace_back("grpc-encoding", std::string(encoding));
        rq.body = std::move(body);
        rq.timeout = 10s;
        return hc.send(rq);
    };
    struct probe {
        const char* what;
        std::string body;
        const char* encoding;
        code want;
    };
    const probe read_by_the_handler[] = {
        {"compressed flag", framed(1, "abc", 3), "", code::unimplemented},
        {"compressed flag, identity", framed(1, "abc", 3), "identity", code::unimplemented},
        {"flag 2", framed(2, "abc", 3), "", code::internal},
        {"cut short", framed(0, "abc", 10), "", code::internal},
        {"plain", framed(0, "abc", 3), "identity", code::ok},
    };
    const probe refused_first[] = {
        {"gzip, compressed flag", framed(1, "abc", 3), "gzip", code::unimplemented},
        {"gzip, plain message", framed(0, "abc", 3), "gzip", code::unimplemented},
    };
    for (const auto& [method, h] : small_echo_methods()) {
        for (const probe& p : read_by_the_handler) {
            auto r = post(method, p.body, p.encoding);
            ASSERT_TRUE(r) << method << " " << p.what << ": " << r.error().message();
            EXPECT_EQ(r->status, 200) << method << " " << p.what;
            ASSERT_TRUE(seen.has_value()) << method << " " << p.what;
            EXPECT_EQ(seen->code, p.want) << method << " " << p.what << ": " << code_name(seen->code) << " "
                                          << seen->message;
            // The status is in the head when no message was written (it is otherwise in the
            // trailers, which this client does not show).
            if (std::string_view st = r->header("grpc-status"); !st.empty()) {
                EXPECT_EQ(st, std::to_string(static_cast<int>(p.want))) << method << " " << p.what;
            }
            if (p.want == code::unimplemented) {
                EXPECT_EQ(r->header("grpc-accept-encoding"), "identity") << method << " " << p.what;
            }
        }
        for (const probe& p : refused_first) {
            auto r = post(method, p.body, p.encoding);
            ASSERT_TRUE(r) << method << " " << p.what << ": " << r.error().message();
            EXPECT_EQ(r->status, 200) << method << " " << p.what;
            EXPECT_FALSE(seen.has_value()) << method << " " << p.what << ": the handler ran";
            EXPECT_EQ(r->header("grpc-status"), std::to_string(static_cast<int>(p.want))) << method << " " << p.what;
            EXPECT_EQ(r->header("grpc-accept-encoding"), "identity") << method << " " << p.what;
        }
    }
}

TEST_P(grpc_server_test, a_calls_messages_are_limited_one_by_one_not_as_a_whole) {
    // The HTTP server's max_body_bytes (1 MiB by default) capped a call's whole request: a
    // client stream of small messages, or one message of 2 MiB, ended with 413 (UNKNOWN to the
    // client), and a message over max_message_bytes that came after 1 MiB of others did too,
    // instead of RESOURCE_EXHAUSTED.
    server g({.max_message_bytes = 3 << 20});
    add_small_echo(g);
    // Reads every message and answers how many came; a failed read ends the call with its
    // reason, before any message was written (a trailers-only answer).
    g.add("/t.S/Count", [](server_context& ctx) -> status {
        std::string_view m;
        size_t n = 0;
        for (;;) {
            auto got = ctx.read(m);
            if (!got) return detail::no_request(got);
            if (!*got) break;
            ++n;
        }
        return ctx.write(std::to_string(n)) ? status{} : status{code::unavailable, "write failed"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    const std::string kib(1024, 'k');
    {
        client_call c = ch.call("/t.S/ClientStream");
        for (int i = 0; i < 2000; ++i) ASSERT_TRUE(c.write(kib)) << i << ": " << code_name(c.finish().code);
        ASSERT_TRUE(c.writes_done());
        std::string out;
        EXPECT_TRUE(c.read(out));
        status s = c.finish();
        EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
        EXPECT_EQ(out.size(), 2000u * 1024);
    }
    {
        const std::string two_mib(2 << 20, 'm');
        std::string out;
        status s = ch.unary("/t.S/Unary", two_mib, out);
        EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
        EXPECT_TRUE(out == two_mib) << out.size();
    }
    {
        client_call c = ch.call("/t.S/Count");
        for (int i = 0; i < 1200; ++i) ASSERT_TRUE(c.write(kib)) << i << ": " << code_name(c.finish().code);
        (void)c.write(std::string((3 << 20) + 1, 'o'));  // the answer may have ended the call already
        (void)c.writes_done();
        status s = c.finish();
        EXPECT_EQ(s.code, code::resource_exhausted) << code_name(s.code) << " " << s.message;
    }
}

TEST_P(grpc_server_test, a_deadline_ends_a_wait_for_request_data) {
    // A client that sends its head with grpc-timeout and then nothing, and does not enforce the
    // deadline itself: the server must end the call at the deadline, not at body_timeout.
    server g;
    add_small_echo(g);
    http::server_options ho;
    ho.body_timeout = 5s;
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler(), ho);
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* m : {"/t.S/Unary", "/t.S/ClientStream"}) {
        call_options o;
        o.metadata = {{"grpc-timeout", "200m"}};
        int64_t start = mono_now_ns();
        client_call c = ch.call(m, o);
        std::string out;
        while (c.read(out)) {  // without half-closing: the request stays open
        }
        status s = c.finish();
        auto took = std::chrono::nanoseconds(mono_now_ns() - start);
        EXPECT_EQ(s.code, code::deadline_exceeded) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_LT(took, 3s) << m;  // body_timeout would have taken 5 s
    }
}

TEST_P(grpc_server_test, a_quiet_stream_outlasts_body_timeout) {
    // A client stream that sends nothing for longer than the HTTP server's body_timeout, with
    // no deadline: the call goes on (body_timeout's 408 ended it, seen as UNKNOWN).
    constexpr auto k_body_timeout = 200ms;
    server g;
    event parked;  // the handler has its first message and reads the next
    g.add("/t.S/Quiet", [&](server_context& ctx) -> status {
        std::string all, m;
        auto got = ctx.read(m);
        if (!got || !*got) return detail::no_request(got);
        all += m;
        parked.set();  // on this vCPU: the handler runs on into the read, and parks there
        while ((got = ctx.read(m)) && *got) all += m;
        if (!got) return detail::no_request(got);
        return ctx.write(all) ? status{} : status{code::unavailable, "write failed"};
    });
    http::server_options ho;
    ho.body_timeout = k_body_timeout;
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler(), ho);
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    client_call c = ch.call("/t.S/Quiet");
    ASSERT_TRUE(c.write("first "));
    ASSERT_TRUE(parked.wait(10s));
    // The client stays quiet until a timer of three body_timeouts has fired.
    event release;
    auto timer = spawn([&] {
        (void)this_fiber::sleep_for(3 * k_body_timeout);  // the quiet time under test
        release.set();
    });
    ASSERT_TRUE(timer);
    ASSERT_TRUE(release.wait());
    ASSERT_TRUE(timer->join());
    ASSERT_TRUE(c.write("second")) << code_name(c.finish().code);
    ASSERT_TRUE(c.writes_done());
    std::string out;
    EXPECT_TRUE(c.read(out));
    status s = c.finish();
    EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
    EXPECT_EQ(out, "first second");
}

TEST_P(grpc_server_test, a_grpc_timeout_past_what_nanoseconds_hold_is_no_deadline) {
    // Eight digits of hours overflow int64 nanoseconds from 2562048H on; grpc-go sends that for
    // its longest deadlines. Such a call must run with no deadline (or a far one), not end at once.
    server g;
    std::optional<deadline_t> seen;
    g.add("/t.S/Deadline", [&](server_context& ctx) -> status {
        seen = ctx.deadline();
        std::string in;
        if (!ctx.read(in)) return {code::internal, "read failed"};
        return ctx.write(in) ? status{} : status{code::unavailable, "write failed"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    const deadline_t a_century = deadline_after(std::chrono::hours(24 * 365 * 100));
    for (const char* t : {"2562047H", "2562048H", "99999999H", "99999999M"}) {
        seen.reset();
        call_options o;
        o.metadata = {{"grpc-timeout", t}};
        std::string out;
        status s = ch.unary("/t.S/Deadline", "hi", out, o);
        EXPECT_TRUE(s.ok()) << t << ": " << code_name(s.code) << " " << s.message;
        EXPECT_EQ(out, "hi") << t;
        ASSERT_TRUE(seen.has_value()) << t;
        EXPECT_GT(*seen, a_century) << t;
    }
}

TEST_P(grpc_server_test, trailing_metadata_cannot_smuggle_in_fields) {
    // Trailing metadata added before the head was kept as raw "key: value" lines: a value with
    // CR LF in it became fields of its own (a grpc-status the client took for the call's), and
    // a key with ':' was split in two. Both ways: trailers-only, and after a message.
    server g;
    g.add("/t.S/Smuggle", [](server_context& ctx) -> status {
        ctx.add_trailing_metadata("x-note", "a\r\ngrpc-status: 0\r\nx-injected: yes");
        ctx.add_trailing_metadata("x-a:b", "c");
        ctx.add_trailing_metadata("x-ok", "fine");
        std::string in;
        if (!ctx.read(in)) return {code::internal, "read failed"};
        if (ctx.metadata("x-write") == "1" && !ctx.write(in)) return {code::unavailable, "write failed"};
        return {code::failed_precondition, "the real status"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* write : {"0", "1"}) {
        call_options o;
        o.metadata = {{"x-write", write}};
        client_call c = ch.call("/t.S/Smuggle", o);
        ASSERT_TRUE(c.write("hi"));
        ASSERT_TRUE(c.writes_done());
        std::string out;
        while (c.read(out)) {
        }
        status s = c.finish();
        EXPECT_EQ(s.code, code::failed_precondition) << "write " << write << ": " << code_name(s.code);
        EXPECT_EQ(s.message, "the real status") << "write " << write;
        EXPECT_EQ(c.trailing_metadata("x-injected"), "") << "write " << write;
        EXPECT_EQ(c.trailing_metadata("x-note"), "") << "write " << write;
        EXPECT_EQ(c.trailing_metadata("x-a"), "") << "write " << write;
        EXPECT_EQ(c.trailing_metadata("x-ok"), "fine") << "write " << write;
    }
}

TEST_P(grpc_server_test, a_handler_is_interrupted_when_the_client_cancels) {
    // A handler blocked in something other than the call's own reads (a sleep here) went on
    // after the client's RST_STREAM: nothing told it, and nobody waited for its answer.
    server g;
    event parked, done;
    std::optional<result<void>> slept;
    bool cancelled = false;
    g.add("/t.S/Sleepy", [&](server_context& ctx) -> status {
        parked.set();  // on this vCPU: the handler runs on into the sleep, and parks there
        slept = this_fiber::sleep_for(10s);
        cancelled = ctx.cancelled();
        done.set();
        return {code::internal, "slept through"};
    });
    // For the next call: the interrupt must have been the cancelled call's alone.
    g.add("/t.S/Nap", [](server_context& ctx) -> status {
        std::string in;
        if (!ctx.read(in)) return {code::internal, "read failed"};
        if (!this_fiber::sleep_for(1ms)) return {code::internal, "the nap was interrupted"};
        if (ctx.cancelled()) return {code::internal, "cancelled"};
        return ctx.write(in) ? status{} : status{code::unavailable, "write failed"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    client_call c = ch.call("/t.S/Sleepy");
    ASSERT_TRUE(c.write("hi"));
    ASSERT_TRUE(parked.wait(10s));
    int64_t start = mono_now_ns();
    c.cancel();
    EXPECT_EQ(c.finish().code, code::cancelled);
    ASSERT_TRUE(done.wait(5s)) << "the handler slept on after the cancel";
    EXPECT_LT(std::chrono::nanoseconds(mono_now_ns() - start), 5s);
    ASSERT_TRUE(slept.has_value());
    ASSERT_FALSE(*slept);
    EXPECT_EQ(slept->error(), std::errc::operation_canceled);
    EXPECT_TRUE(cancelled);
    std::string out;
    status s = ch.unary("/t.S/Nap", "again", out);
    EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
    EXPECT_EQ(out, "again");
}

TEST_P(grpc_server_test, a_handler_is_interrupted_when_its_deadline_passes) {
    // A handler blocked on another resource (a socket that never brings anything) ran on past
    // its deadline. The client here does not enforce the deadline itself (it only sends
    // grpc-timeout), so that only the server's deadline can end the wait.
    server g;
    auto ends = net::stream::pair();
    ASSERT_TRUE(ends) << ends.error().message();
    event done;
    std::optional<result<size_t>> got;
    bool cancelled = false;
    g.add("/t.S/Stuck", [&](server_context& ctx) -> status {
        char b[16];
        got = ends->first.read_some(b, sizeof b);
        cancelled = ctx.cancelled();
        done.set();
        return cancelled ? status{code::deadline_exceeded, "gave up"} : status{code::internal, "not cancelled"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    call_options o;
    o.metadata = {{"grpc-timeout", "200m"}};
    int64_t start = mono_now_ns();
    client_call c = ch.call("/t.S/Stuck", o);
    ASSERT_TRUE(c.write("hi"));
    ASSERT_TRUE(c.writes_done());
    bool in_time = done.wait(5s).has_value();
    (void)ends->second.shutdown(SHUT_RDWR);  // ends a read left blocked, so that the server can stop
    ASSERT_TRUE(in_time) << "the handler's read went on past the deadline";
    EXPECT_LT(std::chrono::nanoseconds(mono_now_ns() - start), 5s);
    ASSERT_TRUE(got.has_value());
    ASSERT_FALSE(*got);
    EXPECT_EQ(got->error(), std::errc::operation_canceled);
    EXPECT_TRUE(cancelled);
    std::string out;
    while (c.read(out)) {
    }
    EXPECT_EQ(c.finish().code, code::deadline_exceeded);
}

TEST_P(grpc_server_test, a_handlers_exception_text_stays_on_the_server) {
    // The exception's text went to the client as grpc-message (INTERNAL): a query, a path or a
    // key in it told the client about the server's insides. gRPC C++ answers UNKNOWN with a
    // fixed message.
    server g;
    g.add("/t.S/Throws", [](server_context&) -> status { throw std::runtime_error("secret: db password hunter2"); });
    g.add("/t.S/ThrowsInt", [](server_context&) -> status { throw 42; });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* m : {"/t.S/Throws", "/t.S/ThrowsInt"}) {
        std::string out;
        status s = ch.unary(m, "hi", out);
        EXPECT_EQ(s.code, code::unknown) << m << ": " << code_name(s.code);
        EXPECT_EQ(s.message, "Unexpected error in RPC handling") << m;
    }
}

TEST_P(grpc_server_test, a_message_over_2_gib_is_refused_not_truncated) {
    // gRPC's length prefix is 32 bits: a message of 4 GiB and more went out with its length
    // modulo 2^32, and the rest of its bytes as garbage messages. write_with is asked for the
    // size without a buffer of that size (refused before anything is allocated or filled);
    // write goes through it.
    server g;
    std::vector<std::pair<size_t, result<void>>> seen;
    bool filled = false;
    g.add("/t.S/Huge", [&](server_context& ctx) -> status {
        for (size_t n : {(size_t(1) << 32) + 3, size_t(INT32_MAX) + 1}) {
            seen.emplace_back(n, ctx.write_with(n, [&](char*) {
                filled = true;
                return false;
            }));
        }
        return ctx.write("fine") ? status{} : status{code::unavailable, "write failed"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    std::string out;
    status s = ch.unary("/t.S/Huge", "hi", out);
    EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
    EXPECT_EQ(out, "fine");
    EXPECT_FALSE(filled);
    ASSERT_EQ(seen.size(), 2u);
    for (const auto& [n, r] : seen) {
        ASSERT_FALSE(r) << n;
        EXPECT_EQ(r.error(), std::errc::message_size) << n;
    }
}

TEST_P(grpc_server_test, a_malformed_grpc_timeout_is_refused) {
    // A grpc-timeout that did not parse was ignored: the call ran with no deadline at all,
    // though its client meant one. It is answered INTERNAL before the handler runs, as
    // grpc-go does.
    server g;
    bool ran = false;
    g.add("/t.S/Echo", [&](server_context& ctx) -> status {
        ran = true;
        std::string in;
        if (!ctx.read(in)) return {code::internal, "read failed"};
        return ctx.write(in) ? status{} : status{code::unavailable, "write failed"};
    });
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* t : {"soon", "10", "10x", "-5S", "123456789S", "1.5S", "S"}) {
        ran = false;
        call_options o;
        o.metadata = {{"grpc-timeout", t}};
        std::string out;
        status s = ch.unary("/t.S/Echo", "hi", out, o);
        EXPECT_EQ(s.code, code::internal) << t << ": " << code_name(s.code) << " " << s.message;
        EXPECT_FALSE(ran) << t;
    }
    std::string out;
    call_options o;
    o.metadata = {{"grpc-timeout", "10S"}};
    status s = ch.unary("/t.S/Echo", "hi", out, o);
    EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
    EXPECT_EQ(out, "hi");
}

TEST_P(grpc_server_test, a_second_request_message_to_a_unary_request_method_is_unimplemented) {
    // A unary method read its one message and answered as if the rest were not there. gRPC's
    // status codes call that a cardinality violation: UNIMPLEMENTED. (A server-streaming method
    // answers from its first message on, without waiting for the client's end of stream.)
    server g;
    int ran = 0;
    for (auto& [name, h] : small_echo_methods()) {
        g.add(name, [h = std::move(h), &ran](server_context& ctx) {
            ++ran;
            return h(ctx);
        });
    }
    auto srv = http::server::start(net::address::ipv4_loopback(0), g.as_handler());
    ASSERT_TRUE(srv) << srv.error().message();
    channel ch("127.0.0.1", (*srv)->local_address().port());
    for (const char* m : {"/t.S/Unary"}) {
        ran = 0;
        client_call c = ch.call(m);
        ASSERT_TRUE(c.write("one"));
        (void)c.write("two");  // the answer may have ended the call already
        (void)c.writes_done();
        std::string out;
        std::vector<std::string> got;
        while (c.read(out)) got.push_back(out);
        status s = c.finish();
        EXPECT_EQ(s.code, code::unimplemented) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_TRUE(got.empty()) << m << ": answered " << got.size() << " message(s)";
        EXPECT_EQ(ran, 1) << m;
        // One message is still answered.
        s = ch.unary(m, "one", out);
        EXPECT_TRUE(s.ok()) << m << ": " << code_name(s.code) << " " << s.message;
        EXPECT_EQ(out, "one") << m;
    }
    // A stream of them is what the streaming methods take.
    client_call c = ch.call("/t.S/ClientStream");
    ASSERT_TRUE(c.write("one"));
    ASSERT_TRUE(c.write("two"));
    ASSERT_TRUE(c.writes_done());
    std::string out;
    EXPECT_TRUE(c.read(out));
    EXPECT_TRUE(c.finish().ok());
    EXPECT_EQ(out, "onetwo");
}

GLUON_ENGINE_TEST_SUITE(grpc_server_test);

}  // namespace
}  // namespace gluon::rpc::grpc
