#include "options.h"

#include <sched.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace bench {
namespace {

// A count with fio's suffixes k, m, g (binary: kb_base 1024, fio's default), optionally
// followed by i, b or B. Digits only before the suffix: strtoull took "-1" for 2^64 - 1, and a
// product past 2^64 wrapped; both are refused, as is anything over 2^63 - 1 (an off_t).
bool parse_size(std::string_view s, uint64_t& out) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc()) return false;
    std::string_view rest(p, static_cast<size_t>(s.data() + s.size() - p));
    uint64_t mult = 1;
    if (!rest.empty()) {
        switch (rest[0]) {
            case 'k': case 'K': mult = 1ULL << 10; rest.remove_prefix(1); break;
            case 'm': case 'M': mult = 1ULL << 20; rest.remove_prefix(1); break;
            case 'g': case 'G': mult = 1ULL << 30; rest.remove_prefix(1); break;
            default: break;
        }
    }
    if (!rest.empty() && (rest[0] == 'i' || rest[0] == 'b' || rest[0] == 'B')) rest.remove_prefix(1);
    if (!rest.empty() || v > static_cast<uint64_t>(INT64_MAX) / mult) return false;
    out = v * mult;
    return true;
}

// A time as fio reads one: seconds, or with a unit (us, ms, s, m, h, d); "1m" is a minute, not
// a second. Decimals are allowed. Up to a year, so that the end time stays in range.
bool parse_time(std::string_view s, double& seconds) {
    std::string str(s);
    char* end = nullptr;
    const double v = std::strtod(str.c_str(), &end);
    if (end == str.c_str() || !std::isfinite(v) || v <= 0 || std::isspace(static_cast<unsigned char>(str[0])))
        return false;
    const std::string_view unit(end);
    double scale;
    if (unit.empty() || unit == "s" || unit == "sec") scale = 1;
    else if (unit == "us" || unit == "usec") scale = 1e-6;
    else if (unit == "ms" || unit == "msec") scale = 1e-3;
    else if (unit == "m" || unit == "min") scale = 60;
    else if (unit == "h" || unit == "hr") scale = 3600;
    else if (unit == "d" || unit == "day") scale = 86400;
    else return false;
    seconds = v * scale;
    return seconds <= 366.0 * 86400;
}

}  // namespace

const char* fio_usage() {
    return "usage: gluon-fio --filename=PATH [--rw=randread|read|randwrite|write] [--bs=4k]\n"
           "       [--iodepth=1] [--direct=0|1] [--engine=io_uring|libaio|posix_aio|psync|psync_inline]\n"
           "       [--size=1g] [--runtime=10|500ms|2m] [--numjobs=1] [--cpu=N] [--fixedbufs] [--registerfiles]\n"
           "       [--sqpoll] [--hugepages] [--no-lat] [--json] [--quick]\n";
}

