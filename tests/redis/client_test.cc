// gluon's Redis client against a real redis-server, on every engine, in RESP2 and RESP3:
// commands and reply kinds, many fibers pipelined on one connection, the pool, pub/sub,
// timeouts, AUTH, TLS, and a server that is not there or goes away.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gluon/net/tls.h"
#include "gluon/redis/client.h"
#include "gluon/runtime/fiber.h"
#include "gluon/net/socket.h"
#include "net/tls_test_support.h"
#include "redis/connection.h"
#include "redis/resp.h"
#include "support/redis_server.h"
#include "test_support.h"

namespace gluon::redis {
namespace {

using namespace std::chrono_literals;

struct param {
    engine::kind engine;
    int protocol;
};

std::string name_of(const ::testing::TestParamInfo<param>& i) {
    return std::string(engine::kind_name(i.param.engine)) + "_resp" + std::to_string(i.param.protocol);
}

class redis_test : public ::testing::TestWithParam<param> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam().engine)) GTEST_SKIP() << "engine not available";
        std::string why;
        srv_ = test::redis_server::start(why);
        if (!srv_) {
            if (std::getenv("GLUON_REQUIRE_PEERS")) FAIL() << why;
            GTEST_SKIP() << why;
        }
        init_options o;
        o.engine = GetParam().engine;
        o.log_engine = false;
        ASSERT_TRUE(init(o));
    }
    void TearDown() override {
        if (is_vcpu()) {
            ASSERT_TRUE(fini());
        }
    }
    options opts() const {
        options o;
        o.port = srv_->port();
        o.protocol = GetParam().protocol;
        return o;
    }
    std::unique_ptr<test::redis_server> srv_;
};

TEST_P(redis_test, commands_and_reply_kinds) {
    client db(opts());
    ASSERT_TRUE(db.set("greeting", "hello"));
    auto v = db.get("greeting");
    ASSERT_TRUE(v) << v.error().message();
    EXPECT_EQ(v->value_or(""), "hello");
    auto missing = db.get("no-such-key");
    ASSERT_TRUE(missing);
    EXPECT_FALSE(missing->has_value());
    EXPECT_EQ(*db.incr("counter", 5), 5);
    EXPECT_EQ(*db.incr("counter"), 6);
    EXPECT_EQ(*db.del("counter"), 1);
    // Binary-safe values of any size.
    std::string big(1 << 20, '\0');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
    ASSERT_TRUE(db.set("big", big));
    EXPECT_EQ(db.get("big")->value_or(""), big);
    // An error reply is a reply, and the connection goes on.
    auto wrong = db.command({"INCR", "greeting"});
    ASSERT_TRUE(wrong);
    EXPECT_TRUE(wrong->is_error());
    EXPECT_NE(wrong->str.find("not an integer"), std::string::npos);
    EXPECT_FALSE(db.incr("greeting"));  // the typed call says EPROTO
    // A hash: a map in RESP3, a flat array in RESP2.
    ASSERT_TRUE(db.command({"HSET", "h", "a", "1", "b", "2"}));
    auto h = db.command({"HGETALL", "h"});
    ASSERT_TRUE(h);
    EXPECT_EQ(h->type, GetParam().protocol == 3 ? reply::kind::map : reply::kind::array);
    EXPECT_EQ(h->elements.size(), 4u);
    // A sorted-set score: a double in RESP3, a bulk string in RESP2.
    ASSERT_TRUE(db.command({"ZADD", "z", "2.5", "m"}));
    auto score = db.command({"ZSCORE", "z", "m"});
    ASSERT_TRUE(score);
    if (GetParam().protocol == 3) {
        EXPECT_EQ(score->type, reply::kind::double_);
        EXPECT_EQ(score->number, 2.5);
    } else {
        EXPECT_EQ(score->str, "2.5");
    }
    auto ttl = db.set("short", "x", 50ms);
    ASSERT_TRUE(ttl);
    auto pttl = db.command({"PTTL", "short"});
    EXPECT_GT(pttl->integer, 0);
    EXPECT_LE(pttl->integer, 50);
}

