// The shmipc handshakes. v2: the client sends ShareMemoryByFilePath and goes straight to the data
// phase. v3: ExchangeProtoVersion both ways (header only), ShareMemoryByMemfd, AckReadyRecvFD,
// then one data byte carrying exactly two fds (buffer, queue), then AckShareMemory.
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "gluon/common/log.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"
#include "session_impl.h"

namespace gluon::ipc::detail {
namespace {

using wire::type;

unexpected fail(errc e) { return unexpected(make_error_code(e)); }

result<void> send_header(net::stream& s, type t, uint8_t version, deadline_t dl) {
    uint8_t h[wire::k_header_size];
    wire::encode_header(h, wire::k_header_size, version, t);
    return s.write_all(h, sizeof h, time_left(dl));
}

result<wire::header> read_header(net::stream& s, deadline_t dl) {
    uint8_t h[wire::k_header_size];
    auto r = s.read_exactly(h, sizeof h, time_left(dl));
    if (!r) return r.error() == std::errc::no_message_available ? fail(errc::handshake_failed) : unexpected(r.error());
    return wire::decode_header(h, 0);
}

result<wire::header> expect(net::stream& s, type t, deadline_t dl) {
    wire::header h = GLUON_TRY(read_header(s, dl));
    if (h.kind != t) return fail(errc::unexpected_message);
    return h;
}

result<wire::share_memory_paths> read_paths(net::stream& s, const wire::header& h, deadline_t dl) {
    std::vector<uint8_t> body(h.length - wire::k_header_size);
    GLUON_TRY(s.read_exactly(body.data(), body.size(), time_left(dl)));
    wire::share_memory_paths p;
    GLUON_TRY(wire::decode_paths(body, p));
    return p;
}

// The queue region: two queues of the same capacity, client->server first.
result<void> map_queues(session_impl& si, shm_file q) {
    size_t n = q.size();
    if (n % 2 != 0 || n / 2 < k_queue_header || n > UINT32_MAX) return fail(errc::bad_queue);
    si.queue_map = GLUON_TRY(q.map());
    si.queue_file = std::move(q);
    uint8_t* a = si.queue_map.data();
    uint8_t* b = a + n / 2;
    uint32_t cap = queue_view::stored_cap(a);
    if (cap == 0 || queue_view::stored_cap(b) != cap || queue_bytes(cap) != n / 2 || straddles(cap))
        return fail(errc::bad_queue);
    if (si.client) {
        si.send_q = queue_view(a, cap);
        si.recv_q = queue_view(b, cap);
    } else {
        si.send_q = queue_view(b, cap);
        si.recv_q = queue_view(a, cap);
    }
    return {};
}

// Server: the client's buffer region, shared with its other sessions.
result<void> map_region(session_impl& si, shm_file f) {
    std::lock_guard lk(si.registry->mu);
    auto& slot = si.registry->slot(f.identity());
    if (auto r = slot.lock()) {
        // The same object, perhaps shrunk since the first session mapped it.
        if (f.size() < r->map.size()) return fail(errc::bad_region);
        // f is closed here; the mapping we have is the same memory, and its file is removed
        // with the region's last session, not now: the client may dial more sessions on it.
        f.keep_file();
        si.region = std::move(r);
        return {};
    }
    if (f.size() > UINT32_MAX) return fail(errc::bad_region);  // offsets are 32 bits
    auto r = std::make_shared<region_ref>();
    r->map = GLUON_TRY(f.map());
    r->file = std::move(f);
    r->region = GLUON_TRY(buffer_region::attach(r->map.data(), r->map.size()));
    // A file is removed with the region's last session, and only once it proved to be a region.
    r->file.remove_on_close();
    slot = r;
    si.region = std::move(r);
    return {};
}

// The directory whose files a client may name: that of this side's path_prefix (/dev/shm by
// default).
std::string shm_directory(const std::string& prefix) {
    size_t slash = prefix.rfind('/');
    if (slash == std::string::npos) return "/dev/shm";
    return slash == 0 ? "/" : prefix.substr(0, slash);
}

// The uid of the process at the other end of the socket.
result<uid_t> peer_uid(const net::stream& s) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (long r = sys::getsockopt(s.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len); r < 0) return errno_error(int(-r));
    return cred.uid;
}

// Refuses memory the client could shrink under our mappings, if the options say so.
result<void> check_sealed(const session_options& opts, const shm_file& q, const shm_file& b) {
    if (opts.require_sealed && (!q.shrink_sealed() || !b.shrink_sealed())) return fail(errc::unsealed_memory);
    return {};
}

result<void> open_files(session_impl& si, const wire::share_memory_paths& p) {
    // The client names the files, and this side removes them: only its own files, by plain
    // names in the shared-memory directory, and removed only once they proved to be a queue and
    // a region (a failed handshake removes nothing). The queue is this session's alone: once
    // mapped, its file is not needed. The buffer file is removed when the last session using it
    // ends (a Go client often exits before its own clean-up runs).
    const std::string dir = shm_directory(si.opts.path_prefix);
    const uid_t owner = GLUON_TRY(peer_uid(si.sock));
    shm_file q = GLUON_TRY(shm_file::open_peer_file(dir, p.queue_path, owner));
    shm_file b = GLUON_TRY(shm_file::open_peer_file(dir, p.buffer_path, owner));
    GLUON_TRY(check_sealed(si.opts, q, b));
    GLUON_TRY(map_queues(si, std::move(q)));
    si.queue_file.remove_on_close();
    si.queue_file.unlink();
    return map_region(si, std::move(b));
}

}  // namespace

