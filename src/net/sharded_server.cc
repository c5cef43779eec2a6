#include "gluon/net/sharded_server.h"

#include <linux/filter.h>
#include <sys/socket.h>

#include "gluon/sys/ops.h"

namespace gluon::net {
namespace {

// Returns the receiving CPU as the index into the reuseport group: listener i (added i-th,
// owned by the vCPU pinned to CPU i) gets the connections that CPU received. An index past the
// group's size makes the kernel fall back to its hash.
result<void> attach_cpu_steering(int fd) {
    sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, static_cast<uint32_t>(SKF_AD_OFF + SKF_AD_CPU)},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
    return void_from_syscall(sys::setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog));
}

}  // namespace

result<std::unique_ptr<sharded_server>> sharded_server::start(runtime& rt, const address& addr,
                                                              server::handler h,
                                                              const server_options& opts) {
    std::unique_ptr<sharded_server> s(new sharded_server);
    s->rt_ = &rt;
    s->shards_.resize(rt.size());
    address where = addr;
    std::error_code err;
    // In vCPU order, so that group index i is vCPU i's listener.
    for (unsigned i = 0; i < rt.size() && !err; ++i) {
        auto r = rt.run(i, [&] {
            server_options o = opts;
            o.reuse_port = true;
            auto srv = server::start(where, h, o);
            if (!srv) {
                err = srv.error();
                return;
            }
            if (i == 0) {
                where = (*srv)->local_address();  // later shards join the same port
                if (auto a = attach_cpu_steering((*srv)->listen_fd()); !a) err = a.error();
            }
            s->shards_[i] = std::move(*srv);
        });
        if (!r) err = r.error();
    }
    if (err) return unexpected(err);  // ~sharded_server stops the shards that started
    s->local_ = where;
    return s;
}

sharded_server::~sharded_server() { stop(duration::zero()); }

void sharded_server::stop(duration grace) noexcept {
    // All listeners close before any shard waits for its handlers: stopped one by one, each
    // shard's grace came after the last one's, so the stop took grace once per shard, and the
    // shards not yet stopping went on accepting (and serving) new connections meanwhile.
    const deadline_t until = deadline_after(grace);
    for (unsigned i = 0; i < shards_.size(); ++i) {
        if (!shards_[i]) continue;
        (void)rt_->run(i, [&] { shards_[i]->stop_accepting(); });
    }
    for (unsigned i = 0; i < shards_.size(); ++i) {
        if (!shards_[i]) continue;
        (void)rt_->run(i, [&] { shards_[i]->stop(time_left(until)); shards_[i].reset(); });
    }
}

uint64_t sharded_server::accepted(unsigned shard) const noexcept {
    return shard < shards_.size() && shards_[shard] ? shards_[shard]->accepted() : 0;
}

}  // namespace gluon::net
