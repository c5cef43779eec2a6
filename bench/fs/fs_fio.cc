// gluon-fs-fio: gluon-fio's reads made through a gluon filesystem instead of a file engine:
// the local filesystem, the HTTP filesystem (every read a Range request), or the cache
// filesystem in front of the HTTP one, cold or warmed (in memory, or on disk only).
//
//   gluon-fs-fio --via=local|http|cache --filename=F [--url=URL] --rw=randread|read --bs=4k
//                --iodepth=16 --size=256m --runtime=4 [--cache-mib=N] [--block-kib=N]
//                [--disk-cache=DIR] [--read-ahead=N] [--warm] [--drop-memory] [--once] [--json]
//
// F is laid out (stamped) as gluon-fio does; with --via=http|cache the same bytes are read from
// URL (a server serving F). Every read is checked: a failed or short read, or a wrong stamp,
// aborts the run. --once ends a sequential run at the end of the file (a cold pass).
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gluon/fs/cache.h"
#include "gluon/fs/http.h"
#include "gluon/fs/local.h"
#include "gluon/fs/path.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "fs/fs_options.h"
#include "io/layout.h"
#include "io/options.h"

using namespace gluon;

namespace {

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "gluon-fs-fio: error: %s\n", msg.c_str());
    std::exit(1);
}

struct run_state {
    const bench::fio_options* o;
    fs::file* f;
    uint64_t blocks;
    int64_t end_ns;
    bool once;
    uint64_t next_seq = 0;
    uint64_t ios = 0;
};

void worker(run_state* s, unsigned idx, char* buf) {
    const auto& o = *s->o;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (idx + 1);
    for (uint64_t n = 0;; ++n) {
        if ((n & 15) == 0 && mono_now_ns() >= s->end_ns) return;
        uint64_t blk;
        if (o.random) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            blk = rng % s->blocks;
        } else {
            if (s->once && s->next_seq >= s->blocks) return;
            blk = s->next_seq++ % s->blocks;
        }
        const int64_t off = static_cast<int64_t>(blk * o.bs);
        auto r = s->f->pread(buf, o.bs, off);
        if (!r) die("read at " + std::to_string(off) + " failed: " + r.error().message());
        if (*r != o.bs) die("short read of " + std::to_string(*r) + " bytes at " + std::to_string(off));
        if (!bench::check_stamp(buf, o.bs, off)) die("data check failed at offset " + std::to_string(off));
        ++s->ios;
    }
}

double seconds_between(const timeval& x, const timeval& y) {
    return static_cast<double>(y.tv_sec - x.tv_sec) + static_cast<double>(y.tv_usec - x.tv_usec) / 1e6;
}

result<std::unique_ptr<fs::filesystem>> make_fs(const bench::fio_options& o, const bench::fs_fio_options& x) {
    if (x.via == "local") return fs::open_local(fs::path::dirname(o.filename), o.engine);
    if (x.url.empty()) return errno_error(EINVAL);
    fs::http_fs_options h;
    h.files = {{fs::path::basename(o.filename).data(), x.url}};
    h.client.max_idle_per_origin = o.iodepth + 4;
    auto http = GLUON_TRY(fs::make_http_filesystem(std::move(h)));
    if (x.via == "http") return http;
    if (x.via != "cache") return errno_error(EINVAL);
    return fs::make_cached(std::move(http), {.block_size = x.block_kib << 10,
                                             .memory_bytes = x.cache_mib << 20,
                                             .disk_dir = x.disk_cache,
                                             .read_ahead_blocks = x.read_ahead});
}

}  // namespace

int main(int argc, char** argv) {
    bench::fs_fio_options x;
    bench::fio_options o;
    std::vector<char*> rest;
    if (auto err = bench::split_fs_fio_options(argc, argv, x, rest); !err.empty()) die(err);
    if (auto err = bench::parse_fio_options(static_cast<int>(rest.size()), rest.data(), o); !err.empty())
        die(err);
    if (o.write) die("reads only");
    if (auto r = bench::layout(o); !r.empty()) die(r);
    std::string name(fs::path::basename(o.filename));

    auto r = run({.log_engine = false}, [&]() -> result<void> {
        auto filesystem = GLUON_TRY(make_fs(o, x));
        auto f = GLUON_TRY(filesystem->open(name, O_RDONLY));
        std::vector<std::string> bufs(o.iodepth, std::string(o.bs, '\0'));
        if (x.warm) {  // one untimed pass over the file
            std::string chunk(1 << 20, '\0');
            for (uint64_t off = 0; off < o.size; off += chunk.size())
                GLUON_TRY(f->pread(chunk.data(), std::min<uint64_t>(chunk.size(), o.size - off), off));
            // Let the read-ahead of the last blocks land before the clock starts.
            for (int i = 0; i < 100 && fs::cache_statistics(*filesystem).memory_bytes < o.size &&
                            fs::cache_statistics(*filesystem).memory_bytes < (x.cache_mib << 20) - (x.block_kib << 11);
                 ++i)
                (void)this_fiber::sleep_for(std::chrono::milliseconds(10));
            if (x.drop_memory) fs::cache_drop_memory(*filesystem);
        }
        run_state s{&o, f.get(), o.size / o.bs, 0, x.once};
        rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        const int64_t t0 = mono_now_ns();
        s.end_ns = t0 + static_cast<int64_t>(o.runtime_s * 1e9);
        std::vector<fiber> fibers;
        for (unsigned i = 0; i < o.iodepth; ++i) fibers.push_back(GLUON_TRY(spawn(worker, &s, i, bufs[i].data())));
        for (auto& fb : fibers) (void)fb.join();
        const double wall = static_cast<double>(mono_now_ns() - t0) / 1e9;
        getrusage(RUSAGE_SELF, &ru1);
        bench::fio_report rep;
        rep.ios = s.ios;
        rep.iops = static_cast<double>(s.ios) / wall;
        rep.mib_s = rep.iops * static_cast<double>(o.bs) / (1024.0 * 1024.0);
        rep.wall_s = wall;
        rep.usr_s = seconds_between(ru0.ru_utime, ru1.ru_utime);
        rep.sys_s = seconds_between(ru0.ru_stime, ru1.ru_stime);
        o.lat = false;
        bench::print_report(o, rep);
        if (!o.json && x.via == "cache") {
            auto st = fs::cache_statistics(*filesystem);
            std::printf("  cache: %llu hits, %llu disk hits, %llu misses, %llu read ahead\n",
                        static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.disk_hits),
                        static_cast<unsigned long long>(st.misses), static_cast<unsigned long long>(st.read_ahead));
        }
        return {};
    });
    if (!r) die(r.error().message());
    return 0;
}
