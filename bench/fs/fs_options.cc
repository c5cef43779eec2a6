#include "fs_options.h"

#include <charconv>
#include <cstdint>
#include <string_view>

namespace bench {
namespace {

// A number in lo..hi, digits only: strtoull took "-1" for 2^64 - 1 and "4x" for 4.
bool number_in(std::string_view v, size_t lo, size_t hi, size_t& out) {
    size_t n = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < lo || n > hi) return false;
    out = n;
    return true;
}

}  // namespace

std::string split_fs_fio_options(int argc, char** argv, fs_fio_options& x, std::vector<char*>& rest) {
    rest.assign(argv, argv + 1);
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        auto val = [&](std::string_view key, std::string_view& v) {
            if (a.substr(0, key.size()) != key) return false;
            v = a.substr(key.size());
            return true;
        };
        std::string_view v;
        if (val("--via=", v)) {
            x.via = v;
        } else if (val("--url=", v)) {
            x.url = v;
        } else if (val("--disk-cache=", v)) {
            x.disk_cache = v;
        } else if (val("--cache-mib=", v)) {
            // Its bytes (MiB << 20) must fit a size_t: 2^44 MiB wrapped to a cache of 0 bytes.
            if (!number_in(v, 0, SIZE_MAX >> 20, x.cache_mib)) return "bad --cache-mib: " + std::string(v);
        } else if (val("--block-kib=", v)) {
            // The cache's block sizes, 4 KiB .. 64 MiB (it checks the power of two): 2^54 + 4
            // KiB wrapped to a valid block of 4 KiB.
            if (!number_in(v, 4, 64 << 10, x.block_kib)) return "bad --block-kib: " + std::string(v) + " (4..65536)";
        } else if (val("--read-ahead=", v)) {
            // Blocks fetched ahead of a reader, each a request to the server: 4096 is plenty,
            // and the cache counts them in an int.
            if (!number_in(v, 0, 4096, x.read_ahead)) return "bad --read-ahead: " + std::string(v) + " (0..4096)";
        } else if (a == "--warm") {
            x.warm = true;
        } else if (a == "--drop-memory") {
            x.drop_memory = true;
        } else if (a == "--once") {
            x.once = true;
        } else {
            rest.push_back(argv[i]);
        }
    }
    return "";
}

}  // namespace bench