TEST_P(redis_test, fibers_pipeline_on_one_connection) {
    auto o = opts();
    o.pool_size = 1;
    client db(o);
    constexpr int k = 200;
    int ok = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < k; ++i)
        fs.push_back(*spawn([&, i] {
            std::string key = "key:" + std::to_string(i), val(i * 13 % 500, static_cast<char>('a' + i % 26));
            for (int round = 0; round < 5; ++round) {
                if (!db.set(key, val)) return;
                auto got = db.get(key);
                if (!got || got->value_or("?") != val) return;
                if (!db.incr("shared")) return;
            }
            ++ok;
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok, k);
    EXPECT_EQ(db.get("shared")->value_or(""), std::to_string(k * 5));
    // All of it went over one connection: the server counts one client (this one).
    auto clients = db.command({"CLIENT", "LIST"});
    ASSERT_TRUE(clients);
    EXPECT_EQ(std::count(clients->str.begin(), clients->str.end(), '\n'), 1) << clients->str;
}

TEST_P(redis_test, the_pool_spreads_busy_fibers_over_its_connections) {
    auto o = opts();
    o.pool_size = 5;
    client db(o);
    // Fibers blocked in BLPOP keep their connections busy, so each of them and then the
    // CLIENT LIST below get a connection of their own.
    std::vector<fiber> fs;
    for (int i = 0; i < 4; ++i)
        fs.push_back(*spawn([&, i] { (void)db.command({"BLPOP", "q" + std::to_string(i), "5"}); }));
    this_fiber::yield();
    auto clients = db.command({"CLIENT", "LIST"});
    ASSERT_TRUE(clients);
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(db.command({"RPUSH", "q" + std::to_string(i), "x"}));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(std::count(clients->str.begin(), clients->str.end(), '\n'), 5) << clients->str;
}

TEST_P(redis_test, publish_and_subscribe) {
    auto sub = subscriber::connect(opts());
    ASSERT_TRUE(sub) << sub.error().message();
    ASSERT_TRUE(sub->subscribe({"news", "sport"}));
    ASSERT_TRUE(sub->psubscribe({"log.*"}));
    client db(opts());
    EXPECT_EQ(*db.publish("news", "hello"), 1);
    EXPECT_EQ(*db.publish("log.disk", "full"), 1);
    EXPECT_EQ(*db.publish("nobody", "x"), 0);
    auto m1 = sub->next(5s);
    ASSERT_TRUE(m1) << m1.error().message();
    EXPECT_EQ(m1->channel, "news");
    EXPECT_EQ(m1->payload, "hello");
    EXPECT_EQ(m1->pattern, "");
    auto m2 = sub->next(5s);
    ASSERT_TRUE(m2);
    EXPECT_EQ(m2->channel, "log.disk");
    EXPECT_EQ(m2->pattern, "log.*");
    EXPECT_EQ(m2->payload, "full");
    auto none = sub->next(50ms);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), std::errc::timed_out);
    ASSERT_TRUE(sub->unsubscribe({"news"}));
    EXPECT_EQ(*db.publish("news", "again"), 0);
    EXPECT_EQ(*db.publish("sport", "goal"), 1);
    auto m3 = sub->next(5s);
    ASSERT_TRUE(m3);
    EXPECT_EQ(m3->payload, "goal");
}

// UNSUBSCRIBE and PUNSUBSCRIBE without names end every subscription of their kind: the server
// confirms each it has (in its own order), or once without a name when it has none, and each
// confirmation is matched to the call all the same.
TEST_P(redis_test, unsubscribing_from_everything) {
    auto sub = subscriber::connect(opts());
    ASSERT_TRUE(sub) << sub.error().message();
    ASSERT_TRUE(sub->subscribe({"a", "b", "c"}));
    ASSERT_TRUE(sub->psubscribe({"p.*", "q.*"}));
    ASSERT_TRUE(sub->unsubscribe({"b"}));
    auto all = sub->unsubscribe();
    ASSERT_TRUE(all) << all.error().message();
    client db(opts());
    EXPECT_EQ(*db.publish("a", "x"), 0);
    EXPECT_EQ(*db.publish("c", "x"), 0);
    EXPECT_EQ(*db.publish("p.1", "by pattern"), 1);
    auto m = sub->next(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->pattern, "p.*");
    EXPECT_EQ(m->payload, "by pattern");
    auto none = sub->unsubscribe();  // no channel left: one confirmation without a name
    ASSERT_TRUE(none) << none.error().message();
    ASSERT_TRUE(sub->punsubscribe({"q.*"}));
    ASSERT_TRUE(sub->punsubscribe());
    ASSERT_TRUE(sub->punsubscribe());
    EXPECT_EQ(*db.publish("p.1", "x"), 0);
    // Still in step: a subscription after them is confirmed and served.
    ASSERT_TRUE(sub->subscribe({"d"}));
    EXPECT_EQ(*db.publish("d", "last"), 1);
    m = sub->next(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->payload, "last");
}

TEST_P(redis_test, a_timeout_closes_the_connection_and_the_next_command_gets_a_new_one) {
    auto o = opts();
    o.pool_size = 1;
    o.command_timeout = 200ms;
    client db(o);
    ASSERT_TRUE(db.set("k", "v"));
    std::error_code behind;
    auto f = *spawn([&] {
        this_fiber::yield();  // queued after the BLPOP on the same connection
        auto r = db.get("k");
        if (!r) behind = r.error();
    });
    auto slow = db.command({"BLPOP", "empty-list", "5"});
    ASSERT_FALSE(slow);
    EXPECT_EQ(slow.error(), std::errc::timed_out);
    ASSERT_TRUE(f.join());
    EXPECT_EQ(behind, std::errc::connection_aborted);
    EXPECT_EQ(db.get("k")->value_or(""), "v");
}