std::weak_ptr<region_ref>& region_registry::slot(identity id) {
    if (by_identity.size() >= purge_at) {
        std::erase_if(by_identity, [](const auto& e) { return e.second.expired(); });
        purge_at = std::max<size_t>(16, 2 * by_identity.size());
    }
    return by_identity[id];
}

std::string unique_prefix(const std::string& prefix) {
    static std::atomic<uint32_t> counter{0};
    return prefix + "_" + std::to_string(sys::getpid()) + "_" + std::to_string(counter.fetch_add(1));
}

result<std::shared_ptr<region_ref>> create_region(const session_options& opts, const std::string& name) {
    auto r = std::make_shared<region_ref>();
    r->name = name;
    r->file = GLUON_TRY(opts.mode == memory_mode::memfd ? shm_file::create_memfd(name, opts.buffer_size)
                                                        : shm_file::create_file(name, opts.buffer_size));
    r->map = GLUON_TRY(r->file.map());
    std::vector<slice_class> classes;
    for (const slice_size& s : opts.slices) classes.push_back({s.size, s.percent});
    r->region = GLUON_TRY(buffer_region::format(r->map.data(), r->map.size(), classes));
    return r;
}

result<std::shared_ptr<session_impl>> client_handshake(const net::address& addr, const session_options& opts,
                                                       std::shared_ptr<region_ref> shared_region) {
    if (opts.queue_cap == 0 || opts.queue_cap > (1u << 24) || straddles(opts.queue_cap)) return errno_error(EINVAL);
    deadline_t dl = deadline_after(opts.handshake_timeout);
    auto si = std::make_shared<session_impl>();
    si->client = true;
    si->opts = opts;
    std::string prefix = unique_prefix(opts.path_prefix);
    const bool memfd = opts.mode == memory_mode::memfd;
    // The memory is made before connecting: formatting touches every page, and a Go server's
    // handshake clock starts at accept.
    si->region = shared_region ? std::move(shared_region) : GLUON_TRY(create_region(opts, prefix + "_buffer"));
    size_t qbytes = 2 * queue_bytes(opts.queue_cap);
    std::string qname = prefix + "_queue_0";
    shm_file q = GLUON_TRY(memfd ? shm_file::create_memfd(qname, qbytes) : shm_file::create_file(qname, qbytes));
    {
        mapping m = GLUON_TRY(q.map());
        queue_view::format(m.data(), opts.queue_cap);
        queue_view::format(m.data() + qbytes / 2, opts.queue_cap);
    }
    GLUON_TRY(map_queues(*si, std::move(q)));

    si->sock = GLUON_TRY(net::stream::connect(addr, time_left(dl)));
    net::stream& s = si->sock;
    const std::string& bname = si->region->name;
    if (!memfd) {
        si->version = 2;
        std::string msg = GLUON_TRY(wire::encode_paths(type::share_memory_by_file_path, 2, qname, bname));
        GLUON_TRY(s.write_all(msg.data(), msg.size(), time_left(dl)));
        return si;
    }
    GLUON_TRY(send_header(s, type::exchange_proto_version, 3, dl));
    wire::header h = GLUON_TRY(expect(s, type::exchange_proto_version, dl));
    if (h.version < 3) return fail(errc::unsupported_version);
    si->version = 3;
    std::string msg = GLUON_TRY(wire::encode_paths(type::share_memory_by_memfd, 3, qname, bname));
    GLUON_TRY(s.write_all(msg.data(), msg.size(), time_left(dl)));
    GLUON_TRY(expect(s, type::ack_ready_recv_fd, dl));
    const uint8_t dummy = 0;
    const int fds[2] = {si->region->file.fd(), si->queue_file.fd()};
    size_t sent = GLUON_TRY(s.send_fds(&dummy, 1, fds, time_left(dl)));
    if (sent != 1) return fail(errc::handshake_failed);
    GLUON_TRY(expect(s, type::ack_share_memory, dl));
    return si;
}

