#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "connection.h"
#include "gluon/common/ascii.h"
#include "gluon/common/log.h"
#include "gluon/common/spinlock.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sync/mutex.h"

namespace gluon::redis {

struct client::impl {
    options opts;
    spinlock lock;
    gluon::mutex opening;  // one fiber opens a connection at a time; the others wait for it
    // Opens ended, and how the last one ended (under `opening`): a fiber that waited for
    // another's open takes its failure instead of trying again, so fibers behind a server that
    // does not answer do not each wait out a connect and handshake in turn.
    std::atomic<uint64_t> opens{0};
    std::error_code last_open_err;
    // A vCPU's connections. Shared: a caller holds the connection it is in (a reader blocked in
    // a read, a writer in a write) while the pool drops a broken one or close() empties the
    // pool; the last one out frees it.
    struct pool {
        std::thread::id thread;  // the vCPU's thread
        std::vector<std::shared_ptr<connection>> conns;
    };
    // By vCPU index (current_vcpu_index: never reused in a process), not by thread: a thread
    // made a vCPU again after fini (or a new thread given an ended one's id) must not take the
    // connections of the vCPU that ended, whose engine held their read-ahead state.
    std::map<int, pool> pools;

    /// This vCPU's connections (under `lock`), a pool made if it has none. A pool of the same
    /// thread under another index is a vCPU's that has ended (a thread is one vCPU at a time):
    /// its connections move to `ended`, whose owner frees them, and so closes them, once the
    /// lock is dropped (closing is a syscall, the lock a spinlock).
    std::vector<std::shared_ptr<connection>>& mine(std::vector<std::shared_ptr<connection>>& ended) {
        const int v = current_vcpu_index();
        if (auto it = pools.find(v); it != pools.end()) return it->second.conns;
        const std::thread::id self = std::this_thread::get_id();
        std::erase_if(pools, [&](auto& p) {
            if (p.second.thread != self) return false;
            for (auto& c : p.second.conns) ended.push_back(std::move(c));
            return true;
        });
        pool& p = pools[v];
        p.thread = self;
        return p.conns;
    }

    /// This vCPU's least busy usable connection, a new one while the pool has room and every
    /// connection is busy.
    result<std::shared_ptr<connection>> pick() {
        if (!is_vcpu()) return errno_error(EPERM);
        std::vector<std::shared_ptr<connection>> ended;  // before the lock guards: see mine()
        auto take = [&]() -> std::shared_ptr<connection> {
            std::lock_guard g(lock);
            auto& v = mine(ended);
            std::erase_if(v, [](const auto& c) { return !c->usable() && c->in_flight() == 0; });
            connection* best = nullptr;
            size_t at = 0;
            for (size_t i = 0; i < v.size(); ++i)
                if (v[i]->usable() && (!best || v[i]->in_flight() < best->in_flight())) best = v[i].get(), at = i;
            if (best && (best->in_flight() == 0 || v.size() >= opts.pool_size)) return v[at];
            return nullptr;
        };
        if (auto c = take()) return c;
        const uint64_t before = opens.load(std::memory_order_acquire);
        std::unique_lock g(opening);
        if (auto c = take()) return c;
        if (opens.load(std::memory_order_relaxed) != before && last_open_err) return unexpected(last_open_err);
        auto opened = connection::open(opts);
        last_open_err = opened ? std::error_code() : opened.error();
        opens.fetch_add(1, std::memory_order_release);
        std::shared_ptr<connection> c = GLUON_TRY(std::move(opened));
        std::lock_guard l(lock);
        mine(ended).push_back(c);
        return c;
    }

    template <typename Range>
    result<reply> command(const Range& args) {
        if (changes_connection(args)) return errno_error(EINVAL);
        std::shared_ptr<connection> c = GLUON_TRY(pick());
        return c->call(args);
    }

    /// Commands that change what a pooled connection answers (replies that are not one per
    /// command: SUBSCRIBE and its kin, MONITOR, CLIENT REPLY) or the state every caller of it
    /// shares (SELECT, HELLO, RESET, AUTH, QUIT, and a transaction: after MULTI the server
    /// queues every caller's commands, answers them QUEUED and gives their results in the EXEC
    /// of whoever sent MULTI): the pipeline would hand later callers the wrong replies, another
    /// database or user (and a connection the pool opens next would not have them), or a
    /// connection the server closes under them. subscriber, options.database / protocol /
    /// username / password and close() serve these.
    template <typename Range>
    static bool changes_connection(const Range& args) {
        auto it = std::begin(args);
        if (it == std::end(args)) return false;
        const std::string_view name = *it;
        static constexpr std::string_view refused[] = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE",
                                                       "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR", "SELECT",
                                                       "HELLO", "RESET", "AUTH", "QUIT", "MULTI", "EXEC",
                                                       "DISCARD", "WATCH", "UNWATCH"};
        for (std::string_view r : refused)
            if (ascii_iequals(name, r)) return true;
        if (ascii_iequals(name, "CLIENT") && ++it != std::end(args)) return ascii_iequals(*it, "REPLY");
        return false;
    }
};

