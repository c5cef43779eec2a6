#include "gluon/common/log.h"

#include "gluon/sys/ops.h"

#include <time.h>
#include <sys/uio.h>

#include <cstdlib>

namespace gluon::log {
namespace {

const char* level_name(level lvl) {
    switch (lvl) {
        case level::trace: return "TRACE";
        case level::debug: return "DEBUG";
        case level::info: return "INFO";
        case level::warn: return "WARN";
        case level::error: return "ERROR";
        case level::off: break;
    }
    return "?";
}

void stderr_sink(level, std::string_view line, void*) {
    // One writev(2) per line so lines from different threads do not interleave.
    char nl = '\n';
    iovec iov[2] = {{const_cast<char*>(line.data()), line.size()}, {&nl, 1}};
    (void)sys::writev(2, iov, 2, -1);
}

int initial_level() {
    level lvl = level::info;
    if (const char* env = std::getenv("GLUON_LOG_LEVEL")) parse_level(env, lvl);
    return static_cast<int>(lvl);
}

struct sink_slot {
    sink_fn fn;
    void* ctx;
};
std::atomic<sink_slot*> g_sink{nullptr};
sink_slot g_slots[2];
std::atomic<int> g_slot_idx{0};

int64_t mono_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

}  // namespace

namespace detail {
std::atomic<int> g_level{initial_level()};

void emit(level lvl, fmt::string_view fmt_str, fmt::format_args args) noexcept {
    try {
        timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        fmt::memory_buffer buf;
        fmt::format_to(std::back_inserter(buf), "{}.{:06d} {:<5} ", ts.tv_sec, ts.tv_nsec / 1000,
                       level_name(lvl));
        fmt::vformat_to(std::back_inserter(buf), fmt_str, args);
        std::string_view line(buf.data(), buf.size());
        sink_slot* s = g_sink.load(std::memory_order_acquire);
        if (s)
            s->fn(lvl, line, s->ctx);
        else
            stderr_sink(lvl, line, nullptr);
    } catch (...) {
        // A formatting failure (e.g. bad_alloc) must not take the process down from a log line.
    }
}

bool rate_limit::admit(int64_t interval_ns, uint64_t& dropped) noexcept {
    int64_t now = mono_ns();
    int64_t next = next_ns.load(std::memory_order_relaxed);
    if (now < next || !next_ns.compare_exchange_strong(next, now + interval_ns)) {
        suppressed.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    dropped = suppressed.exchange(0, std::memory_order_relaxed);
    return true;
}
}  // namespace detail

void set_sink(sink_fn fn, void* ctx) noexcept {
    // Two alternating slots: a concurrent emit keeps reading a consistent (fn, ctx) pair.
    int i = g_slot_idx.fetch_add(1) & 1;
    g_slots[i] = {fn, ctx};
    g_sink.store(&g_slots[i], std::memory_order_release);
}
void reset_sink() noexcept { g_sink.store(nullptr, std::memory_order_release); }
void set_level(level lvl) noexcept { detail::g_level.store(static_cast<int>(lvl)); }
level get_level() noexcept { return static_cast<level>(detail::g_level.load()); }

bool parse_level(std::string_view s, level& lvl) noexcept {
    static constexpr std::pair<std::string_view, level> names[] = {
        {"trace", level::trace}, {"debug", level::debug}, {"info", level::info},
        {"warn", level::warn},   {"error", level::error}, {"off", level::off}};
    for (auto& [name, l] : names)
        if (s == name) {
            lvl = l;
            return true;
        }
    return false;
}

}  // namespace gluon::log
