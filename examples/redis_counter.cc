// Page-view counting in Redis from many fibers at once, as the handlers of a web server would do
// it: each visit increments its page's counter and the day's total in one transaction, and the
// fibers' commands share one pipelined connection. Then the busiest pages, from a sorted set.
//
//   redis_counter [--host H] [--port P | --unix PATH] [--fibers N] [--visits M] [--engine E]
//
// N * M, the expected total, is at most 2147483647. Needs a Redis server (6379 on this machine by
// default). The exit status is 0 when every count adds up, 1 otherwise.
#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "gluon/redis/client.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

constexpr const char* k_pages[] = {"/", "/docs", "/blog", "/about", "/pricing"};

// One fiber's visits: page i % 5, counted and ranked in one transaction.
result<void> visit(redis::client& db, int fiber, int visits) {
    for (int v = 0; v < visits; ++v) {
        const std::string page = k_pages[(fiber + v) % std::size(k_pages)];
        auto r = GLUON_TRY(db.transaction({{"INCR", "views:" + page},
                                           {"INCR", "views:total"},
                                           {"ZINCRBY", "views:ranking", "1", page}}));
        if (r.is_error()) {
            std::fprintf(stderr, "redis_counter: %s\n", r.str.c_str());
            return errno_error(EPROTO);
        }
    }
    return {};
}

result<int> count(const redis::options& o, int fibers, int visits) {
    redis::client db(o);
    for (const char* page : k_pages) GLUON_TRY(db.del(std::string("views:") + page));
    GLUON_TRY(db.del("views:total"));
    GLUON_TRY(db.del("views:ranking"));

    std::vector<fiber> fs;
    std::vector<std::error_code> errors(static_cast<size_t>(fibers));
    for (int i = 0; i < fibers; ++i)
        fs.push_back(GLUON_TRY(spawn([&, i] {
            if (auto r = visit(db, i, visits); !r) errors[static_cast<size_t>(i)] = r.error();
        })));
    for (auto& f : fs) GLUON_TRY(f.join());
    for (const auto& e : errors)
        if (e) return unexpected(e);

    auto total = GLUON_TRY(db.get("views:total"));
    std::printf("%d fibers, %d visits each: views:total = %s\n", fibers, visits, total.value_or("0").c_str());
    auto top = GLUON_TRY(db.command({"ZREVRANGE", "views:ranking", "0", "2", "WITHSCORES"}));
    std::printf("busiest pages:\n");
    // RESP2: a flat array (member, score, ...); RESP3: pairs of [member, score].
    for (size_t i = 0; i < top.elements.size(); ++i) {
        const auto& e = top.elements[i];
        if (e.type == redis::reply::kind::array && e.elements.size() == 2)
            std::printf("  %-10s %s\n", e.elements[0].str.c_str(), e.elements[1].str.c_str());
        else if (i + 1 < top.elements.size())
            std::printf("  %-10s %s\n", e.str.c_str(), top.elements[++i].str.c_str());
    }
    return total.value_or("0") == std::to_string(fibers * visits) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    redis::options o;
    init_options io;
    int fibers = 100, visits = 50;
    cli::parser p("usage: redis_counter [--host H] [--port P | --unix PATH] [--fibers N] [--visits M] "
                  "[--engine io_uring|epoll] (N * M at most 2147483647)");
    p.option("--host", o.host).option("--port", o.port).option("--unix", o.unix_path);
    p.option("--fibers", fibers).option("--visits", visits).engine(io);
    // The total, fibers * visits, is an int: past INT_MAX it overflowed (undefined behaviour).
    if (!p.parse(argc, argv) || fibers < 1 || visits < 1 || visits > INT_MAX / fibers) return p.usage();
    auto r = run(io, [&] { return count(o, fibers, visits); });
    if (!r) {
        std::fprintf(stderr, "redis_counter: %s\n", r.error().message().c_str());
        return 1;
    }
    return *r;
}
