// gluon-fs-fio's own options, taken out of its command line before gluon-fio's are read.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace bench {

struct fs_fio_options {
    std::string via = "local", url, disk_cache;
    size_t cache_mib = 1024, block_kib = 1024, read_ahead = 4;
    bool warm = false, drop_memory = false, once = false;
};

/// Takes gluon-fs-fio's options out of argv (argv[0] first) into x, and the rest, gluon-fio's,
/// into rest (argv[0] first). Returns an error message, or "" on success.
std::string split_fs_fio_options(int argc, char** argv, fs_fio_options& x, std::vector<char*>& rest);

}  // namespace bench
