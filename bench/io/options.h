// gluon-fio's parameters (fio's names) and its report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gluon/file_io/file_engine.h"

namespace bench {

struct fio_options {
    std::string filename;
    bool random = true;
    bool write = false;
    size_t bs = 4096;
    unsigned iodepth = 1;
    bool direct = false;
    gluon::file_io::engine_kind engine = gluon::file_io::engine_kind::io_uring;
    uint64_t size = 1ULL << 30;
    double runtime_s = 10;
    int cpu = -1;
    bool fixedbufs = false;
    bool registerfiles = false;
    bool sqpoll = false;
    bool hugepages = false;  // I/O buffers on transparent huge pages
    bool lat = true;
    bool json = false;
};

struct fio_report {
    uint64_t ios = 0;
    double iops = 0, mib_s = 0, wall_s = 0, usr_s = 0, sys_s = 0;
    double lat_avg_us = 0, p50_us = 0, p99_us = 0;
};

/// Returns an error message, or "" on success.
std::string parse_fio_options(int argc, char** argv, fio_options& o);
const char* fio_usage();
void print_report(const fio_options& o, const fio_report& r);

}  // namespace bench
