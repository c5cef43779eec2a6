#include "gluon/net/resolver.h"

#include <gtest/gtest.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

// A stand-in for getaddrinfo: answers names from a table with numeric addresses, counts its
// calls, and can hold every call at a gate until the test opens it. It runs on offload threads,
// so it uses std primitives; the test's fibers only ever take its mutex briefly.
struct fake_dns {
    std::mutex mu;
    std::condition_variable cv;
    bool open = true;
    int calls = 0;
    int sys_error = 0;  // nonzero: fail with EAI_SYSTEM and this errno
    std::map<std::string, std::vector<std::string>> names;

    int lookup(const char* host, const addrinfo* hints, addrinfo** out) {
        std::unique_lock lk(mu);
        ++calls;
        cv.wait(lk, [this] { return open; });
        if (sys_error) {
            errno = sys_error;
            return EAI_SYSTEM;
        }
        auto it = names.find(host);
        if (it == names.end()) return EAI_NONAME;
        // glibc allocates each node separately, so lists from several calls can be chained and
        // freed with one freeaddrinfo.
        addrinfo* head = nullptr;
        addrinfo** tail = &head;
        for (const auto& a : it->second) {
            addrinfo h = *hints;
            h.ai_flags |= AI_NUMERICHOST;
            addrinfo* r = nullptr;
            if (::getaddrinfo(a.c_str(), nullptr, &h, &r) != 0) continue;
            *tail = r;
            while (*tail) tail = &(*tail)->ai_next;
        }
        *out = head;
        return head ? 0 : EAI_NONAME;
    }
    int call_count() {
        std::lock_guard lk(mu);
        return calls;
    }
    void set_open(bool o) {
        {
            std::lock_guard lk(mu);
            open = o;
        }
        cv.notify_all();
    }
};

class resolver_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        reset();
    }
    void TearDown() override {
        if (fake_) fake_->set_open(true);  // never leave an offload thread stuck at the gate
        reset();
        test::engine_test::TearDown();
    }
    static void reset() {
        set_lookup_function({});
        configure_resolver({});
        clear_resolver_cache();
    }
    // Installs a fake resolver (held by shared_ptr: a detached lookup may outlive the test).
    std::shared_ptr<fake_dns> install_fake() {
        auto d = std::make_shared<fake_dns>();
        set_lookup_function([d](const char* h, const addrinfo* hints, addrinfo** out) {
            return d->lookup(h, hints, out);
        });
        fake_ = d;
        return d;
    }
    std::shared_ptr<fake_dns> fake_;
};
GLUON_ENGINE_TEST_SUITE(resolver_test);

// Yields until pred() holds; false after `limit` (a failure bound, not a synchronisation delay).
template <typename Pred>
bool eventually(Pred pred, duration limit = 5s) {
    const deadline_t end = deadline_after(limit);
    while (!pred()) {
        if (mono_now_ns() > end) return false;
        this_fiber::yield();
    }
    return true;
}

std::vector<std::string> texts(const std::vector<address>& v) {
    std::vector<std::string> out;
    out.reserve(v.size());
    for (const auto& a : v) out.push_back(a.to_string());
    return out;
}

using strings = std::vector<std::string>;

TEST_P(resolver_test, literals_are_answered_in_place) {
    auto fake = install_fake();
    const uint64_t before = resolver_statistics().lookups;
    EXPECT_EQ(texts(*resolve("127.0.0.1", 80)), strings{"127.0.0.1:80"});
    EXPECT_EQ(texts(*resolve("::1", 443)), strings{"[::1]:443"});
    EXPECT_EQ(texts(*resolve("[2001:db8::7]", 8080)), strings{"[2001:db8::7]:8080"});
    auto scoped = resolve("fe80::1%1", 22);
    ASSERT_TRUE(scoped) << scoped.error().message();
    EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>((*scoped)[0].data())->sin6_scope_id, 1u);
    resolve_options v6;
    v6.family = AF_INET6;
    EXPECT_EQ(resolve("10.0.0.1", 1, v6).error(), dns_error(EAI_ADDRFAMILY));
    EXPECT_EQ(resolve("", 1).error(), std::errc::invalid_argument);
    EXPECT_EQ(resolve("[localhost]", 1).error(), std::errc::invalid_argument);
    EXPECT_EQ(resolve(std::string("a\0b", 3), 1).error(), std::errc::invalid_argument);
    resolve_options bad;
    bad.family = AF_UNIX;
    EXPECT_EQ(resolve("127.0.0.1", 1, bad).error(), std::errc::invalid_argument);
    EXPECT_EQ(resolver_statistics().lookups, before);
    EXPECT_EQ(fake->call_count(), 0);
}

