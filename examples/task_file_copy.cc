// Copies a file with C++20 tasks on one of gluon's file engines: `depth` tasks each read a chunk
// and write it at the same offset, so reads run ahead of writes without a thread per request.
//
//   task_file_copy SRC DST [--file-engine io_uring|libaio|posix_aio|psync|psync_inline]
//                  [--engine io_uring|epoll] [--chunk KiB] [--depth N]
//
// --chunk is at most 1048576 (1 GiB), --depth at most 4096.
#include <fcntl.h>

#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "gluon/file_io/file_engine.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/task/file.h"
#include "gluon/task/spawn.h"

using namespace gluon;

namespace {

struct job {
    file_io::file_engine* e;
    int in, out;
    uint64_t size;
    size_t chunk;
    uint64_t next = 0;  // the next offset to copy: the tasks share one vCPU, no lock needed
};

// Copies chunks until none is left; returns the bytes it copied.
task<result<uint64_t>> worker(job* j) {
    std::unique_ptr<char[]> buf(new (std::nothrow) char[j->chunk]);
    if (!buf) co_return errno_error(ENOMEM);
    uint64_t copied = 0;
    while (j->next < j->size) {
        const uint64_t off = j->next;
        j->next += j->chunk;
        const size_t want = static_cast<size_t>(std::min<uint64_t>(j->chunk, j->size - off));
        size_t got = 0;
        while (got < want) {  // a read may be short
            auto r = co_await co::pread(*j->e, j->in, buf.get() + got, want - got, static_cast<int64_t>(off + got));
            if (!r) co_return unexpected(r.error());
            if (*r == 0) co_return errno_error(ENODATA);  // the file shrank under us
            got += *r;
        }
        for (size_t put = 0; put < want;) {
            auto w = co_await co::pwrite(*j->e, j->out, buf.get() + put, want - put, static_cast<int64_t>(off + put));
            if (!w) co_return unexpected(w.error());
            put += *w;
        }
        copied += want;
    }
    co_return copied;
}

task<result<uint64_t>> copy(job* j, unsigned depth) {
    std::vector<join_handle<result<uint64_t>>> workers;
    for (unsigned i = 0; i < depth; ++i) {
        auto w = co_spawn(worker(j));
        if (!w) co_return unexpected(w.error());
        workers.push_back(std::move(*w));
    }
    uint64_t total = 0;
    std::error_code first;
    for (auto& w : workers) {  // every worker is awaited, even after one failed
        auto r = co_await w;
        if (r)
            total += *r;
        else if (!first)
            first = r.error();
    }
    if (first) co_return unexpected(first);
    co_return total;
}

result<void> run_copy(const std::string& src, const std::string& dst, file_io::engine_kind kind, size_t chunk,
                      unsigned depth) {
    file_io::file_engine* e = GLUON_TRY(file_io::get(kind));
    int in = GLUON_TRY(file_io::openat(*e, AT_FDCWD, src.c_str(), O_RDONLY | O_CLOEXEC));
    auto st = file_io::statx(*e, in, "", AT_EMPTY_PATH);
    auto out = file_io::openat(*e, AT_FDCWD, dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (!st || !out) {
        (void)file_io::close(*e, in);
        if (out) (void)file_io::close(*e, *out);
        return unexpected(!st ? st.error() : out.error());
    }
    job j{e, in, *out, st->stx_size, chunk};
    const int64_t t0 = mono_now_ns();
    auto copied = block_on(copy(&j, depth));
    const double s = static_cast<double>(mono_now_ns() - t0) / 1e9;
    (void)file_io::close(*e, in);
    auto closed = file_io::close(*e, *out);
    GLUON_TRY(copied);
    GLUON_TRY(closed);
    const double mib = static_cast<double>(*copied) / (1 << 20);
    std::printf("copied %.1f MiB in %.3f s (%.0f MiB/s, file engine %s, %u tasks)\n", mib, s,
                mib / (s > 0 ? s : 1), e->name(), depth);
    return {};
}

constexpr size_t k_max_chunk_kib = size_t{1} << 20;
constexpr unsigned k_max_depth = 4096;

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> paths;
    std::string engine_name = "auto";
    size_t chunk_kib = 256;
    unsigned depth = 8;
    init_options vcpu;
    cli::parser p("usage: task_file_copy SRC DST [--file-engine KIND] [--engine io_uring|epoll] [--chunk KiB (1..1048576)] [--depth N (1..4096)]");
    p.positional(paths).option("--file-engine", engine_name).option("--chunk", chunk_kib).option("--depth", depth).engine(vcpu);
    // A chunk over 1 GiB gains nothing (one read moves under 2 GiB) and its KiB could overflow
    // size_t: 2^54 KiB made a chunk of 0 bytes, copied for ever.
    if (!p.parse(argc, argv) || paths.size() != 2 || chunk_kib == 0 || chunk_kib > k_max_chunk_kib || depth == 0 ||
        depth > k_max_depth)
        return p.usage();
    auto kind = file_io::parse_kind(engine_name);
    if (!kind) return p.usage();
    auto r = run(vcpu, [&] { return run_copy(paths[0], paths[1], *kind, chunk_kib * 1024, depth); });
    if (!r) std::fprintf(stderr, "task_file_copy: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