// A large command and a large reply do not leave the connection's buffers that large: they
// kept the size of the largest reply the connection ever had (hundreds of MB for a large GET,
// per pooled connection).
TEST_P(redis_test, a_large_reply_does_not_leave_the_buffers_large) {
    auto c = connection::open(opts());
    ASSERT_TRUE(c) << c.error().message();
    const std::string big(8u << 20, 'b');
    auto set = (*c)->call(std::vector<std::string_view>{"SET", "big", big});
    ASSERT_TRUE(set) << set.error().message();
    auto got = (*c)->call(std::vector<std::string_view>{"GET", "big"});
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(got->str.size(), big.size());
    EXPECT_LT((*c)->buffer_bytes(), 4u << 20);
    // And the connection goes on.
    auto ping = (*c)->call(std::vector<std::string_view>{"PING"});
    ASSERT_TRUE(ping) << ping.error().message();
    EXPECT_EQ(ping->str, "PONG");
    EXPECT_LT((*c)->buffer_bytes(), 4u << 20);
}

// close() while a fiber waits inside a connection (a blocking BLPOP): the fiber gets
// ECONNABORTED and the connection is freed by the last one out, never under it.
TEST_P(redis_test, close_with_a_caller_blocked_inside_the_connection) {
    client db(opts());
    client watcher(opts());
    std::error_code got;
    bool returned = false;
    auto f = *spawn([&] {
        auto r = db.command({"BLPOP", "never-filled", "10"});
        returned = true;
        if (!r) got = r.error();
    });
    // Until the server reports the BLPOP blocked: then the fiber is in its read.
    bool blocked = false;
    for (int i = 0; i < 5000 && !blocked; ++i) {
        auto info = watcher.command({"INFO", "clients"});
        ASSERT_TRUE(info);
        blocked = info->str.find("blocked_clients:1") != std::string::npos;
        if (!blocked) (void)this_fiber::sleep_for(1ms);
    }
    ASSERT_TRUE(blocked);
    EXPECT_FALSE(returned);
    db.close();
    ASSERT_TRUE(f.join());
    EXPECT_TRUE(returned);
    EXPECT_EQ(got, std::errc::connection_aborted) << got.message();
    ASSERT_TRUE(db.set("after", "close"));  // a new connection
    EXPECT_EQ(db.get("after")->value_or(""), "close");
}

// A client destroyed on another vCPU than one whose connection it has closes that connection
// too. On io_uring the receive its vCPU keeps armed on the socket (read ahead) held the socket
// open, and the server kept the connection, after the client was gone.
TEST_P(redis_test, a_client_destroyed_on_another_vcpu_closes_its_connections) {
    auto db = std::make_unique<client>(opts());
    client watcher(opts());
    std::atomic<int64_t> id{0};
    std::thread owner([&, o = opts()] {
        init_options io;
        io.engine = GetParam().engine;
        io.log_engine = false;
        (void)run(io, [&] {
            // Reads after the first are made ahead (an armed receive, on io_uring).
            for (int i = 0; i < 2; ++i) (void)db->command({"PING"});
            auto r = db->command({"CLIENT", "ID"});
            client waiter(o);
            id = r && r->type == reply::kind::integer ? r->integer : -1;
            // In the engine until the test is done: the owner vCPU lives on meanwhile.
            (void)waiter.command({"BLPOP", "owner-done", "10"});
        });
    });
    const bool got_id = test::eventually([&] { return id.load() != 0; }) && id.load() > 0;
    const std::string ids = std::to_string(id.load());
    auto listed = [&] {
        auto l = watcher.command({"CLIENT", "LIST", "ID", ids});
        return l && !l->is_error() && !l->str.empty();
    };
    const bool was_listed = got_id && listed();
    db.reset();  // here, not on the owner's vCPU
    const bool gone = got_id && test::eventually([&] { return !listed(); }, 5s);
    EXPECT_TRUE(watcher.command({"RPUSH", "owner-done", "x"}));
    owner.join();
    ASSERT_TRUE(got_id);
    EXPECT_TRUE(was_listed);
    EXPECT_TRUE(gone);
}

// A client used on a vCPU that ends (fini) and then on a new vCPU of the same thread: the new
// vCPU opens a connection of its own, and the ended vCPU's is closed. The pools were kept by
// thread id, so the new vCPU took the connection of the one that had ended (whose engine had
// held its read-ahead state), and the server saw the same client again.
TEST_P(redis_test, a_new_vcpu_on_the_same_thread_opens_a_connection_of_its_own) {
    client db(opts());
    // Reads after the first are made ahead (an armed receive, on io_uring).
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(db.command({"PING"}));
    auto first = db.command({"CLIENT", "ID"});
    ASSERT_TRUE(first) << first.error().message();
    ASSERT_EQ(first->type, reply::kind::integer);
    ASSERT_TRUE(fini());
    init_options io;
    io.engine = GetParam().engine;
    io.log_engine = false;
    ASSERT_TRUE(init(io));
    auto second = db.command({"CLIENT", "ID"});
    ASSERT_TRUE(second) << second.error().message();
    ASSERT_EQ(second->type, reply::kind::integer);
    EXPECT_NE(second->integer, first->integer);
    ASSERT_TRUE(db.set("after", "restart"));
    EXPECT_EQ(db.get("after")->value_or(""), "restart");
    const std::string old_id = std::to_string(first->integer);
    EXPECT_TRUE(test::eventually(
        [&] {
            auto l = db.command({"CLIENT", "LIST", "ID", old_id});
            return l && !l->is_error() && l->str.empty();
        },
        5s));
}