TEST_P(resolver_test, localhost_names_are_loopback_without_asking_the_system) {
    auto fake = install_fake();  // a lookup would be seen here
    EXPECT_EQ(texts(*resolve("localhost", 8080)), (strings{"127.0.0.1:8080", "[::1]:8080"}));
    EXPECT_EQ(texts(*resolve("api.LocalHost.", 1)), (strings{"127.0.0.1:1", "[::1]:1"}));
    resolve_options v4, v6;
    v4.family = AF_INET;
    v6.family = AF_INET6;
    EXPECT_EQ(texts(*resolve("LocalHost", 1, v4)), strings{"127.0.0.1:1"});
    EXPECT_EQ(texts(*resolve("x.localhost", 2, v6)), strings{"[::1]:2"});
    EXPECT_EQ(fake->call_count(), 0);
    // Not under .localhost: these go to the resolver.
    (void)resolve("notlocalhost", 1);
    (void)resolve("localhost.example", 1);
    EXPECT_EQ(fake->call_count(), 2);
}

TEST_P(resolver_test, a_name_that_does_not_exist_is_a_dns_error_and_is_cached) {
    auto r = resolve("nothing.invalid", 80, {.timeout = 10s});
    ASSERT_FALSE(r);
    EXPECT_EQ(&r.error().category(), &dns_category()) << r.error().message();
    EXPECT_EQ(r.error().message(), ::gai_strerror(r.error().value()));
    EXPECT_STREQ(dns_category().name(), "dns");
    if (r.error() == dns_error(EAI_NONAME)) {  // not a temporary failure: cached
        const auto before = resolver_statistics();
        EXPECT_EQ(resolve("nothing.invalid", 80).error(), r.error());
        EXPECT_EQ(resolver_statistics().lookups, before.lookups);
        EXPECT_EQ(resolver_statistics().cache_hits, before.cache_hits + 1);
    }
}

TEST_P(resolver_test, error_codes) {
    EXPECT_EQ(dns_error(EAI_NONAME).message(), ::gai_strerror(EAI_NONAME));
    EXPECT_EQ(dns_error(EAI_SYSTEM, ENOENT), std::errc::no_such_file_or_directory);
    // A system failure reports its errno and is not cached: it may be gone next time.
    auto fake = install_fake();
    fake->sys_error = EMFILE;
    EXPECT_EQ(resolve("busy.gluon.test", 1).error(), std::errc::too_many_files_open);
    EXPECT_EQ(resolve("busy.gluon.test", 1).error(), std::errc::too_many_files_open);
    EXPECT_EQ(fake->call_count(), 2);
}

TEST_P(resolver_test, cache_hits_make_no_lookup) {
    auto fake = install_fake();
    fake->names["a.gluon.test"] = {"127.0.0.2", "::1", "127.0.0.2"};
    const auto before = resolver_statistics();
    EXPECT_EQ(texts(*resolve("a.gluon.test", 7)), (strings{"127.0.0.2:7", "[::1]:7"}));
    EXPECT_EQ(texts(*resolve("A.Gluon.Test", 9)), (strings{"127.0.0.2:9", "[::1]:9"}));
    EXPECT_EQ(fake->call_count(), 1);
    auto after = resolver_statistics();
    EXPECT_EQ(after.lookups, before.lookups + 1);
    EXPECT_EQ(after.cache_hits, before.cache_hits + 1);
    EXPECT_EQ(after.cached, 1u);
    // Each family is its own question.
    resolve_options v4;
    v4.family = AF_INET;
    EXPECT_EQ(texts(*resolve("a.gluon.test", 7, v4)), strings{"127.0.0.2:7"});
    EXPECT_EQ(fake->call_count(), 2);
    // use_cache=false asks again, and clear_resolver_cache forgets.
    EXPECT_TRUE(resolve("a.gluon.test", 7, {.use_cache = false}));
    EXPECT_EQ(fake->call_count(), 3);
    clear_resolver_cache();
    EXPECT_EQ(resolver_statistics().cached, 0u);
    EXPECT_TRUE(resolve("a.gluon.test", 7));
    EXPECT_EQ(fake->call_count(), 4);
}

// A name's link-local answer keeps its scope id, from the lookup and from the cache, and
// prints it.
TEST_P(resolver_test, a_link_local_answer_keeps_its_scope_id) {
    const unsigned lo = if_nametoindex("lo");
    ASSERT_NE(lo, 0u);
    auto fake = install_fake();
    fake->names["ll.gluon.test"] = {"fe80::1%lo"};
    for (uint16_t port : {22, 23}) {  // the lookup, then a cache hit
        auto r = resolve("ll.gluon.test", port);
        ASSERT_TRUE(r) << r.error().message();
        ASSERT_EQ(r->size(), 1u);
        EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>((*r)[0].data())->sin6_scope_id, lo);
        EXPECT_EQ((*r)[0].to_string(), "[fe80::1%" + std::to_string(lo) + "]:" + std::to_string(port));
    }
    EXPECT_EQ(fake->call_count(), 1);
}

