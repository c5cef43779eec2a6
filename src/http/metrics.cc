#include "gluon/http/metrics.h"

#include <charconv>
#include <mutex>

#include "gluon/http/message.h"
#include "gluon/runtime/stats.h"
#include "http_counters.h"

namespace gluon::http {

namespace detail {

namespace {

std::mutex g_mu;
http_counters* g_all = nullptr;  // every block, never freed

// Blocks of threads that ended, for the next new thread.
struct free_entry {
    http_counters* c;
    free_entry* next;
};
free_entry* g_free_list = nullptr;

struct holder {
    http_counters* c = nullptr;
    ~holder() {
        if (!c) return;
        std::lock_guard g(g_mu);
        g_free_list = new free_entry{c, g_free_list};
    }
};

}  // namespace

http_counters& local_http_counters() noexcept {
    thread_local holder h;
    if (!h.c) [[unlikely]] {
        std::lock_guard g(g_mu);
        if (g_free_list) {
            free_entry* e = g_free_list;
            g_free_list = e->next;
            h.c = e->c;
            delete e;
        } else {
            h.c = new http_counters;
            h.c->next = g_all;
            g_all = h.c;
        }
    }
    return *h.c;
}

http_totals sum_http_counters() {
    http_totals t;
    std::lock_guard g(g_mu);
    for (http_counters* c = g_all; c; c = c->next) {
        t.connections_opened += c->connections_opened.get();
        t.connections_closed += c->connections_closed.get();
        for (int i = 0; i < 6; ++i) t.responses[i] += c->responses[i].get();
    }
    return t;
}

}  // namespace detail

namespace {

void number(std::string& out, uint64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void seconds(std::string& out, uint64_t ns) {
    number(out, ns / 1'000'000'000);
    char frac[16];
    auto r = std::to_chars(frac, frac + sizeof frac, 1'000'000'000 + ns % 1'000'000'000);
    out += '.';
    out.append(frac + 1, r.ptr);  // nine digits
}

void family(std::string& out, const char* name, const char* type, const char* help) {
    out += "# HELP ";
    out += name;
    out += ' ';
    out += help;
    out += "\n# TYPE ";
    out += name;
    out += ' ';
    out += type;
    out += '\n';
}

template <typename F>
void per_vcpu(std::string& out, const std::vector<vcpu_stats>& vs, const char* name, const char* type,
              const char* help, F value) {
    family(out, name, type, help);
    for (const auto& v : vs) {
        out += name;
        out += "{vcpu=\"";
        number(out, static_cast<uint64_t>(v.index));
        out += "\",engine=\"";
        out += v.engine;
        out += "\"} ";
        value(out, v);
        out += '\n';
    }
}

}  // namespace

std::string metrics_text() {
    std::string out;
    out.reserve(4096);
    const auto vs = vcpu_statistics();
    using V = const vcpu_stats&;
    per_vcpu(out, vs, "gluon_fibers_live", "gauge", "Fibers alive on the vCPU.",
             [](std::string& o, V v) { number(o, v.fibers_live); });
    per_vcpu(out, vs, "gluon_fibers_created_total", "counter", "Fibers created on the vCPU.",
             [](std::string& o, V v) { number(o, v.fibers_created); });
    per_vcpu(out, vs, "gluon_run_queue_length", "gauge", "Ready fibers on the vCPU (sampled every 20 ms, up to 1024).",
             [](std::string& o, V v) { number(o, v.run_queue); });
    per_vcpu(out, vs, "gluon_vcpu_busy_seconds_total", "counter",
             "CPU time of the vCPU's thread (user and kernel).",
             [](std::string& o, V v) { seconds(o, v.busy_ns); });
    per_vcpu(out, vs, "gluon_vcpu_uptime_seconds_total", "counter", "Time since the vCPU started.",
             [](std::string& o, V v) { seconds(o, v.uptime_ns); });
    per_vcpu(out, vs, "gluon_engine_operations_total", "counter", "I/O operations run through the engine.",
             [](std::string& o, V v) { number(o, v.engine_ops); });
    per_vcpu(out, vs, "gluon_engine_errors_total", "counter",
             "Engine operations that failed (timeouts and cancellations included).",
             [](std::string& o, V v) { number(o, v.engine_errors); });
    per_vcpu(out, vs, "gluon_received_bytes_total", "counter", "Bytes read or received by engine operations.",
             [](std::string& o, V v) { number(o, v.bytes_in); });
    per_vcpu(out, vs, "gluon_sent_bytes_total", "counter", "Bytes written or sent by engine operations.",
             [](std::string& o, V v) { number(o, v.bytes_out); });

    const auto t = detail::sum_http_counters();
    family(out, "gluon_http_connections_open", "gauge", "HTTP server connections open.");
    out += "gluon_http_connections_open ";
    number(out, t.connections_opened >= t.connections_closed ? t.connections_opened - t.connections_closed : 0);
    out += '\n';
    family(out, "gluon_http_connections_total", "counter", "HTTP server connections accepted.");
    out += "gluon_http_connections_total ";
    number(out, t.connections_opened);
    out += '\n';
    family(out, "gluon_http_responses_total", "counter", "HTTP responses by status class.");
    static const char* const k_class[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 1; i <= 6; ++i) {
        out += "gluon_http_responses_total{class=\"";
        out += k_class[i % 6];
        out += "\"} ";
        number(out, t.responses[i % 6]);
        out += '\n';
    }
    return out;
}

handler metrics_handler() {
    return [](request&, response& res) {
        res.content_type("text/plain; version=0.0.4; charset=utf-8");
        res.body(metrics_text());
    };
}

}  // namespace gluon::http
