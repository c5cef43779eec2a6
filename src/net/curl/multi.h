// The per-vCPU libcurl multi handle and the fiber that drives it (ADR 0008). Private to
// src/net/curl; everything here runs on the owning vCPU's thread.
#pragma once

#include <curl/curl.h>

#include <system_error>
#include <unordered_map>

#include "gluon/common/clock.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/common/result.h"
#include "gluon/engine/engine.h"
#include "gluon/runtime/prim_lock.h"
#include "gluon/runtime/waiter.h"

namespace gluon::net::curl::detail {

class multi;

/// One socket libcurl asked us to watch: a poll op on the engine, re-armed after each event.
/// Freed only by the driver's sweep, so a pointer stays valid across any libcurl call.
struct watch {
    engine::io_op op;
    list_hook all_hook;  // multi::watches_
    list_hook ready_hook;  // multi::ready_: has events (or needs re-arming) for the driver
    multi* owner = nullptr;
    curl_socket_t fd = CURL_SOCKET_BAD;
    short want = 0;  // poll events libcurl asked for
    short revents = 0;  // seen, not yet reported to libcurl
    bool in_flight = false;  // op is submitted and its completion has not arrived
    bool removed = false;  // libcurl said CURL_POLL_REMOVE: waits for the sweep
};

/// A perform() in progress; lives on the caller's stack.
struct transfer {
    enum class state { running, finished, detached };
    CURL* easy = nullptr;
    CURLcode code = CURLE_OK;
    state st = state::running;
    prim_lock lk;
    waiter_list q;
    waiter w;  // the caller's
};

class multi {
public:
    // Out-parameters rather than result<T>: these sit on perform()'s noexcept path, and
    // result's accessors are not noexcept.

    /// The calling vCPU's multi, created with its driver fiber on first use; nullptr and err
    /// set on failure. Errors: ENOMEM, EPERM (not a vCPU), and those of spawn().
    static multi* for_current_vcpu(std::error_code& err) noexcept;

    /// Adds easy, parks until it finishes, the deadline passes or the caller is interrupted, and
    /// leaves easy out of the multi handle in every case. On success (an empty error) `code` is
    /// the transfer's CURLcode. Errors: ETIMEDOUT, ECANCELED, EDEADLK (called from a libcurl
    /// callback), ENOMEM, or a CURLMcode in multi_category().
    std::error_code run(CURL* easy, deadline_t deadline, CURLcode& code) noexcept;

    multi(const multi&) = delete;
    multi& operator=(const multi&) = delete;

private:
    multi(CURLM* h, engine::engine* eng) noexcept : handle_(h), eng_(eng) {}
    ~multi();

    static int on_socket(CURL* easy, curl_socket_t s, int what, void* self, void* socketp) noexcept;
    static int on_timer(CURLM* h, long timeout_ms, void* self) noexcept;
    static void on_poll(engine::io_op* op, long result) noexcept;

    void drive() noexcept;
    void shutdown() noexcept;
    void dispatch_ready() noexcept;
    void action(curl_socket_t s, int ev_bitmask) noexcept;
    void collect_done() noexcept;
    void sweep() noexcept;
    void arm(watch& w) noexcept;
    void queue(watch& w) noexcept;
    void notify() noexcept;
    long sleep_until(deadline_t deadline) noexcept;
    static void finish(transfer& t, long result) noexcept;

    CURLM* handle_;
    engine::engine* eng_;
    uint64_t driver_id_ = 0;
    deadline_t timer_ = k_no_deadline;  // libcurl's timeout, as a deadline
    std::unordered_map<CURL*, transfer*> transfers_;
    intrusive_list<watch, &watch::all_hook> watches_;
    intrusive_list<watch, &watch::ready_hook> ready_;
    size_t in_flight_ = 0;  // poll ops whose completion is still to come
    // The driver's sleep: notify() wakes it, or makes its next sleep return at once.
    prim_lock lk_;
    waiter_list sleeper_;
    bool poked_ = false;
};

} // namespace gluon::net::curl::detail