// Commands that would change a pooled connection for its other callers are refused; the
// pipeline stays in step. (After MULTI, another fiber's GET was answered QUEUED and its value
// went into the EXEC of the fiber that sent MULTI; AUTH made every fiber on the connection that
// user until the pool opened a new connection, which was not; QUIT closed the connection under
// the commands behind it.)
TEST_P(redis_test, commands_that_change_the_connection_are_refused) {
    client db(opts());
    ASSERT_TRUE(db.set("x", "1"));
    for (auto args : {std::vector<std::string>{"SUBSCRIBE", "a", "b"}, {"psubscribe", "n*"}, {"Monitor"},
                      {"CLIENT", "REPLY", "OFF"}, {"SELECT", "1"}, {"HELLO", "3"}, {"RESET"}, {"unsubscribe"},
                      {"MULTI"}, {"exec"}, {"DISCARD"}, {"WATCH", "x"}, {"UNWATCH"}, {"AUTH", "pw"},
                      {"auth", "someone", "pw"}, {"QUIT"}}) {
        auto r = db.command(args);
        ASSERT_FALSE(r) << args[0];
        EXPECT_EQ(r.error(), std::errc::invalid_argument) << args[0];
    }
    EXPECT_EQ(db.get("x")->value_or(""), "1");
    auto list = db.command({"CLIENT", "ID"});
    ASSERT_TRUE(list);
    EXPECT_EQ(list->type, reply::kind::integer);
    auto ping = db.command({"PING"});
    ASSERT_TRUE(ping);
    EXPECT_EQ(ping->str, "PONG");
}

// A transaction's commands run as one, next to other fibers' commands pipelined on the same
// connection: none of theirs is queued inside it (answered QUEUED) and none of its replies
// reaches them.
TEST_P(redis_test, transactions_run_as_one_beside_other_fibers_commands) {
    auto o = opts();
    o.pool_size = 1;
    client db(o);
    auto t = db.transaction({{"SET", "tx", "10"}, {"INCR", "tx"}, {"INCRBY", "tx", "5"}, {"GET", "tx"}});
    ASSERT_TRUE(t) << t.error().message();
    ASSERT_EQ(t->type, reply::kind::array);
    ASSERT_EQ(t->elements.size(), 4u);
    EXPECT_EQ(t->elements[0].str, "OK");
    EXPECT_EQ(t->elements[1].integer, 11);
    EXPECT_EQ(t->elements[2].integer, 16);
    EXPECT_EQ(t->elements[3].str, "16");

    constexpr int k = 40;
    int ok = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < k; ++i)
        fs.push_back(*spawn([&, i] {
            for (int round = 0; round < 10; ++round) {
                if (i % 2) {
                    // Two increments with nothing between them: consecutive values.
                    auto r = db.transaction({{"INCR", "pair"}, {"INCR", "pair"}});
                    if (!r || r->elements.size() != 2 || r->elements[1].integer != r->elements[0].integer + 1)
                        return;
                } else {
                    const std::string key = "plain:" + std::to_string(i);
                    if (!db.set(key, std::to_string(round))) return;
                    auto got = db.get(key);
                    if (!got || got->value_or("?") != std::to_string(round)) return;
                }
            }
            ++ok;
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok, k);
    EXPECT_EQ(db.get("pair")->value_or(""), std::to_string(k / 2 * 10 * 2));
}

TEST_P(redis_test, a_transaction_refused_while_queueing_runs_nothing) {
    client db(opts());
    ASSERT_TRUE(db.set("n", "1"));
    // A runtime error is one command's reply; the others run.
    auto t = db.transaction({{"INCR", "n"}, {"LPUSH", "n", "x"}, {"INCR", "n"}});
    ASSERT_TRUE(t) << t.error().message();
    ASSERT_EQ(t->elements.size(), 3u);
    EXPECT_EQ(t->elements[0].integer, 2);
    EXPECT_TRUE(t->elements[1].is_error());
    EXPECT_EQ(t->elements[2].integer, 3);
    // A command refused as it is queued (wrong arity) aborts the whole transaction.
    auto bad = db.transaction({{"INCR", "n"}, {"GET"}});
    ASSERT_TRUE(bad) << bad.error().message();
    EXPECT_TRUE(bad->is_error());
    EXPECT_NE(bad->str.find("wrong number of arguments"), std::string::npos) << bad->str;
    EXPECT_EQ(db.get("n")->value_or(""), "3");
    // The connection goes on, out of the transaction.
    EXPECT_EQ(*db.incr("n"), 4);
    for (auto cmds : {std::vector<std::vector<std::string>>{}, {{}}, {{"MULTI"}}, {{"GET", "n"}, {"EXEC"}},
                      {{"WATCH", "n"}}, {{"SUBSCRIBE", "c"}}})
        EXPECT_EQ(db.transaction(cmds).error(), std::errc::invalid_argument);
    EXPECT_EQ(*db.incr("n"), 5);
}

TEST_P(redis_test, auth_is_checked) {
    std::string why;
    auto secured = test::redis_server::start(why, {"--requirepass", "s3cret"});
    ASSERT_TRUE(secured) << why;
    auto o = opts();
    o.port = secured->port();
    {
        client db(o);
        auto r = db.command({"PING"});
        if (GetParam().protocol == 3) {  // HELLO without AUTH is refused
            ASSERT_FALSE(r);
            EXPECT_EQ(r.error(), std::errc::permission_denied);
        } else {  // the connection is made; its commands answer NOAUTH
            ASSERT_TRUE(r);
            EXPECT_TRUE(r->is_error()) << r->str;
        }
    }
    o.password = "wrong";
    {
        client db(o);
        auto r = db.command({"PING"});
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), std::errc::permission_denied);
    }
    o.password = "s3cret";
    client db(o);
    auto r = db.command({"PING"});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->str, "PONG");
}

