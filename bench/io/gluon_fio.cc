// gluon-fio: a fio-like file I/O benchmark on gluon's file engines, with fio's parameter names
// and a comparable summary, so `bench/run io` can put the two side by side.
//
//   gluon-fio --filename=F --rw=randread --bs=4k --iodepth=16 --direct=1 --engine=io_uring
//             --size=2g --runtime=10 [--fixedbufs] [--registerfiles] [--sqpoll] [--hugepages]
//             [--no-lat] [--json]
//
// iodepth N is N fibers each issuing one blocking call at a time on one vCPU: the engine
// batches their submissions into one io_uring_enter per scheduler pass. Every I/O is checked:
// a failed or short transfer aborts the run, and reads check the block's stamp written at
// layout time (each 4 KiB block starts with its own index).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gluon/file_io/file_engine.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "layout.h"
#include "options.h"

using namespace gluon;

namespace {

struct job_stats {
    uint64_t ios = 0;
    uint64_t lat_sum_ns = 0;
    std::vector<uint64_t> lat_hist = std::vector<uint64_t>(64 * 8, 0);  // log2 x 8 sub-buckets
};

inline int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

inline unsigned bucket(uint64_t ns) {
    if (ns < 8) return static_cast<unsigned>(ns);
    unsigned lg = 63 - static_cast<unsigned>(__builtin_clzll(ns));
    unsigned sub = static_cast<unsigned>((ns >> (lg - 3)) & 7);
    return std::min(lg * 8 + sub, 64u * 8 - 1);
}

inline double bucket_value(unsigned b) {
    if (b < 8) return b;
    unsigned lg = b / 8, sub = b % 8;
    return static_cast<double>((8ULL + sub) << (lg - 3));
}

double percentile(const job_stats& s, double p) {
    uint64_t want = static_cast<uint64_t>(static_cast<double>(s.ios) * p);
    uint64_t seen = 0;
    for (unsigned b = 0; b < s.lat_hist.size(); ++b) {
        seen += s.lat_hist[b];
        if (seen > want) return bucket_value(b);
    }
    return 0;
}

[[noreturn]] void die(const std::string& msg) {
    std::fprintf(stderr, "gluon-fio: error: %s\n", msg.c_str());
    std::exit(1);
}

struct worker_ctx {
    const bench::fio_options* o;
    file_io::file_engine* eng;
    int fd;  // or the registered file index
    bool fixed_file;
    int64_t end_ns;
    uint64_t blocks;
    job_stats* stats;
    uint64_t next_seq = 0;  // sequential modes: one stream shared by all fibers, as fio does
};

void worker(worker_ctx* c, unsigned idx, char* buf) {
    const auto& o = *c->o;
    uint64_t rng = 0x9E3779B97F4A7C15ULL * (idx + 1);
    engine::io_op op;
    for (uint64_t n = 0;; ++n) {
        if ((n & 15) == 0 && now_ns() >= c->end_ns) return;
        uint64_t blk;
        if (o.random) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            blk = rng % c->blocks;
        } else {
            blk = c->next_seq++ % c->blocks;
        }
        const int64_t off = static_cast<int64_t>(blk * o.bs);
        if (o.write) bench::stamp(buf, o.bs, off);
        if (o.fixedbufs)  // registered buffer `idx`
            op = engine::io_op::fixed(o.write ? engine::opcode::write_fixed : engine::opcode::read_fixed, c->fd, buf,
                                      o.bs, off, static_cast<int>(idx));
        else
            op = engine::io_op::transfer(o.write ? engine::opcode::write : engine::opcode::read, c->fd, buf, o.bs, off);
        op.fixed_file = c->fixed_file;
        const int64_t t0 = o.lat ? now_ns() : 0;
        long r = c->eng->execute(op);
        if (r < 0) die(std::string("I/O failed: ") + std::strerror(static_cast<int>(-r)));
        if (static_cast<size_t>(r) != o.bs) die("short transfer of " + std::to_string(r) + " bytes");
        if (!o.write && !bench::check_stamp(buf, o.bs, off))
            die("data check failed at offset " + std::to_string(off) + " (file not laid out by gluon-fio?)");
        if (o.lat) {
            uint64_t d = static_cast<uint64_t>(now_ns() - t0);
            c->stats->lat_sum_ns += d;
            ++c->stats->lat_hist[bucket(d)];
        }
        ++c->stats->ios;
    }
}

