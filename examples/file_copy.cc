// file_copy: copies a file or a directory tree with gluon's filesystem layer on io_uring (or
// any other file engine), reads running ahead of writes.
//
//   file_copy SRC DST [--engine=io_uring|libaio|posix_aio|psync|psync_inline] [--chunk=KiB]
//             [--depth=N] [--fsync]
//
// --chunk is at most 1048576 (1 GiB), --depth at most 4096.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "gluon/fs/copy.h"
#include "gluon/fs/local.h"
#include "gluon/fs/path.h"
#include "gluon/runtime/vcpu.h"

namespace {

int usage(const char* why) {
    std::fprintf(stderr,
                 "file_copy: %s\nusage: file_copy SRC DST [--engine=io_uring|libaio|posix_aio|psync|psync_inline]"
                 " [--chunk=KiB (1..1048576)] [--depth=N (1..4096)] [--fsync]\n",
                 why);
    return 2;
}

// A number in lo..hi, digits only: strtoul took "-1" for ULONG_MAX and "4x" for 4.
bool number_in(std::string_view v, unsigned long long lo, unsigned long long hi, unsigned long long& out) {
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return ec == std::errc() && p == v.data() + v.size() && out >= lo && out <= hi;
}

std::string absolute(const char* p) {
    if (p[0] == '/') return p;
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return p;
    return gluon::fs::path::join(cwd, p);
}

// Copies src to dst (a file or a tree), printing progress every 256 MiB and a summary.
gluon::result<void> copy(const std::string& src, const std::string& dst,
                         gluon::file_io::engine_kind engine, gluon::fs::copy_options opts) {
    auto root = GLUON_TRY(gluon::fs::open_local("/", engine));
    auto& fs = *root;
    auto st = GLUON_TRY(fs.stat(src));
    const int64_t t0 = gluon::mono_now_ns();
    uint64_t last_report = 0;
    opts.progress = [&](uint64_t done, uint64_t) {
        if (done - last_report >= (256u << 20)) {
            last_report = done;
            std::fprintf(stderr, "  %llu MiB\n", static_cast<unsigned long long>(done >> 20));
        }
    };
    gluon::fs::copy_stats stats;
    if (S_ISDIR(st.st_mode)) {
        stats = GLUON_TRY(gluon::fs::copy_tree(fs, src, fs, dst, opts));
    } else {
        stats.bytes = GLUON_TRY(gluon::fs::copy_file(fs, src, fs, dst, opts));
        stats.files = 1;
    }
    const double s = static_cast<double>(gluon::mono_now_ns() - t0) / 1e9;
    const double mib = static_cast<double>(stats.bytes) / (1 << 20);
    std::printf("copied %llu files, %llu dirs, %llu symlinks, %.1f MiB in %.3f s (%.0f MiB/s, engine %s)\n",
                static_cast<unsigned long long>(stats.files), static_cast<unsigned long long>(stats.dirs),
                static_cast<unsigned long long>(stats.symlinks), mib, s, mib / (s > 0 ? s : 1),
                gluon::file_io::kind_name(engine));
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    std::string src, dst;
    gluon::file_io::engine_kind engine = gluon::file_io::engine_kind::io_uring;
    gluon::fs::copy_options opts;
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a.rfind("--engine=", 0) == 0) {
            auto k = gluon::file_io::parse_kind(a.substr(9));
            if (!k) return usage("unknown engine");
            engine = *k;
        } else if (a.rfind("--chunk=", 0) == 0) {
            // Up to 1 GiB (as task_file_copy): more gains nothing, and its KiB could wrap size_t.
            unsigned long long kib;
            if (!number_in(a.substr(8), 1, 1ULL << 20, kib)) return usage("bad --chunk");
            opts.chunk = static_cast<size_t>(kib) * 1024;
        } else if (a.rfind("--depth=", 0) == 0) {
            unsigned long long depth;
            if (!number_in(a.substr(8), 1, 4096, depth)) return usage("bad --depth");
            opts.depth = static_cast<unsigned>(depth);
        } else if (a == "--fsync") {
            opts.fsync = true;
        } else if (a.rfind("--", 0) == 0) {
            return usage("unknown option");
        } else if (src.empty()) {
            src = absolute(argv[i]);
        } else if (dst.empty()) {
            dst = absolute(argv[i]);
        } else {
            return usage("too many arguments");
        }
    }
    if (dst.empty()) return usage("SRC and DST are required");

    // main runs as a vCPU's main fiber for the length of copy(): no extra fiber needed.
    auto r = gluon::run({}, [&] { return copy(src, dst, engine, opts); });
    if (!r) {
        std::fprintf(stderr, "file_copy: %s -> %s (engine %s): %s\n", src.c_str(), dst.c_str(),
                     gluon::file_io::kind_name(engine), r.error().message().c_str());
        return 1;
    }
    return 0;
}