TEST_P(redis_test, over_tls) {
    const auto& pki = net::tls_testing::certs();
    test::redis_server::tls_files files{pki.dir + "/server.pem", pki.dir + "/server.key", pki.dir + "/ca.pem"};
    std::string why;
    auto tls_srv = test::redis_server::start(why, {}, &files);
    ASSERT_TRUE(tls_srv) << why;
    auto ctx = net::tls_testing::client_ctx();
    auto o = opts();
    o.port = tls_srv->port();
    o.tls = &ctx;
    o.tls_server_name = "localhost";
    client db(o);
    ASSERT_TRUE(db.set("secret", "over tls"));
    EXPECT_EQ(db.get("secret")->value_or(""), "over tls");
}

TEST_P(redis_test, a_server_that_is_not_there_or_goes_away) {
    auto o = opts();
    test::refusing_port refusing;
    o.port = refusing.port();
    client nobody(o);
    auto r = nobody.command({"PING"});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_refused);

    client db(opts());
    ASSERT_TRUE(db.command({"PING"}));
    srv_->kill();
    auto gone = db.command({"PING"});
    ASSERT_FALSE(gone);
    EXPECT_TRUE(gone.error() == std::errc::connection_reset || gone.error() == std::errc::broken_pipe ||
                gone.error() == std::errc::connection_refused)
        << gone.error().message();
}

// A hostile or broken server on a loopback port: it answers the commands of the one connection
// it accepts with `answers` in order (HELLO 3 first gets an empty map), then reads on without
// answering until the client goes. received() counts the commands that came.
// The commands a hand-written test server has read off its connection, counted.
struct command_reader {
    net::stream& s;
    std::string in;
    int n = 0;
    // Reads until `want` commands have come in all. False: the connection ended or broke.
    bool until(int want) {
        char buf[4096];
        while (n < want) {
            auto got = s.read_some(buf, sizeof buf, 10s);
            if (!got || *got == 0) return false;
            in.append(buf, *got);
            reply cmd;
            size_t used = 0;
            while (detail::decode(in.data(), in.size(), cmd, used) == detail::decode_status::complete)
                in.erase(0, used), ++n;
        }
        return true;
    }
};

class scripted_server {
public:
    scripted_server(int protocol, std::vector<std::string> answers) {
        if (protocol == 3) answers.insert(answers.begin(), "%0\r\n");
        auto l = net::listener::listen(net::address::ipv4_loopback(0));
        EXPECT_TRUE(l) << l.error().message();
        if (!l) return;
        port_ = l->local_address()->port();
        f_ = *spawn([this, l = std::move(*l), answers = std::move(answers)]() mutable { serve(l, answers); });
    }
    ~scripted_server() { EXPECT_TRUE(f_.join()); }
    uint16_t port() const { return port_; }
    int received() const { return received_; }

private:
    void serve(net::listener& l, const std::vector<std::string>& answers) {
        auto s = l.accept(10s);
        if (!s) return;
        std::string in;
        char buf[4096];
        for (;;) {
            auto n = s->read_some(buf, sizeof buf, 10s);
            if (!n || *n == 0) return;
            in.append(buf, *n);
            reply cmd;
            size_t used = 0;
            while (detail::decode(in.data(), in.size(), cmd, used) == detail::decode_status::complete) {
                in.erase(0, used);
                if (static_cast<size_t>(received_) < answers.size()) {
                    const std::string& a = answers[static_cast<size_t>(received_)];
                    if (!s->write_all(a.data(), a.size(), 10s)) return;
                }
                ++received_;
            }
        }
    }
    uint16_t port_ = 0;
    int received_ = 0;
    fiber f_;
};

// Against scripted servers: needs no redis-server.
class scripted_test : public ::testing::TestWithParam<param> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam().engine)) GTEST_SKIP() << "engine not available";
        init_options o;
        o.engine = GetParam().engine;
        o.log_engine = false;
        ASSERT_TRUE(init(o));
    }
    void TearDown() override {
        if (is_vcpu()) {
            ASSERT_TRUE(fini());
        }
    }
    options opts(const scripted_server& srv) const {
        options o;
        o.port = srv.port();
        o.protocol = GetParam().protocol;
        return o;
    }
};

