// The HTTP server's monitoring counters: one block per thread (a vCPU serving connections),
// written by that thread without locked instructions, summed by metrics_text(). Blocks of
// threads that ended are reused by new threads, so totals never go backwards. Private.
#pragma once

#include <cstdint>

#include "gluon/common/relaxed_counter.h"

namespace gluon::http::detail {

struct http_counters {
    relaxed_counter connections_opened, connections_closed;
    relaxed_counter responses[6];  // [0]: other statuses, [1..5]: 1xx..5xx
    http_counters* next = nullptr; // the registry's list
};

/// The calling thread's block.
http_counters& local_http_counters() noexcept;

inline void count_response(int status) noexcept {
    int cls = status / 100;
    local_http_counters().responses[cls >= 1 && cls <= 5 ? cls : 0].add(1);
}

/// Sums of every block ever made (ended threads' included).
struct http_totals {
    uint64_t connections_opened = 0, connections_closed = 0;
    uint64_t responses[6] = {};
};
http_totals sum_http_counters();

}  // namespace gluon::http::detail
