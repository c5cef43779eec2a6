// Runtime counters for monitoring (http::metrics_handler exports them for Prometheus). Each vCPU
// keeps its own, written without locked instructions and read here with relaxed loads: every
// value is one the vCPU had a moment ago, and counters never go backwards.
#pragma once

#include <cstdint>
#include <vector>

namespace gluon {

struct vcpu_stats {
    int index = -1;               // as current_vcpu_index()
    const char* engine = "";      // "io_uring" or "epoll"
    uint64_t fibers_live = 0;     // fibers on this vCPU now (its main fiber not counted)
    uint64_t fibers_created = 0;  // since the vCPU started
    uint64_t run_queue = 0;       // ready fibers, sampled every 20 ms (up to 1024)
    uint64_t uptime_ns = 0;       // since init()
    uint64_t busy_ns = 0;         // of uptime_ns, the vCPU thread's CPU time (user and kernel)
    uint64_t engine_ops = 0;      // I/O operations run through the engine (completed or failed)
    uint64_t engine_errors = 0;   // of those, the ones that failed (timeouts and cancels included)
    uint64_t bytes_in = 0;        // read or received by those operations
    uint64_t bytes_out = 0;       // written or sent by them
};

/// The counters of every vCPU alive, by index. Any thread. Errors: none (an allocation
/// failure throws std::bad_alloc).
std::vector<vcpu_stats> vcpu_statistics();

}  // namespace gluon
