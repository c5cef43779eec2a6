// Boost.Context peer for the gluon runtime micro-benchmarks.
//
// Uses the raw fcontext layer (make_fcontext / jump_fcontext), the fastest
// path Boost.Context offers, on guard-paged stacks from
// protected_fixedsize_stack kept in a small free-list pool:
//   switch       ns per context switch; the main context and one made context
//                jump back and forth (one jump = one switch, a round trip = 2)
//   create_join  ns to take a pooled stack, make a context on it, run it to
//                its end (it jumps back once) and return the stack to the pool
// A bare context library has no scheduler, channels or mutexes, so the other
// rows are not measured here.
//
// Output: one "<workload> <ns_per_op>" line per workload on stdout.
// --quick runs roughly a fifth of the default iteration counts.
#include <boost/context/detail/fcontext.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace bctx = boost::context;
using bctx::detail::fcontext_t;
using bctx::detail::jump_fcontext;
using bctx::detail::make_fcontext;
using bctx::detail::transfer_t;

// Free list of guard-paged stacks: allocate on a miss, reuse afterwards.
class StackPool {
public:
    ~StackPool() {
        for (auto& s : free_) alloc_.deallocate(s);
    }
    bctx::stack_context acquire() {
        if (free_.empty()) return alloc_.allocate();
        auto s = free_.back();
        free_.pop_back();
        return s;
    }
    void release(bctx::stack_context s) { free_.push_back(s); }

private:
    bctx::protected_fixedsize_stack alloc_;
    std::vector<bctx::stack_context> free_;
};

static StackPool pool;

[[noreturn]] static void fail(const char* what, std::uint64_t got, std::uint64_t want) {
    std::fprintf(stderr, "boost-context: %s: got %llu, want %llu\n", what,
                 (unsigned long long)got, (unsigned long long)want);
    std::exit(1);
}

// Runs f(n / 10) as a warm-up, then times f(n); f returns the op count.
template <class F>
static void bench(const char* name, std::uint64_t n, F f) {
    f(n / 10);
    auto start = std::chrono::steady_clock::now();
    std::uint64_t ops = f(n);
    std::chrono::duration<double, std::nano> el = std::chrono::steady_clock::now() - start;
    std::printf("%s %.1f\n", name, el.count() / double(ops));
}

// Counts every entry, then jumps straight back to whoever jumped in.
static void bouncer(transfer_t t) {
    auto* entries = static_cast<std::uint64_t*>(t.data);
    for (;;) {
        ++*entries;
        t = jump_fcontext(t.fctx, nullptr);
    }
}

static std::uint64_t switch_bench(std::uint64_t n) {
    auto stack = pool.acquire();
    std::uint64_t entries = 0;
    fcontext_t peer = make_fcontext(stack.sp, stack.size, bouncer);
    for (std::uint64_t i = 0; i < n; ++i) peer = jump_fcontext(peer, &entries).fctx;
    if (entries != n) fail("switch entries", entries, n);
    // The bouncer is left suspended; it owns nothing, so its stack is reusable.
    pool.release(stack);
    return 2 * n;
}

// The task body: do (almost) nothing, then finish by jumping back for good.
static void empty_task(transfer_t t) {
    ++*static_cast<std::uint64_t*>(t.data);
    jump_fcontext(t.fctx, nullptr);
    std::abort();  // a finished context is never resumed
}

static std::uint64_t create_join(std::uint64_t n) {
    std::uint64_t ran = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        auto stack = pool.acquire();
        fcontext_t c = make_fcontext(stack.sp, stack.size, empty_task);
        jump_fcontext(c, &ran);  // returns once empty_task has finished
        pool.release(stack);
    }
    if (ran != n) fail("create_join ran", ran, n);
    return n;
}

int main(int argc, char** argv) {
    std::uint64_t scale = 5;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") != 0) {
            std::fprintf(stderr, "boost-context: unknown argument '%s' (only --quick)\n", argv[i]);
            return 2;
        }
        scale = 1;
    }
    bench("switch", scale * 15'000'000, switch_bench);
    bench("create_join", scale * 12'000'000, create_join);
}