std::string parse_fio_options(int argc, char** argv, fio_options& o) {
    bool quick = false, size_set = false, runtime_set = false;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a.substr(0, 2) != "--") return "unexpected argument " + std::string(a);
        a.remove_prefix(2);
        auto eq = a.find('=');
        std::string_view key = a.substr(0, eq);
        std::string val = eq == std::string_view::npos ? "" : std::string(a.substr(eq + 1));
        uint64_t n = 0;
        if (key == "filename") {
            o.filename = val;
        } else if (key == "rw") {
            if (val == "randread") o.random = true, o.write = false;
            else if (val == "read") o.random = false, o.write = false;
            else if (val == "randwrite") o.random = true, o.write = true;
            else if (val == "write") o.random = false, o.write = true;
            else return "bad --rw: " + val;
        } else if (key == "bs") {
            if (!parse_size(val, n) || n == 0 || n > (64u << 20)) return "bad --bs: " + val;
            o.bs = n;
        } else if (key == "iodepth") {
            if (!parse_size(val, n) || n == 0 || n > 4096) return "bad --iodepth: " + val;
            o.iodepth = static_cast<unsigned>(n);
        } else if (key == "direct") {
            if (val != "0" && val != "1") return "bad --direct: " + val + " (0 or 1)";
            o.direct = val == "1";
        } else if (key == "engine" || key == "ioengine") {
            auto k = gluon::file_io::parse_kind(val);
            if (!k) return "unknown engine: " + val;
            o.engine = *k;
        } else if (key == "size") {
            if (!parse_size(val, n) || n == 0) return "bad --size: " + val;
            o.size = n;
            size_set = true;
        } else if (key == "runtime") {
            if (!parse_time(val, o.runtime_s)) return "bad --runtime: " + val;
            runtime_set = true;
        } else if (key == "numjobs") {
            if (val != "1") return "only --numjobs=1 is supported (one vCPU, iodepth fibers)";
        } else if (key == "cpu") {
            auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), o.cpu);
            if (ec != std::errc() || p != val.data() + val.size() || o.cpu < 0 || o.cpu >= CPU_SETSIZE)
                return "bad --cpu: " + val;
        } else if (key == "fixedbufs") {
            o.fixedbufs = true;
        } else if (key == "registerfiles") {
            o.registerfiles = true;
        } else if (key == "sqpoll" || key == "sqthread_poll") {
            o.sqpoll = true;
        } else if (key == "hugepages") {
            o.hugepages = true;
        } else if (key == "no-lat") {
            o.lat = false;
        } else if (key == "json") {
            o.json = true;
        } else if (key == "quick") {
            quick = true;
        } else {
            return "unknown option --" + std::string(key);
        }
    }
    if (o.filename.empty()) return "--filename is required";
    if (quick) {
        if (!size_set) o.size = 64ULL << 20;
        if (!runtime_set) o.runtime_s = 1;
    }
    if (o.size < o.bs) return "--size is smaller than --bs";
    if (o.direct && o.bs % 512 != 0) return "--direct=1 needs --bs to be a multiple of 512";
    return "";
}

void print_report(const fio_options& o, const fio_report& r) {
    const double cpu_us_per_io = r.ios ? (r.usr_s + r.sys_s) * 1e6 / static_cast<double>(r.ios) : 0;
    if (o.json) {
        std::printf("{\"ios\":%llu,\"iops\":%.0f,\"mib_s\":%.2f,\"wall_s\":%.3f,\"usr_s\":%.3f,"
                    "\"sys_s\":%.3f,\"cpu_us_per_io\":%.3f,\"lat_avg_us\":%.2f,\"p50_us\":%.2f,"
                    "\"p99_us\":%.2f}\n",
                    static_cast<unsigned long long>(r.ios), r.iops, r.mib_s, r.wall_s, r.usr_s,
                    r.sys_s, cpu_us_per_io, r.lat_avg_us, r.p50_us, r.p99_us);
        return;
    }
    const char* dir = o.write ? "write" : "read";
    std::printf("gluon-fio: rw=%s%s bs=%zu iodepth=%u direct=%d engine=%s size=%lluMiB\n",
                o.random ? "rand" : "", dir, o.bs, o.iodepth, o.direct ? 1 : 0,
                gluon::file_io::kind_name(o.engine), static_cast<unsigned long long>(o.size >> 20));
    std::printf("  %s: IOPS=%.1fk, BW=%.1fMiB/s (%llu ios in %.2fs)\n", dir, r.iops / 1e3, r.mib_s,
                static_cast<unsigned long long>(r.ios), r.wall_s);
    if (o.lat)
        std::printf("    lat (usec): avg=%.1f, p50=%.1f, p99=%.1f\n", r.lat_avg_us, r.p50_us, r.p99_us);
    std::printf("  cpu: usr=%.1f%%, sys=%.1f%%, %.2f cpu-us per io\n", 100 * r.usr_s / r.wall_s,
                100 * r.sys_s / r.wall_s, cpu_us_per_io);
}

}  // namespace bench
