// file_copy: copies a file or a directory tree with gluon's filesystem layer on io_uring (or
// any other file engine), reads running ahead of writes.
//
//   file_copy SRC DST [--engine=io_uring|libaio|posix_aio|psync|psync_inline] [--chunk=KiB]
//             [--depth=N] [--fsync]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "gluon/fs/copy.h"
#include "gluon/fs/local.h"
#include "gluon/fs/path.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

namespace {

int usage(const char* why) {
    std::fprintf(stderr,
                 "file_copy: %s\nusage: file_copy SRC DST [--engine=io_uring|libaio|posix_aio|psync|psync_inline]"
                 " [--chunk=KiB] [--depth=N] [--fsync]\n",
                 why);
    return 2;
}

std::string absolute(const char* p) {
    if (p[0] == '/') return p;
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return p;
    return gluon::fs::path::join(cwd, p);
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
            opts.chunk = std::strtoul(argv[i] + 8, nullptr, 10) * 1024;
            if (opts.chunk == 0) return usage("bad --chunk");
        } else if (a.rfind("--depth=", 0) == 0) {
            opts.depth = static_cast<unsigned>(std::strtoul(argv[i] + 8, nullptr, 10));
            if (opts.depth == 0) return usage("bad --depth");
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

    if (!gluon::init()) return 1;
    int rc = 0;
    auto f = gluon::spawn([&] {
        auto root = gluon::fs::open_local("/", engine);
        if (!root) {
            std::fprintf(stderr, "file_copy: engine %s: %s\n", gluon::file_io::kind_name(engine),
                         root.error().message().c_str());
            rc = 1;
            return;
        }
        auto& fs = **root;
        auto st = fs.stat(src);
        if (!st) {
            std::fprintf(stderr, "file_copy: %s: %s\n", src.c_str(), st.error().message().c_str());
            rc = 1;
            return;
        }
        const int64_t t0 = gluon::mono_now_ns();
        uint64_t last_report = 0;
        opts.progress = [&](uint64_t done, uint64_t) {
            if (done - last_report >= (256u << 20)) {
                last_report = done;
                std::fprintf(stderr, "  %llu MiB\n", static_cast<unsigned long long>(done >> 20));
            }
        };
        gluon::fs::copy_stats stats;
        if (S_ISDIR(st->st_mode)) {
            auto r = gluon::fs::copy_tree(fs, src, fs, dst, opts);
            if (!r) {
                std::fprintf(stderr, "file_copy: %s\n", r.error().message().c_str());
                rc = 1;
                return;
            }
            stats = *r;
        } else {
            auto r = gluon::fs::copy_file(fs, src, fs, dst, opts);
            if (!r) {
                std::fprintf(stderr, "file_copy: %s\n", r.error().message().c_str());
                rc = 1;
                return;
            }
            stats.files = 1;
            stats.bytes = *r;
        }
        const double s = static_cast<double>(gluon::mono_now_ns() - t0) / 1e9;
        std::printf("copied %llu files, %llu dirs, %llu symlinks, %.1f MiB in %.3f s (%.0f MiB/s, engine %s)\n",
                    static_cast<unsigned long long>(stats.files), static_cast<unsigned long long>(stats.dirs),
                    static_cast<unsigned long long>(stats.symlinks), static_cast<double>(stats.bytes) / (1 << 20), s,
                    static_cast<double>(stats.bytes) / (1 << 20) / (s > 0 ? s : 1), gluon::file_io::kind_name(engine));
    });
    if (!f || !f->join()) rc = 1;
    (void)gluon::fini();
    return rc;
}
