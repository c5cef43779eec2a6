#include "gluon/engine/engine.h"

#include <fcntl.h>

#include <atomic>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "epoll/epoll_engine.h"
#include "io_uring/io_uring_engine.h"
#include "gluon/common/fd_table.h"
#include "gluon/common/lazy.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"

namespace gluon::engine {

std::optional<kind> parse_kind(std::string_view s) noexcept {
    if (s == "io_uring" || s == "iouring") return kind::io_uring;
    if (s == "epoll") return kind::epoll;
    return std::nullopt;
}

const char* kind_name(kind k) noexcept { return k == kind::io_uring ? "io_uring" : "epoll"; }

result<std::unique_ptr<engine>> create(kind k, const options& opts) {
    if (k == kind::epoll) return epoll_engine::create(opts);
    return io_uring_engine::create(opts);
}

namespace {
// 0 allowed, 1 unprivileged users refused, 2 disabled for everyone.
int io_uring_disabled_sysctl() {
    long fd = sys::openat(AT_FDCWD, "/proc/sys/kernel/io_uring_disabled", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return 0;
    char c = '0';
    long n = sys::read(static_cast<int>(fd), &c, 1, -1);
    (void)sys::close(static_cast<int>(fd));
    return n == 1 && c >= '0' && c <= '9' ? c - '0' : 0;
}
}  // namespace

bool available(kind k) noexcept {
    if (k == kind::epoll) return true;
    static constinit lazy_flag io_uring_works;
    return io_uring_works.get([] { return create(kind::io_uring).has_value(); });
}

result<selection> select(const options& opts) {
    if (const char* env = std::getenv("GLUON_ENGINE"); env && *env) {
        auto k = parse_kind(env);
        if (!k) return errno_error(EINVAL);
        auto e = create(*k, opts);
        if (!e) return e.error() ? unexpected(e.error()) : errno_error(EINVAL);
        return selection{std::move(*e), std::string("forced by GLUON_ENGINE=") + env};
    }
    auto ring = create(kind::io_uring, opts);
    if (ring) return selection{std::move(*ring), "io_uring available"};
    std::string why;
    int sysctl = io_uring_disabled_sysctl();
    if (sysctl == 2)
        why = "io_uring disabled by kernel.io_uring_disabled=2";
    else if (ring.error() == std::errc::operation_not_permitted)
        why = "io_uring not permitted (seccomp or kernel.io_uring_disabled=" + std::to_string(sysctl) + ")";
    else if (ring.error() == std::errc::function_not_supported)
        why = "kernel has no io_uring";
    else if (ring.error() == std::errc::not_enough_memory)
        why = "io_uring short of locked memory (RLIMIT_MEMLOCK)";
    else if (ring.error() == std::errc::operation_not_supported)
        why = "io_uring lacks operations gluon needs, or its opcode probe was refused";
    else
        why = "io_uring setup failed: " + ring.error().message();
    auto ep = GLUON_TRY(create(kind::epoll, opts));
    return selection{std::move(ep), why + "; falling back to epoll"};
}

namespace {
// Close generations, for every fd number the process may use (never freed: closes can come
// from any thread until exit).
constinit lazy_ptr<fd_table<std::atomic<uint32_t>>> g_generations;
fd_table<std::atomic<uint32_t>>& generations() noexcept {
    return g_generations.get([] { return new fd_table<std::atomic<uint32_t>>(sys::fd_limit()); });
}
}  // namespace

void note_fd_closed(int fd) noexcept {
    if (auto* g = generations().get(fd)) g->fetch_add(1, std::memory_order_release);
}

uint32_t fd_generation(int fd) noexcept {
    const auto* g = generations().find(fd);
    return g ? g->load(std::memory_order_acquire) : 0;
}

}  // namespace gluon::engine
