#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace echo_bench {
namespace {

bool parse_long(const char* s, long lo, long hi, long& out) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}

bool parse_seconds(const char* s, double& out) {
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !std::isfinite(v) || v < 0 || v > 86400)
        return false;
    out = v;
    return true;
}

}  // namespace

const char* usage_text() {
    return "usage: echo_client --port N [--host 127.0.0.1] [--conns C] [--size BYTES]\n"
           "                   [--duration SECONDS] [--warmup SECONDS]\n"
           "                   [--mode streaming|pingpong] [--json] [--cpu-pid PID]\n";
}

const char* mode_name(Mode m) { return m == Mode::streaming ? "streaming" : "pingpong"; }

bool parse_options(int argc, char** argv, Options& o, std::string& err) {
    for (int i = 1; i < argc; ++i) {
        std::string name = argv[i];
        if (name == "--json") {
            o.json = true;
            continue;
        }
        if (name == "--help" || name == "-h") {
            err = "";
            return false;
        }
        static const char* const valued[] = {"--host",     "--port",   "--conns",  "--size",
                                             "--duration", "--warmup", "--cpu-pid", "--mode"};
        if (std::none_of(std::begin(valued), std::end(valued),
                         [&](const char* k) { return name == k; })) {
            err = "unknown option " + name;
            return false;
        }
        if (i + 1 >= argc) {
            err = "missing value for " + name;
            return false;
        }
        const char* v = argv[++i];
        long n = 0;
        bool ok = true;
        if (name == "--host") {
            o.host = v;
        } else if (name == "--port") {
            ok = parse_long(v, 1, 65535, n);
            o.port = static_cast<int>(n);
        } else if (name == "--conns") {
            ok = parse_long(v, 1, 1000000, n);
            o.conns = static_cast<int>(n);
        } else if (name == "--size") {
            ok = parse_long(v, 1, 1L << 30, n);
            o.size = static_cast<std::size_t>(n);
        } else if (name == "--duration") {
            ok = parse_seconds(v, o.duration_s) && o.duration_s > 0;
        } else if (name == "--warmup") {
            ok = parse_seconds(v, o.warmup_s);
        } else if (name == "--cpu-pid") {
            ok = parse_long(v, 1, 1L << 30, n);
            o.cpu_pid = static_cast<int>(n);
        } else if (name == "--mode") {
            if (std::strcmp(v, "streaming") == 0)
                o.mode = Mode::streaming;
            else if (std::strcmp(v, "pingpong") == 0)
                o.mode = Mode::pingpong;
            else
                ok = false;
        }
        if (!ok) {
            err = "bad value for " + name + ": " + v;
            return false;
        }
    }
    if (o.port == 0) {
        err = "--port is required";
        return false;
    }
    return true;
}

}  // namespace echo_bench