// A reply whose header claims more than the limits (a string over 512 MiB) is refused as soon
// as the header is read: the client neither waits for nor buffers the bytes it claims (it used
// to, until the command timed out).
TEST_P(scripted_test, a_reply_header_over_the_limits_fails_at_once) {
    scripted_server srv(GetParam().protocol, {"$1000000000\r\n"});
    auto o = opts(srv);
    o.command_timeout = 5s;
    client db(o);
    auto r = db.command({"GET", "k"});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::protocol_error) << r.error().message();
}

// The fiber reading for the connection is interrupted with a command queued behind its own:
// the connection closes, the interrupted command gets ECANCELED and the other one ECONNABORTED.
// The reader's ECANCELED was given to every command on the connection, as if each had been
// interrupted.
TEST_P(scripted_test, an_interrupted_reader_leaves_the_others_aborted_not_cancelled) {
    scripted_server srv(GetParam().protocol, {});  // never answers a command
    client db(opts(srv));
    const int handshake = GetParam().protocol == 3 ? 1 : 0;
    std::error_code first_err, second_err;
    auto first = *spawn([&] {
        auto r = db.command({"PING"});
        first_err = r ? std::error_code() : r.error();
    });
    // Its command came: it reads, being alone on the connection.
    ASSERT_TRUE(test::eventually([&] { return srv.received() == handshake + 1; }));
    auto second = *spawn([&] {
        auto r = db.command({"PING"});
        second_err = r ? std::error_code() : r.error();
    });
    ASSERT_TRUE(test::eventually([&] { return srv.received() == handshake + 2; }));
    ASSERT_TRUE(first.interrupt());
    ASSERT_TRUE(first.join());
    ASSERT_TRUE(second.join());
    EXPECT_EQ(first_err, std::errc::operation_canceled) << first_err.message();
    EXPECT_EQ(second_err, std::errc::connection_aborted) << second_err.message();
}

// A transaction queued behind another caller's command while that caller reads: its reply
// comes first and alone, and the reading passes to the transaction although the oldest reply
// still awaited (MULTI's +OK) has no caller waiting for it. Handed only to a waiting oldest
// slot, the reading passed to no one and the transaction waited out its timeout.
TEST_P(scripted_test, a_transaction_behind_another_callers_reply_takes_over_the_reading) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    bool first_done = false, pinged = false;
    const int handshake = GetParam().protocol == 3 ? 1 : 0;
    auto server = *spawn([&] {
        auto s = l->accept(10s);
        if (!s) return;
        command_reader cmds{*s};
        if (handshake && (!cmds.until(1) || !s->write_all("%0\r\n", 4, 10s))) return;
        if (!cmds.until(handshake + 1)) return;
        pinged = true;
        // Then MULTI, INCR, INCR, EXEC: PING's answer alone, the rest once it is taken.
        if (!cmds.until(handshake + 5) || !s->write_all("+PONG\r\n", 7, 10s)) return;
        if (!test::eventually([&] { return first_done; }, 10s)) return;
        const std::string rest = "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:1\r\n:2\r\n";
        (void)s->write_all(rest.data(), rest.size(), 10s);
    });
    options o;
    o.port = l->local_address()->port();
    o.protocol = GetParam().protocol;
    o.command_timeout = 3s;
    client db(o);
    result<reply> ping = errno_error(EINPROGRESS), tx = errno_error(EINPROGRESS);
    auto first = *spawn([&] {
        ping = db.command({"PING"});
        first_done = true;
    });
    // The first reads once its PING is out (it is alone on the connection).
    EXPECT_TRUE(test::eventually([&] { return pinged; }, 10s));
    auto second = *spawn([&] { tx = db.transaction({{"INCR", "k"}, {"INCR", "k"}}); });
    ASSERT_TRUE(first.join());
    ASSERT_TRUE(second.join());
    ASSERT_TRUE(ping) << ping.error().message();
    EXPECT_EQ(ping->str, "PONG");
    ASSERT_TRUE(tx) << tx.error().message();
    ASSERT_EQ(tx->elements.size(), 2u);
    EXPECT_EQ(tx->elements[1].integer, 2);
    db.close();
    ASSERT_TRUE(server.join());
}

// A subscriber's wait for a message is interrupted: the subscriber is still usable, as after a
// timeout (the interrupted read took nothing). It was closed, and every later call failed with
// ECANCELED.
TEST_P(scripted_test, a_subscriber_interrupted_in_next_is_still_usable) {
    scripted_server srv(GetParam().protocol,
                        {"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
                         "*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n"});
    auto sub = subscriber::connect(opts(srv));
    ASSERT_TRUE(sub) << sub.error().message();
    ASSERT_TRUE(sub->subscribe({"a"}));
    std::error_code got;
    auto waiting = *spawn([&] {
        auto m = sub->next(10s);
        got = m ? std::error_code() : m.error();
    });
    ASSERT_TRUE(waiting.interrupt());
    ASSERT_TRUE(waiting.join());
    EXPECT_EQ(got, std::errc::operation_canceled) << got.message();
    auto more = sub->subscribe({"b"});
    ASSERT_TRUE(more) << more.error().message();
    auto m = sub->next(10s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->channel, "a");
    EXPECT_EQ(m->payload, "hello");
}

