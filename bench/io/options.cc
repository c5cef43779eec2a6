#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace bench {
namespace {

bool parse_size(std::string_view s, uint64_t& out) {
    if (s.empty()) return false;
    char* end = nullptr;
    std::string str(s);
    unsigned long long v = std::strtoull(str.c_str(), &end, 10);
    uint64_t mult = 1;
    switch (*end) {
        case 'k': case 'K': mult = 1ULL << 10; ++end; break;
        case 'm': case 'M': mult = 1ULL << 20; ++end; break;
        case 'g': case 'G': mult = 1ULL << 30; ++end; break;
        default: break;
    }
    if (*end == 'i' || *end == 'b' || *end == 'B') ++end;
    if (*end != '\0' || end == str.c_str()) return false;
    out = v * mult;
    return true;
}

}  // namespace

const char* fio_usage() {
    return "usage: gluon-fio --filename=PATH [--rw=randread|read|randwrite|write] [--bs=4k]\n"
           "       [--iodepth=1] [--direct=0|1] [--engine=io_uring|libaio|posix_aio|psync|psync_inline]\n"
           "       [--size=1g] [--runtime=10] [--numjobs=1] [--cpu=N] [--fixedbufs] [--registerfiles]\n"
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
            o.runtime_s = std::atof(val.c_str());
            if (o.runtime_s <= 0) return "bad --runtime: " + val;
            runtime_set = true;
        } else if (key == "numjobs") {
            if (val != "1") return "only --numjobs=1 is supported (one vCPU, iodepth fibers)";
        } else if (key == "cpu") {
            o.cpu = std::atoi(val.c_str());
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
