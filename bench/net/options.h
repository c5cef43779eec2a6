// Command-line options of the echo load generator.
#pragma once

#include <cstddef>
#include <string>

namespace echo_bench {

enum class Mode { streaming, pingpong };

struct Options {
    std::string host = "127.0.0.1";
    int port = 0;  // required
    int conns = 1;
    std::size_t size = 512;  // message bytes
    double duration_s = 5.0;
    double warmup_s = 1.0;
    Mode mode = Mode::streaming;
    bool json = false;
    int cpu_pid = 0;  // 0: do not sample server CPU
};

// Parses argv into opts.  On error returns false and sets err.
bool parse_options(int argc, char** argv, Options& opts, std::string& err);

const char* usage_text();

const char* mode_name(Mode m);

}  // namespace echo_bench
