// Logging: fmt-formatted (format strings checked at compile time), levelled, with a pluggable
// sink and rate-limited variants for messages that could otherwise flood (accept errors, ...).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <fmt/format.h>

namespace gluon::log {

enum class level : int { trace = 0, debug, info, warn, error, off };

/// A sink receives one fully formatted line (no trailing newline). It may be called from any
/// thread concurrently; the default sink writes to stderr with a single write(2).
using sink_fn = void (*)(level lvl, std::string_view line, void* ctx);

void set_sink(sink_fn fn, void* ctx) noexcept;
/// Restores the stderr sink.
void reset_sink() noexcept;
void set_level(level lvl) noexcept;
level get_level() noexcept;
/// Parses "trace|debug|info|warn|error|off"; returns false (and leaves lvl) on anything else.
bool parse_level(std::string_view s, level& lvl) noexcept;

namespace detail {
extern std::atomic<int> g_level;
void emit(level lvl, fmt::string_view fmt_str, fmt::format_args args) noexcept;

/// Per-call-site state of a rate-limited message: at most one line per interval, and the
/// next line that gets through says how many were suppressed.
struct rate_limit {
    std::atomic<int64_t> next_ns{0};
    std::atomic<uint64_t> suppressed{0};
    /// Returns true if this call may log; `dropped` receives the suppressed count since last.
    bool admit(int64_t interval_ns, uint64_t& dropped) noexcept;
};
}  // namespace detail

inline bool enabled(level lvl) noexcept {
    return static_cast<int>(lvl) >= detail::g_level.load(std::memory_order_relaxed);
}

template <typename... Args>
void write(level lvl, fmt::format_string<Args...> f, Args&&... args) noexcept {
    if (!enabled(lvl)) return;
    detail::emit(lvl, f, fmt::make_format_args(args...));
}

}  // namespace gluon::log

#define GLUON_LOG(lvl, ...) ::gluon::log::write(::gluon::log::level::lvl, __VA_ARGS__)
#define GLUON_TRACE(...) GLUON_LOG(trace, __VA_ARGS__)
#define GLUON_DEBUG(...) GLUON_LOG(debug, __VA_ARGS__)
#define GLUON_INFO(...) GLUON_LOG(info, __VA_ARGS__)
#define GLUON_WARN(...) GLUON_LOG(warn, __VA_ARGS__)
#define GLUON_ERROR(...) GLUON_LOG(error, __VA_ARGS__)

/// Logs at most once per `interval` (a std::chrono duration) from this call site; the next line
/// that gets through is suffixed with the number of suppressed ones.
#define GLUON_LOG_RATE_LIMITED(lvl, interval, ...)                                                \
    do {                                                                                          \
        if (::gluon::log::enabled(::gluon::log::level::lvl)) {                                    \
            static ::gluon::log::detail::rate_limit gluon_rl_;                                    \
            uint64_t gluon_dropped_ = 0;                                                          \
            if (gluon_rl_.admit(                                                                  \
                    std::chrono::duration_cast<std::chrono::nanoseconds>(interval).count(),       \
                    gluon_dropped_)) {                                                            \
                ::gluon::log::write(::gluon::log::level::lvl, __VA_ARGS__);                       \
                if (gluon_dropped_)                                                               \
                    ::gluon::log::write(::gluon::log::level::lvl,                                 \
                                        "(previous message suppressed {} times)", gluon_dropped_); \
            }                                                                                     \
        }                                                                                         \
    } while (0)