TEST_P(resolver_test, entries_expire_after_their_ttl_and_the_cache_is_bounded) {
    auto fake = install_fake();
    fake->names["t.gluon.test"] = {"127.0.0.3"};
    configure_resolver({.positive_ttl = 1ns, .negative_ttl = 1ns});
    EXPECT_TRUE(resolve("t.gluon.test", 1));
    EXPECT_TRUE(resolve("t.gluon.test", 1));  // the first answer was stale already
    EXPECT_FALSE(resolve("gone.gluon.test", 1));
    EXPECT_FALSE(resolve("gone.gluon.test", 1));
    EXPECT_EQ(fake->call_count(), 4);

    configure_resolver({.positive_ttl = 1h, .negative_ttl = 1h, .max_entries = 2});
    for (const char* n : {"t.gluon.test", "gone.gluon.test", "t.gluon.test"})
        (void)resolve(n, 1);
    EXPECT_EQ(fake->call_count(), 6);  // the third was a hit, and made t the most recent
    fake->names["u.gluon.test"] = {"127.0.0.4"};
    EXPECT_TRUE(resolve("u.gluon.test", 1));  // evicts gone, the least recently used
    EXPECT_EQ(resolver_statistics().cached, 2u);
    EXPECT_TRUE(resolve("t.gluon.test", 1));
    EXPECT_EQ(fake->call_count(), 7);
    EXPECT_FALSE(resolve("gone.gluon.test", 1));
    EXPECT_EQ(fake->call_count(), 8);
    configure_resolver({.max_entries = 1});
    EXPECT_EQ(resolver_statistics().cached, 1u);
}

TEST_P(resolver_test, concurrent_lookups_of_a_name_share_one_call) {
    auto fake = install_fake();
    fake->names["f.gluon.test"] = {"127.0.0.5"};
    fake->set_open(false);
    const auto before = resolver_statistics();
    constexpr int n = 8;
    std::vector<fiber> fibers;
    fibers.reserve(n);
    std::vector<std::string> got(n + 1);
    for (int i = 0; i < n; ++i)
        fibers.push_back(*spawn([&got, i] {
            auto r = resolve("f.gluon.test", 80);
            got[i] = r ? r->at(0).to_string() : r.error().message();
        }));
    // A plain thread waits too (parked on a futex instead of in the scheduler).
    std::thread t([&got] {
        auto r = resolve("f.gluon.test", 80);
        got[n] = r ? r->at(0).to_string() : r.error().message();
    });
    EXPECT_TRUE(
        eventually([&] { return resolver_statistics().coalesced == before.coalesced + n; }));
    fake->set_open(true);
    for (auto& f : fibers) ASSERT_TRUE(f.join());
    t.join();
    for (const auto& g : got) EXPECT_EQ(g, "127.0.0.5:80");
    EXPECT_EQ(fake->call_count(), 1);
    EXPECT_EQ(resolver_statistics().lookups, before.lookups + 1);
}

TEST_P(resolver_test, timeout_and_interrupt_return_while_the_lookup_goes_on) {
    auto fake = install_fake();
    fake->names["slow.gluon.test"] = {"127.0.0.6"};
    fake->set_open(false);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(resolve("slow.gluon.test", 1, {.timeout = 30ms}).error(), std::errc::timed_out);
    const auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, 30ms);
    EXPECT_LT(waited, 2s);

    std::error_code interrupted;
    const uint64_t joined = resolver_statistics().coalesced;
    auto f = spawn([&] { interrupted = resolve("slow.gluon.test", 1).error(); });
    ASSERT_TRUE(eventually([&] { return resolver_statistics().coalesced == joined + 1; }));
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(interrupted, std::errc::operation_canceled);

    // The abandoned lookup finishes and fills the cache for the next caller.
    fake->set_open(true);
    EXPECT_EQ(texts(*resolve("slow.gluon.test", 2)), strings{"127.0.0.6:2"});
    EXPECT_EQ(fake->call_count(), 1);
}

TEST_P(resolver_test, connect_by_name_tries_each_address_in_turn) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    const uint16_t port = l->local_address()->port();
    auto c = connect("localhost", port, 2s);
    ASSERT_TRUE(c) << c.error().message();
    auto s = l->accept(2s);
    ASSERT_TRUE(s);
    ASSERT_TRUE(c->write_all("hi", 2, 2s));
    char buf[2];
    ASSERT_TRUE(s->read_exactly(buf, 2, 2s));

    // 127.0.0.7 refuses (the listener is bound to 127.0.0.1 only); the next address answers.
    auto fake = install_fake();
    fake->names["two.gluon.test"] = {"127.0.0.7", "127.0.0.1"};
    fake->names["none.gluon.test"] = {"127.0.0.7"};
    auto d = connect("two.gluon.test", port, 2s);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(d->peer_address()->to_string(), "127.0.0.1:" + std::to_string(port));
    EXPECT_TRUE(l->accept(2s));
    EXPECT_EQ(connect("none.gluon.test", port, 2s).error(), std::errc::connection_refused);
    EXPECT_EQ(connect("nowhere.gluon.test", port, 2s).error(), dns_error(EAI_NONAME));
}

}  // namespace
}  // namespace gluon::net
