// http_mount: mounts the files at the URLs given on the command line, read-only, behind a block
// cache in memory (and optionally on disk), for unmodified programs to read. Each URL becomes a
// file named after the last part of its path. Ctrl-C unmounts.
//
//   http_mount MOUNTPOINT URL... [--cache-mib N] [--disk-cache DIR] [--block-kib N (4..65536)]
//              [--ca-file FILE] [--engine io_uring|epoll]
//
//   $ http_mount /mnt/images https://example.org/a/rootfs.img http://10.0.0.2/layer.tar
//   mounted 2 files at /mnt/images (cache 256 MiB in memory)
//   $ sha256sum /mnt/images/layer.tar        # in another shell
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gluon/fs/cache.h"
#include "gluon/fs/fuse.h"
#include "gluon/fs/http.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

// The cache's block sizes (a power of two, 4 KiB .. 64 MiB; it checks the power) and the most
// MiB a size_t holds in bytes.
constexpr size_t k_min_block_kib = 4, k_max_block_kib = 64 << 10;
constexpr size_t k_max_cache_mib = SIZE_MAX >> 20;

struct config {
    std::vector<std::string> args;  // MOUNTPOINT URL...
    size_t cache_mib = 256;
    size_t block_kib = 1024;
    std::string disk_cache, ca_file;
    init_options vcpu{.log_engine = false};
};

/// "http://host/dir/file.bin?x=1" -> "file.bin".
std::string name_of(const std::string& url) {
    std::string path = url.substr(0, url.find_first_of("?#"));
    std::string name = path.substr(path.rfind('/') + 1);
    return name.empty() ? "index" : name;
}

result<void> serve(const config& c) {
    fs::http_fs_options h;
    for (size_t i = 1; i < c.args.size(); ++i) h.files.emplace_back(name_of(c.args[i]), c.args[i]);
    net::tls::context ca;
    if (!c.ca_file.empty()) {  // a private CA (verification stays on)
        ca = GLUON_TRY(net::tls::context::make_client({.ca_file = c.ca_file}));
        h.client.tls = &ca;
    }
    h.metadata_ttl = std::chrono::seconds(60);
    auto http = GLUON_TRY(fs::make_http_filesystem(std::move(h)));
    fs::cache_options co{.block_size = c.block_kib << 10, .memory_bytes = c.cache_mib << 20, .disk_dir = c.disk_cache};
    auto cached = GLUON_TRY(fs::make_cached(std::move(http), co));
    auto m = GLUON_TRY(fs::fuse_mount::mount(std::move(cached), {.mountpoint = c.args[0],
                                                                  .fsname = "http_mount",
                                                                  .read_only = true,
                                                                  .attr_timeout = std::chrono::seconds(60),
                                                                  .entry_timeout = std::chrono::seconds(60),
                                                                  .keep_cache = true}));
    // Printed once Ctrl-C is caught: a script may send SIGINT as soon as it reads the line, and
    // the mount still goes away cleanly.
    GLUON_TRY(m->run_until_signalled([&] {
        std::printf("mounted %zu files at %s (cache %zu MiB in memory%s%s)\n", c.args.size() - 1, c.args[0].c_str(),
                    c.cache_mib, c.disk_cache.empty() ? "" : ", on disk in ", c.disk_cache.c_str());
        std::fflush(stdout);
    }));
    auto st = m->statistics();
    std::printf("unmounted after %llu requests, %llu MiB read\n", static_cast<unsigned long long>(st.requests),
                static_cast<unsigned long long>(st.bytes_read >> 20));
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    cli::parser p("usage: http_mount MOUNTPOINT URL... [--cache-mib N] [--disk-cache DIR] [--block-kib N (4..65536)]"
                  " [--ca-file FILE] [--engine io_uring|epoll]");
    p.option("--cache-mib", c.cache_mib).option("--block-kib", c.block_kib).option("--disk-cache", c.disk_cache);
    p.option("--ca-file", c.ca_file).engine(c.vcpu).positional(c.args);
    // Refused before they are shifted into bytes, where a large value wrapped: --block-kib
    // 2^54 + 4 became a valid block of 4 KiB, --cache-mib 2^44 a cache of 0 bytes.
    if (!p.parse(argc, argv) || c.args.size() < 2 || c.block_kib < k_min_block_kib || c.block_kib > k_max_block_kib ||
        c.cache_mib > k_max_cache_mib)
        return p.usage();
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) {
        std::fprintf(stderr, "http_mount: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}