result<std::shared_ptr<session_impl>> server_handshake(net::stream sock, const session_options& opts,
                                                       std::shared_ptr<region_registry> registry) {
    deadline_t dl = deadline_after(opts.handshake_timeout);
    auto si = std::make_shared<session_impl>();
    si->opts = opts;
    si->sock = std::move(sock);
    si->registry = registry ? std::move(registry) : std::make_shared<region_registry>();
    net::stream& s = si->sock;
    wire::header h = GLUON_TRY(read_header(s, dl));
    if (h.version == 2) {
        if (h.kind != type::share_memory_by_file_path) return fail(errc::unexpected_message);
        si->version = 2;
        auto paths = GLUON_TRY(read_paths(s, h, dl));
        GLUON_TRY(open_files(*si, paths));
        return si;
    }
    if (h.version < 3) return fail(errc::unsupported_version);
    if (h.kind != type::exchange_proto_version) return fail(errc::unexpected_message);
    si->version = 3;
    GLUON_TRY(send_header(s, type::exchange_proto_version, 3, dl));
    h = GLUON_TRY(read_header(s, dl));
    if (h.kind == type::share_memory_by_file_path) {
        auto paths = GLUON_TRY(read_paths(s, h, dl));
        GLUON_TRY(open_files(*si, paths));
    } else if (h.kind == type::share_memory_by_memfd) {
        (void)GLUON_TRY(read_paths(s, h, dl));  // labels only: memfds are told apart by inode
        GLUON_TRY(send_header(s, type::ack_ready_recv_fd, 3, dl));
        // recvmsg for the one data byte: a plain read would eat it and the kernel would drop the fds.
        uint8_t dummy;
        int fds[2] = {-1, -1};
        auto got = GLUON_TRY(s.recv_fds(&dummy, 1, fds, time_left(dl)));
        auto b = got.fds >= 1 ? shm_file::adopt(fds[0]) : errno_error(EBADF);
        auto q = got.fds >= 2 ? shm_file::adopt(fds[1]) : errno_error(EBADF);
        if (got.bytes != 1 || got.fds != 2 || got.truncated || !b || !q)
            return fail(errc::handshake_failed);
        GLUON_TRY(check_sealed(si->opts, *q, *b));
        GLUON_TRY(map_queues(*si, std::move(*q)));
        GLUON_TRY(map_region(*si, std::move(*b)));
    } else {
        return fail(errc::unexpected_message);
    }
    GLUON_TRY(send_header(s, type::ack_share_memory, 3, dl));
    return si;
}

}  // namespace gluon::ipc::detail