client::client(options o) : im_(std::make_unique<impl>()) { im_->opts = std::move(o); }

client::~client() = default;

void client::close() noexcept {
    std::vector<std::shared_ptr<connection>> mine;
    {
        std::lock_guard g(im_->lock);
        auto it = im_->pools.find(current_vcpu_index());
        if (it == im_->pools.end()) return;
        mine = std::move(it->second.conns);
        im_->pools.erase(it);
    }
    for (auto& c : mine) c->close();
}

result<reply> client::command(std::initializer_list<std::string_view> args) { return im_->command(args); }
result<reply> client::command(const std::vector<std::string>& args) { return im_->command(args); }

result<reply> client::transaction(const std::vector<std::vector<std::string>>& commands) {
    if (commands.empty()) return errno_error(EINVAL);
    for (const auto& c : commands)
        if (c.empty() || impl::changes_connection(c)) return errno_error(EINVAL);
    std::shared_ptr<connection> c = GLUON_TRY(im_->pick());
    return c->transaction(commands);
}

namespace {

/// The reply if it is of kind k, else EPROTO (an error reply is logged).
result<reply> expect(result<reply> r, reply::kind k) {
    if (!r) return r;
    if (r->type == k) return r;
    if (r->is_error()) GLUON_WARN("redis: error reply: {}", r->str);
    return errno_error(EPROTO);
}

}  // namespace

result<std::optional<std::string>> client::get(std::string_view key) {
    auto r = GLUON_TRY(command({"GET", key}));
    if (r.is_nil()) return std::optional<std::string>();
    if (r.type != reply::kind::bulk) return unexpected(expect(std::move(r), reply::kind::bulk).error());
    return std::optional<std::string>(std::move(r.str));
}

result<void> client::set(std::string_view key, std::string_view value, duration ttl) {
    result<reply> r = errno_error(EINVAL);
    if (ttl > duration::zero()) {
        std::string ms = std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count());
        r = command({"SET", key, value, "PX", ms});
    } else {
        r = command({"SET", key, value});
    }
    auto ok = GLUON_TRY(expect(std::move(r), reply::kind::simple));
    if (ok.str != "OK") return errno_error(EPROTO);
    return {};
}

result<int64_t> client::del(std::string_view key) {
    return GLUON_TRY(expect(command({"DEL", key}), reply::kind::integer)).integer;
}

result<int64_t> client::incr(std::string_view key, int64_t by) {
    std::string n = std::to_string(by);
    return GLUON_TRY(expect(command({"INCRBY", key, n}), reply::kind::integer)).integer;
}

result<int64_t> client::publish(std::string_view channel, std::string_view message) {
    return GLUON_TRY(expect(command({"PUBLISH", channel, message}), reply::kind::integer)).integer;
}

// ---- subscriber -------------------------------------------------------------------------------

subscriber::subscriber(std::unique_ptr<connection> c) noexcept : c_(std::move(c)) {}
subscriber::subscriber(subscriber&&) noexcept = default;
subscriber& subscriber::operator=(subscriber&&) noexcept = default;
subscriber::~subscriber() = default;

result<subscriber> subscriber::connect(const options& o) {
    return subscriber(GLUON_TRY(connection::open(o)));
}

namespace {

/// A pub/sub event: ["message", ch, payload], ["pmessage", pat, ch, payload], or a
/// confirmation ["subscribe", name, count]. As an array (RESP2) or a push (RESP3).
bool as_event(const reply& r, std::string_view& kind) {
    if ((r.type != reply::kind::array && r.type != reply::kind::push) || r.elements.size() < 3) return false;
    if (!r.elements[0].is_string()) return false;
    kind = r.elements[0].str;
    return true;
}

}  // namespace

result<void> subscriber::change(std::string_view verb, std::initializer_list<std::string_view> names) {
    // Without names, (P)UNSUBSCRIBE ends every subscription of its kind (see settle); a
    // (P)SUBSCRIBE needs one.
    const bool all = names.size() == 0;
    if (all && (verb == "SUBSCRIBE" || verb == "PSUBSCRIBE")) return errno_error(EINVAL);
    std::vector<std::string_view> args{verb};
    args.insert(args.end(), names.begin(), names.end());
    // The timeout bounds the whole call: a server that keeps sending messages and does not
    // confirm would otherwise hold it for as long as it likes (each reply waited afresh).
    const deadline_t d = timeout_deadline(c_->timeout_);
    GLUON_TRY(c_->send(args, d));
    const uint64_t mine = ++calls_;
    owed_.push_back({mine, verb, {names.begin(), names.end()}, all});
    // Until this call's confirmations have come (it is the last one owed: calls are made one at
    // a time); those of earlier calls that gave up come first. Messages are kept for next().
    while (!owed_.empty() && owed_.back().id == mine) {
        auto r = GLUON_TRY(c_->next(timeout_left(d)));
        std::string_view kind;
        if (r.is_error()) {
            const bool refused_mine = owed_.front().id == mine;
            GLUON_TRY(settle(r, kind));
            if (refused_mine) return errno_error(EPROTO);
            continue;
        }
        if (!as_event(r, kind)) return errno_error(EPROTO);
        if (kind == "message" && r.elements.size() == 3) {
            early_.push_back({std::move(r.elements[1].str), {}, std::move(r.elements[2].str)});
        } else if (kind == "pmessage" && r.elements.size() == 4) {
            early_.push_back({std::move(r.elements[2].str), std::move(r.elements[1].str), std::move(r.elements[3].str)});
        } else {
            GLUON_TRY(settle(r, kind));
            continue;
        }
        // A server that floods messages and does not confirm would have them kept without end.
        const message& m = early_.back();
        early_bytes_ += sizeof(message) + m.channel.size() + m.pattern.size() + m.payload.size();
        if (early_bytes_ > k_max_early_bytes) {
            GLUON_WARN("redis: {}: over {} bytes of messages before its confirmations", verb, k_max_early_bytes);
            early_.clear();
            early_bytes_ = 0;
            c_->close();
            return errno_error(ENOBUFS);
        }
        // (Reads of messages already there may succeed past the deadline.)
        if (timeout_left(d) == duration::zero()) return errno_error(ETIMEDOUT);
    }
    return {};
}

