#include "connection.h"

#include <array>
#include <cerrno>

#include "gluon/common/log.h"
#include "gluon/net/resolver.h"
#include "gluon/net/socket.h"
#include "gluon/net/tls.h"
#include "gluon/sys/ops.h"

namespace gluon::redis {

namespace {
constexpr size_t k_read_chunk = 16 * 1024;
// A buffer grown past this for a large reply or command is freed once it is empty, so that a
// connection does not keep the size of the largest reply it ever had (per connection, per vCPU).
constexpr size_t k_keep_buffer = 1u << 20;
}

result<std::unique_ptr<connection>> connection::open(const options& o) {
    // A connection is used and closed on the vCPU that opened it (client.cc keeps a pool per
    // vCPU), and every read goes through its stream: it can read ahead (net::stream::read_ahead),
    // which saves the kernel a receive request per reply.
    std::unique_ptr<net::byte_stream> s;
    if (!o.unix_path.empty()) {
        auto a = GLUON_TRY(net::address::unix_path(o.unix_path));
        auto sock = GLUON_TRY(net::stream::connect(a, o.connect_timeout));
        sock.read_ahead();
        s = std::make_unique<net::stream>(std::move(sock));
    } else {
        auto sock = GLUON_TRY(net::connect(o.host, o.port, o.connect_timeout));
        (void)sock.set_nodelay(true);
        sock.read_ahead();
        if (o.tls) {
            std::string_view name = o.tls_server_name.empty() ? std::string_view(o.host) : o.tls_server_name;
            s = std::make_unique<net::tls::stream>(
                GLUON_TRY(net::tls::stream::connect(std::move(sock), *o.tls, name, o.connect_timeout)));
        } else {
            s = std::make_unique<net::stream>(std::move(sock));
        }
    }
    auto c = std::make_unique<connection>(std::move(s), o.command_timeout);
    auto refused = [](const reply& r) {
        GLUON_WARN("redis: the server refused the handshake: {}", r.str);
        return errno_error(EACCES);
    };
    if (o.protocol == 3) {
        std::vector<std::string_view> hello = {"HELLO", "3"};
        if (!o.password.empty()) {
            hello.insert(hello.end(), {"AUTH", o.username.empty() ? std::string_view("default") : o.username, o.password});
        }
        auto r = GLUON_TRY(c->call(hello));
        if (r.is_error()) return refused(r);
        if (r.type != reply::kind::map) return errno_error(EPROTO);
        c->protocol_ = 3;
    } else if (!o.password.empty()) {
        auto r = o.username.empty() ? GLUON_TRY(c->call(std::array<std::string_view, 2>{"AUTH", o.password}))
                                    : GLUON_TRY(c->call(std::array<std::string_view, 3>{"AUTH", o.username, o.password}));
        if (r.is_error()) return refused(r);
    }
    if (o.database != 0) {
        std::string db = std::to_string(o.database);
        auto r = GLUON_TRY(c->call(std::array<std::string_view, 2>{"SELECT", db}));
        if (r.is_error()) return refused(r);
    }
    return c;
}

connection::~connection() { close(); }

void connection::close() noexcept {
    if (!broken_) fail(make_error_code(std::errc::connection_aborted), nullptr, {});
}

void connection::fail(std::error_code why, slot* self, std::error_code self_err) noexcept {
    if (!broken_) {
        broken_ = why;
        // Closed off its vCPU (a client destroyed on another thread): the receive the owner's
        // engine keeps armed on the socket (read_ahead) holds it open, connected, until it
        // ends, and no data comes to end it on an idle connection. Shutting the socket down
        // ends it, and the server sees the connection go.
        if (vcpu_handle::current() != owner_)
            if (net::socket_fd* so = s_->socket(); so && so->valid()) (void)sys::shutdown(so->get(), SHUT_RDWR);
        (void)s_->close();
    }
    for (slot* s : pending_) {
        s->err = s == self ? self_err : why;
        s->done = true;
        if (s->waiting) s->ev.set();
    }
    pending_.clear();
}

void connection::fail_transfer(std::error_code e, slot* self) noexcept {
    // A read or write serves every command queued, but its deadline and interrupt are those of
    // the caller making it: that caller's ETIMEDOUT or ECANCELED is its own, and the others'
    // commands fail with ECONNABORTED (their replies can no longer be matched), not with an
    // interrupt they did not get or a timeout that is not theirs. A transport error is
    // everyone's.
    const bool own = e == std::errc::timed_out || e == std::errc::operation_canceled;
    fail(own ? make_error_code(std::errc::connection_aborted) : e, self, e);
}

result<void> connection::flush(deadline_t d, slot* self) {
    if (writing_) return {};  // the caller writing now takes these bytes too
    writing_ = true;
    while (!out_.empty() && !broken_) {
        writing_buf_.swap(out_);
        auto r = s_->write_all(writing_buf_.data(), writing_buf_.size(), timeout_left(d));
        writing_buf_.clear();
        if (writing_buf_.capacity() > k_keep_buffer) std::string().swap(writing_buf_);
        if (!r) {
            writing_ = false;
            fail_transfer(r.error(), self);
            return unexpected(r.error());
        }
    }
    writing_ = false;
    if (broken_) return unexpected(broken_);
    return {};
}

result<void> connection::fill(duration timeout) {
    if (beg_ == end_) beg_ = end_ = 0;
    if (in_.size() - end_ < k_read_chunk) {
        if (beg_ > 0) {  // move the unread part to the front
            std::copy(in_.begin() + static_cast<long>(beg_), in_.begin() + static_cast<long>(end_), in_.begin());
            end_ -= beg_;
            beg_ = 0;
        }
        if (in_.size() - end_ < k_read_chunk) in_.resize(end_ + k_read_chunk * 2);
    }
    auto n = GLUON_TRY(s_->read_some(in_.data() + end_, in_.size() - end_, timeout));
    if (n == 0) return errno_error(ECONNRESET);
    end_ += n;
    return {};
}

void connection::consumed(size_t n) noexcept {
    beg_ += n;
    if (beg_ != end_) return;
    beg_ = end_ = 0;
    if (in_.size() > k_keep_buffer) std::vector<char>().swap(in_);
}

bool connection::dispatch() {
    while (beg_ < end_ && !pending_.empty()) {
        if (!scan_.ready(in_.data() + beg_, end_ - beg_, limits_)) return true;
        reply r;
        size_t used = 0;
        auto st = detail::decode(in_.data() + beg_, end_ - beg_, r, used, limits_);
        if (st == detail::decode_status::incomplete) return true;
        if (st == detail::decode_status::invalid) return false;
        scan_.reset();
        consumed(used);
        if (r.type == reply::kind::push) continue;  // out-of-band (RESP3): not a command's reply
        slot* s = pending_.front();
        pending_.pop_front();
        s->r = std::move(r);
        s->done = true;
        if (s->waiting) s->ev.set();
    }
    return true;
}

void connection::read_until(slot& mine, deadline_t d) {
    reading_ = true;
    while (!mine.done) {
        if (auto r = fill(timeout_left(d)); !r) {
            reading_ = false;
            fail_transfer(r.error(), &mine);
            return;
        }
        if (!dispatch()) {
            reading_ = false;
            fail(make_error_code(std::errc::protocol_error), nullptr, {});
            return;
        }
    }
    reading_ = false;
    // Someone else waits for a reply that has not come: they read next. (The oldest slot
    // need not be waiting: a transaction's replies before its EXEC have no caller of their own.)
    for (slot* s : pending_)
        if (s->waiting) {
            s->ev.set();
            break;
        }
}

result<reply> connection::finish_call() {
    slot mine;
    pending_.push_back(&mine);
    return wait_for(mine);
}

result<reply> connection::transaction(const std::vector<std::vector<std::string>>& cmds) {
    if (broken_) return unexpected(broken_);
    using one = std::array<std::string_view, 1>;
    // Appended in one go (no other fiber runs meanwhile), so the bytes go out together and the
    // server queues these commands and no one else's. The replies before EXEC's (+OK, then
    // +QUEUED or a refusal for each) go to slots of this call; EXEC's comes last.
    std::deque<slot> queued(cmds.size() + 1);
    detail::encode_command(out_, one{"MULTI"});
    for (const auto& c : cmds) detail::encode_command(out_, c);
    detail::encode_command(out_, one{"EXEC"});
    for (slot& q : queued) pending_.push_back(&q);
    slot exec;
    pending_.push_back(&exec);
    auto r = wait_for(exec);  // (every slot of this call is out of pending_ when it returns)
    if (r && r->is_error())
        for (slot& q : queued)
            if (!q.err && q.r.is_error()) return std::move(q.r);
    return r;
}

result<reply> connection::wait_for(slot& mine) {
    deadline_t d = timeout_deadline(timeout_);
    if (auto w = flush(d, &mine); !w && !mine.done) return unexpected(w.error());
    while (!mine.done) {
        if (!reading_) {
            // Replies may be buffered already (a reader before us read past its own).
            if (!dispatch()) {
                fail(make_error_code(std::errc::protocol_error), nullptr, {});
                break;
            }
            if (!mine.done) read_until(mine, d);
            break;
        }
        mine.ev.reset();
        mine.waiting = true;
        auto r = mine.ev.wait(timeout_left(d));
        mine.waiting = false;
        if (!r && !mine.done) {
            fail(make_error_code(std::errc::connection_aborted), &mine, r.error());
            break;
        }
    }
    if (mine.err) return unexpected(mine.err);
    return std::move(mine.r);
}

result<reply> connection::next(duration timeout) {
    deadline_t d = timeout_deadline(timeout);
    for (;;) {
        if (broken_) return unexpected(broken_);
        if (beg_ < end_ && scan_.ready(in_.data() + beg_, end_ - beg_, limits_)) {
            reply r;
            size_t used = 0;
            auto st = detail::decode(in_.data() + beg_, end_ - beg_, r, used, limits_);
            if (st == detail::decode_status::invalid) {
                fail(make_error_code(std::errc::protocol_error), nullptr, {});
                return errno_error(EPROTO);
            }
            if (st == detail::decode_status::complete) {
                scan_.reset();
                consumed(used);
                return r;
            }
        }
        if (auto r = fill(timeout_left(d)); !r) {
            // A read that timed out or was interrupted took nothing: the connection goes on.
            const auto e = r.error();
            if (e != std::errc::timed_out && e != std::errc::operation_canceled) fail(e, nullptr, {});
            return unexpected(e);
        }
    }
}

}  // namespace gluon::redis
