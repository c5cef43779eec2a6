// fuse-passthrough: mounts a local directory through gluon's FUSE export (the local filesystem
// on io_uring, requests on fibers of one vCPU) until SIGINT or SIGTERM; bench/run httpfs runs
// fio on the mount and on the directory itself. The mount bypasses the kernel's page cache
// (direct_io), so every read fio makes is a request served here.
//
//   fuse-passthrough DIR MOUNTPOINT
#include <cstdio>

#include "gluon/fs/fuse.h"
#include "gluon/fs/local.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: fuse-passthrough DIR MOUNTPOINT\n");
        return 2;
    }
    auto r = run({.log_engine = false}, [&]() -> result<void> {
        auto local = GLUON_TRY(fs::open_local(argv[1]));
        auto m = GLUON_TRY(fs::fuse_mount::mount(std::move(local), {.mountpoint = argv[2], .fsname = "gluon-passthrough",
                                                                                   .direct_io = true}));
        // Once the signals are caught: the suite stops the mount as soon as it has the line.
        return m->run_until_signalled([] {
            std::printf("mounted\n");
            std::fflush(stdout);
        });
    });
    if (!r) {
        std::fprintf(stderr, "fuse-passthrough: %s\n", r.error().message().c_str());
        return 1;
    }
    return 0;
}