result<void> subscriber::settle(const reply& r, std::string_view kind) {
    // The server answers calls in order: one confirmation per name, or one error reply for a
    // call it refused. A call that gave up (a timeout, an interrupt) is still owed its own, and
    // they are taken for it whenever they come, never for a later call: counted for whichever
    // call waited, an UNSUBSCRIBE's late confirmation had a SUBSCRIBE return before the server
    // had subscribed, its own confirmation then dropped by next().
    if (!owed_.empty() && r.is_error()) {
        GLUON_WARN("redis: {} refused: {}", owed_.front().verb, r.str);
        owed_.pop_front();
        return {};
    }
    auto mismatch = [&] {
        // Which calls it answers is lost from here on: so is the connection.
        GLUON_WARN("redis: a {} that answers no call", r.is_error() ? std::string_view("refusal") : kind);
        owed_.clear();
        c_->close();
        return errno_error(EPROTO);
    };
    if (owed_.empty() || !ascii_iequals(kind, owed_.front().verb)) return mismatch();
    owed_call& call = owed_.front();
    const bool on_patterns = call.verb[0] == 'P';  // PSUBSCRIBE, PUNSUBSCRIBE
    auto& subscribed = on_patterns ? patterns_ : channels_;
    if (call.all && !call.known) {
        // Every call before it is answered: the server ends what it has now, in its own order.
        call.known = true;
        call.names.assign(subscribed.begin(), subscribed.end());
        call.unnamed = call.names.empty();
    }
    if (call.unnamed) {
        if (!r.elements[1].is_nil()) return mismatch();
        owed_.pop_front();
        return {};
    }
    if (!r.elements[1].is_string()) return mismatch();
    const std::string& name = r.elements[1].str;
    auto it = call.all ? std::find(call.names.begin(), call.names.end(), name) : call.names.begin();
    if (it == call.names.end() || *it != name) return mismatch();
    call.names.erase(it);
    if (call.verb.find("UN") == std::string_view::npos)
        subscribed.insert(name);
    else if (auto s = subscribed.find(name); s != subscribed.end())
        subscribed.erase(s);
    if (call.names.empty()) owed_.pop_front();
    return {};
}

result<void> subscriber::subscribe(std::initializer_list<std::string_view> channels) { return change("SUBSCRIBE", channels); }
result<void> subscriber::psubscribe(std::initializer_list<std::string_view> patterns) { return change("PSUBSCRIBE", patterns); }
result<void> subscriber::unsubscribe(std::initializer_list<std::string_view> channels) { return change("UNSUBSCRIBE", channels); }
result<void> subscriber::punsubscribe(std::initializer_list<std::string_view> patterns) { return change("PUNSUBSCRIBE", patterns); }

result<subscriber::message> subscriber::next(duration timeout) {
    if (!early_.empty()) {
        message m = std::move(early_.front());
        early_.pop_front();
        early_bytes_ -= sizeof(message) + m.channel.size() + m.pattern.size() + m.payload.size();
        return m;
    }
    deadline_t d = timeout_deadline(timeout);
    for (;;) {
        auto r = GLUON_TRY(c_->next(timeout_left(d)));
        std::string_view kind;
        if (r.is_error() && !owed_.empty()) {  // the refusal of a call that gave up
            GLUON_TRY(settle(r, kind));
            continue;
        }
        if (!as_event(r, kind)) return errno_error(EPROTO);
        if (kind == "message" && r.elements.size() == 3) return message{r.elements[1].str, {}, r.elements[2].str};
        if (kind == "pmessage" && r.elements.size() == 4)
            return message{r.elements[2].str, r.elements[1].str, r.elements[3].str};
        // A late confirmation, of a call that gave up: not a message.
        GLUON_TRY(settle(r, kind));
    }
}

}  // namespace gluon::redis