// Confirmations that come after their call gave up are taken for that call, not for the next
// one: an UNSUBSCRIBE's late confirmation was counted for a SUBSCRIBE of the same channel,
// which returned before the server had subscribed (its own confirmation then dropped as late).
// As arrays in RESP2 and push messages in RESP3.
TEST_P(scripted_test, a_late_confirmation_is_not_taken_for_a_later_call) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    const int handshake = GetParam().protocol == 3 ? 1 : 0;
    const char head = GetParam().protocol == 3 ? '>' : '*';
    auto bulk = [](std::string_view v) { return "$" + std::to_string(v.size()) + "\r\n" + std::string(v) + "\r\n"; };
    auto event = [&](std::string_view kind, std::string_view name, int count) {
        return std::string(1, head) + "3\r\n" + bulk(kind) + bulk(name) + ":" + std::to_string(count) + "\r\n";
    };
    auto msg = [&](std::string_view channel, std::string_view payload) {
        return std::string(1, head) + "3\r\n" + bulk("message") + bulk(channel) + bulk(payload);
    };
    bool gave_up = false;
    auto server = *spawn([&] {
        auto s = l->accept(10s);
        if (!s) return;
        command_reader cmds{*s};
        auto answer = [&](int command, const std::string& out) {
            return cmds.until(handshake + command) && s->write_all(out.data(), out.size(), 10s);
        };
        if (handshake && (!cmds.until(1) || !s->write_all("%0\r\n", 4, 10s))) return;
        if (!answer(1, event("subscribe", "a", 1))) return;  // SUBSCRIBE a
        // UNSUBSCRIBE a: confirmed only once the next call (SUBSCRIBE a) comes, after it gave up.
        if (!answer(3, event("unsubscribe", "a", 0))) return;
        // SUBSCRIBE b, once that SUBSCRIBE a gave up too: a's confirmation, a message, b's.
        if (!answer(4, event("subscribe", "a", 1) + msg("a", "hello") + event("subscribe", "b", 2))) return;
        // UNSUBSCRIBE b: confirmed once it gave up, while the client waits in next().
        if (!cmds.until(handshake + 5) || !test::eventually([&] { return gave_up; }, 10s)) return;
        const std::string late = event("unsubscribe", "b", 1) + msg("a", "again");
        if (!s->write_all(late.data(), late.size(), 10s)) return;
        if (!answer(6, event("psubscribe", "p*", 2))) return;  // PSUBSCRIBE p*
        (void)cmds.until(handshake + 7);                        // until the client goes
    });
    // The client's side in a call of its own, so that a failed assertion still closes the
    // subscriber and joins the server.
    [&] {
        options o;
        o.port = l->local_address()->port();
        o.protocol = GetParam().protocol;
        o.command_timeout = 300ms;
        auto sub = subscriber::connect(o);
        ASSERT_TRUE(sub) << sub.error().message();
        ASSERT_TRUE(sub->subscribe({"a"}));
        auto un = sub->unsubscribe({"a"});
        ASSERT_FALSE(un);
        EXPECT_EQ(un.error(), std::errc::timed_out) << un.error().message();
        // Only the UNSUBSCRIBE's confirmation comes: not this call's.
        auto again = sub->subscribe({"a"});
        ASSERT_FALSE(again);
        EXPECT_EQ(again.error(), std::errc::timed_out) << again.error().message();
        auto b = sub->subscribe({"b"});
        ASSERT_TRUE(b) << b.error().message();
        auto m = sub->next(5s);
        ASSERT_TRUE(m) << m.error().message();
        EXPECT_EQ(m->channel, "a");
        EXPECT_EQ(m->payload, "hello");
        auto un_b = sub->unsubscribe({"b"});
        ASSERT_FALSE(un_b);
        EXPECT_EQ(un_b.error(), std::errc::timed_out) << un_b.error().message();
        gave_up = true;
        // next() takes the late confirmation for that call, and the next call its own.
        m = sub->next(5s);
        ASSERT_TRUE(m) << m.error().message();
        EXPECT_EQ(m->payload, "again");
        auto p = sub->psubscribe({"p*"});
        ASSERT_TRUE(p) << p.error().message();
        EXPECT_EQ(sub->subscribe({}).error(), std::errc::invalid_argument);
    }();
    ASSERT_TRUE(server.join());
}

