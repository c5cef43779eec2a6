// One connection to a Redis server, shared by the fibers of the vCPU that opened it: each
// command's bytes are queued and written by whichever caller finds no write in flight (so
// commands queued meanwhile go out together), and replies are read by one waiting caller at a
// time, which hands each reply to its fiber in order and passes the reading on when its own
// has come. A single caller therefore writes, reads and returns with no other fiber involved.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "gluon/common/result.h"
#include "gluon/net/byte_stream.h"
#include "gluon/redis/client.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sync/semaphore.h"
#include "resp.h"

namespace gluon::redis {

class connection {
public:
    /// Connects, then HELLO 3 / AUTH / SELECT as o says. Errors: see client::command.
    static result<std::unique_ptr<connection>> open(const options& o);
    /// On the vCPU that is to use it (see owner_).
    explicit connection(std::unique_ptr<net::byte_stream> s, duration timeout) noexcept
        : s_(std::move(s)), timeout_(timeout), owner_(vcpu_handle::current()) {}
    ~connection();

    /// One command, its reply. Errors: see client::command (EPERM: another vCPU's connection).
    template <typename Range>
    result<reply> call(const Range& args) {
        if (broken_) return unexpected(broken_);
        detail::encode_command(out_, args);
        return finish_call();
    }
    /// MULTI, the commands and EXEC, queued together so that no other caller's command falls
    /// between them: EXEC's reply, or the first refusal while queueing (EXEC then ran none of
    /// them). Errors: see client::command.
    result<reply> transaction(const std::vector<std::vector<std::string>>& cmds);
    /// Sends a command whose replies are read with next() (subscriber mode), by d.
    template <typename Range>
    result<void> send(const Range& args, deadline_t d) {
        if (broken_) return unexpected(broken_);
        detail::encode_command(out_, args);
        return flush(d);
    }
    /// The next reply off the connection, for a caller that matches replies itself
    /// (subscriber mode: no command waits). Errors: ETIMEDOUT, ECANCELED (the connection stays
    /// usable after either), ECONNRESET, EPROTO.
    result<reply> next(duration timeout);

    /// Commands sent and not yet answered.
    size_t in_flight() const noexcept { return pending_.size(); }
    bool usable() const noexcept { return !broken_; }
    int protocol() const noexcept { return protocol_; }
    /// What its read and write buffers hold allocated (for tests: a large reply or command
    /// does not leave them that large).
    size_t buffer_bytes() const noexcept { return in_.capacity() + out_.capacity() + writing_buf_.capacity(); }
    /// Fails every waiting command with ECONNABORTED and closes the socket (from any thread).
    void close() noexcept;

private:
    struct slot {
        reply r;
        std::error_code err;
        bool done = false;
        bool waiting = false;
        event ev;
    };
    result<reply> finish_call();
    /// Sends what is queued and waits until mine, in pending_, has its reply.
    result<reply> wait_for(slot& mine);
    /// Writes what is queued unless another caller is writing; self: the caller's command.
    result<void> flush(deadline_t d, slot* self = nullptr);
    /// Reads and hands out replies until mine is done (or the connection fails).
    void read_until(slot& mine, deadline_t d);
    /// Decodes what is buffered; each reply to the oldest waiting slot. False: not RESP.
    bool dispatch();
    /// n bytes of the buffer decoded: the buffer is emptied (and freed if large) when they are all.
    void consumed(size_t n) noexcept;
    void fail(std::error_code why, slot* self, std::error_code self_err) noexcept;
    /// fail() for an error of self's own read or write: see connection.cc.
    void fail_transfer(std::error_code e, slot* self) noexcept;
    result<void> fill(duration timeout);  // one read into the buffer

    std::unique_ptr<net::byte_stream> s_;
    duration timeout_;
    // The vCPU whose engine reads the socket ahead (an armed receive there holds it open until
    // it ends); the client's destructor may close the connection on another thread.
    vcpu_handle owner_;
    int protocol_ = 2;
    std::error_code broken_;
    std::string out_, writing_buf_;
    bool writing_ = false, reading_ = false;
    std::deque<slot*> pending_;
    std::vector<char> in_;
    size_t beg_ = 0, end_ = 0;
    detail::decode_limits limits_;
    detail::reply_scanner scan_;  // how far the reply at beg_ is known to go
    friend class subscriber;
};

}  // namespace gluon::redis