double cpu_seconds(const rusage& a, const rusage& b, bool user) {
    const timeval& x = user ? a.ru_utime : a.ru_stime;
    const timeval& y = user ? b.ru_utime : b.ru_stime;
    return static_cast<double>(y.tv_sec - x.tv_sec) + static_cast<double>(y.tv_usec - x.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
    bench::fio_options o;
    if (auto err = bench::parse_fio_options(argc, argv, o); !err.empty()) {
        std::fprintf(stderr, "gluon-fio: %s\n%s", err.c_str(), bench::fio_usage());
        return 2;
    }
    if (o.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(o.cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            die("--cpu=" + std::to_string(o.cpu) + ": " + std::strerror(errno));
    }
    if (auto r = bench::layout(o); !r.empty()) die(r);

    init_options io;
    io.log_engine = false;
    io.sqpoll = o.sqpoll;
    if (!init(io)) die("gluon::init failed");
    auto eng = file_io::get(o.engine);
    if (!eng) die(std::string("engine ") + file_io::kind_name(o.engine) + ": " + eng.error().message());

    int flags = (o.write ? O_RDWR : O_RDONLY) | O_CLOEXEC | (o.direct ? O_DIRECT : 0);
    int fd = ::open(o.filename.c_str(), flags);
    if (fd < 0) die(o.filename + ": " + std::strerror(errno));

    // Buffers: one per fiber, 4 KiB aligned (O_DIRECT), optionally registered with the ring. As
    // fio's: one untouched area for all of them, whose pages the kernel brings in (at
    // registration, or at the first I/O). Their physical layout matters on virtual disks without
    // indirect descriptors: each physically contiguous run is one ring descriptor, so scattered
    // 4 KiB pages let few large requests be in flight (bench/README.md, io). --hugepages asks for
    // transparent huge pages: a 64 KiB buffer is then one segment.
    const size_t stride = (o.bs + 4095) & ~size_t{4095};
    constexpr size_t k_huge = 2u << 20;
    const size_t area = (stride * o.iodepth + k_huge - 1) & ~(k_huge - 1);
    void* map = mmap(nullptr, area + k_huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (map == MAP_FAILED) die("out of memory");
    const auto aligned = (reinterpret_cast<uintptr_t>(map) + k_huge - 1) & ~uintptr_t{k_huge - 1};
    char* const base = reinterpret_cast<char*>(aligned);
    if (o.hugepages && madvise(base, area, MADV_HUGEPAGE) != 0)
        die(std::string("--hugepages: madvise(MADV_HUGEPAGE): ") + std::strerror(errno));
    std::vector<char*> bufs(o.iodepth);
    std::vector<iovec> iov(o.iodepth);
    for (unsigned i = 0; i < o.iodepth; ++i) {
        bufs[i] = base + i * stride;
        iov[i] = {bufs[i], o.bs};
    }
    bool fixed_file = false;
    int op_fd = fd;
    if (o.fixedbufs || o.registerfiles) {
        if ((*eng)->kind() != file_io::engine_kind::io_uring || current_engine()->type() != engine::kind::io_uring)
            die("--fixedbufs/--registerfiles need --engine=io_uring on an io_uring vCPU");
        if (o.fixedbufs && !current_engine()->register_buffers(iov.data(), o.iodepth))
            die("registering buffers failed");
        if (o.registerfiles) {
            if (!current_engine()->register_files(&fd, 1)) die("registering the file failed");
            fixed_file = true;
            op_fd = 0;
        }
    }

    job_stats stats;
    worker_ctx ctx{&o, *eng, op_fd, fixed_file, 0, o.size / o.bs, &stats};
    rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    const int64_t t0 = now_ns();
    ctx.end_ns = t0 + static_cast<int64_t>(o.runtime_s * 1e9);
    std::vector<fiber> fibers;
    for (unsigned i = 0; i < o.iodepth; ++i) {
        auto f = spawn(worker, &ctx, i, bufs[i]);
        if (!f) die("spawn failed");
        fibers.push_back(std::move(*f));
    }
    for (auto& f : fibers) (void)f.join();
    const double wall = static_cast<double>(now_ns() - t0) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    ::close(fd);
    (void)fini();

    const double usr = cpu_seconds(ru0, ru1, true), sys = cpu_seconds(ru0, ru1, false);
    bench::fio_report rep;
    rep.ios = stats.ios;
    rep.iops = static_cast<double>(stats.ios) / wall;
    rep.mib_s = rep.iops * static_cast<double>(o.bs) / (1024.0 * 1024.0);
    rep.wall_s = wall;
    rep.usr_s = usr;
    rep.sys_s = sys;
    rep.lat_avg_us = stats.ios && o.lat ? static_cast<double>(stats.lat_sum_ns) / static_cast<double>(stats.ios) / 1e3 : 0;
    rep.p50_us = o.lat ? percentile(stats, 0.50) / 1e3 : 0;
    rep.p99_us = o.lat ? percentile(stats, 0.99) / 1e3 : 0;
    bench::print_report(o, rep);
    munmap(map, area + k_huge);
    return 0;
}