// A server that takes a subscriber's commands (HELLO 3 answered with an empty map) and answers
// a SUBSCRIBE with messages of `size` bytes but never with its confirmation: a message each
// `every` (none: as fast as it can) until `total` bytes, then nothing until the client goes or
// stop().
class unconfirming_server {
public:
    unconfirming_server(int protocol, size_t size, duration every, size_t total) {
        auto l = net::listener::listen(net::address::ipv4_loopback(0));
        EXPECT_TRUE(l) << l.error().message();
        if (!l) return;
        port_ = l->local_address()->port();
        f_ = *spawn([this, protocol, size, every, total, l = std::move(*l)]() mutable {
            auto s = l.accept(10s);
            if (!s) return;
            command_reader cmds{*s};
            if (protocol == 3 && (!cmds.until(1) || !s->write_all("%0\r\n", 4, 10s))) return;
            if (!cmds.until(protocol == 3 ? 2 : 1)) return;
            const std::string m = "*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$" + std::to_string(size) + "\r\n" +
                                  std::string(size, 'm') + "\r\n";
            std::string batch;
            while (batch.size() < 64 * 1024) batch += m;
            const std::string& out = every > duration::zero() ? m : batch;
            for (size_t sent = 0; sent < total; sent += out.size()) {
                if (!s->write_all(out.data(), out.size(), 10s)) return;
                if (every > duration::zero() && !this_fiber::sleep_for(every)) return;
            }
            char buf[4096];
            while (auto got = s->read_some(buf, sizeof buf, 10s))
                if (*got == 0) return;
        });
    }
    ~unconfirming_server() {
        stop();
        EXPECT_TRUE(f_.join());
    }
    uint16_t port() const { return port_; }
    void stop() { (void)f_.interrupt(); }

private:
    uint16_t port_ = 0;
    fiber f_;
};

// command_timeout bounds a subscribe as a whole. Each reply had the whole timeout afresh, so a
// server that sent a message now and then and never the confirmation held the call for as long
// as it went on (here 10 s, for a timeout of 300 ms).
TEST_P(scripted_test, a_subscribe_never_confirmed_times_out_while_messages_come) {
    unconfirming_server srv(GetParam().protocol, 10, 20ms, 500 * 10);
    options o;
    o.port = srv.port();
    o.protocol = GetParam().protocol;
    o.command_timeout = 300ms;
    auto sub = subscriber::connect(o);
    ASSERT_TRUE(sub) << sub.error().message();
    const auto start = std::chrono::steady_clock::now();
    auto r = sub->subscribe({"a"});
    const auto took = std::chrono::steady_clock::now() - start;
    srv.stop();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
    EXPECT_LT(took, 3s);
    // The messages that came meanwhile are kept.
    auto m = sub->next(1s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->channel, "a");
}

// Messages that come before a subscribe's confirmations are kept up to a bound: past it the
// subscribe fails with ENOBUFS and the subscriber is closed. They were kept without end (a
// server flooding 100 MiB of them had the client hold all of it).
TEST_P(scripted_test, messages_before_the_confirmations_are_kept_up_to_a_bound) {
    unconfirming_server srv(GetParam().protocol, 1000, duration::zero(), 100u << 20);
    options o;
    o.port = srv.port();
    o.protocol = GetParam().protocol;
    o.command_timeout = 10s;
    auto sub = subscriber::connect(o);
    ASSERT_TRUE(sub) << sub.error().message();
    auto r = sub->subscribe({"a"});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::no_buffer_space) << r.error().message();
    auto m = sub->next(1s);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(), std::errc::connection_aborted) << m.error().message();
}

// Fibers that wait while another opens a connection to a server that never answers take its
// failure: one connection is tried, not one after another per fiber (the last fiber failed after
// as many command timeouts as fibers before it).
TEST_P(scripted_test, fibers_waiting_for_a_failed_open_take_its_error) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    std::vector<net::stream> accepted;
    auto acceptor = *spawn([&] {
        while (auto s = l->accept(10s)) accepted.push_back(std::move(*s));
    });
    options o;
    o.port = l->local_address()->port();
    o.protocol = GetParam().protocol;
    o.database = 1;  // a handshake command the server never answers
    o.command_timeout = 300ms;
    {
        client db(o);
        std::vector<fiber> fs;
        std::vector<std::error_code> errs(5);
        for (size_t i = 0; i < errs.size(); ++i)
            fs.push_back(*spawn([&, i] {
                auto r = db.command({"PING"});
                errs[i] = r ? std::error_code() : r.error();
            }));
        for (auto& f : fs) ASSERT_TRUE(f.join());
        for (auto& e : errs) EXPECT_EQ(e, std::errc::timed_out) << e.message();
    }
    this_fiber::yield();  // an accept of a connect made last
    EXPECT_EQ(accepted.size(), 1u);
    ASSERT_TRUE(acceptor.interrupt());
    ASSERT_TRUE(acceptor.join());
}

INSTANTIATE_TEST_SUITE_P(engines, scripted_test,
                         ::testing::Values(param{engine::kind::io_uring, 2}, param{engine::kind::io_uring, 3},
                                           param{engine::kind::epoll, 2}, param{engine::kind::epoll, 3}),
                         name_of);

INSTANTIATE_TEST_SUITE_P(engines, redis_test,
                         ::testing::Values(param{engine::kind::io_uring, 2}, param{engine::kind::io_uring, 3},
                                           param{engine::kind::epoll, 2}, param{engine::kind::epoll, 3}),
                         name_of);

}  // namespace
}  // namespace gluon::redis
