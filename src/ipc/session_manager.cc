// ipc::session_manager: sessions to one server, a stream pool, following hot restarts, and
// dialling dead sessions again.
#include "gluon/ipc/session_manager.h"

#include "gluon/common/clock.h"
#include "gluon/common/log.h"
#include "session_impl.h"

namespace gluon::ipc {

namespace {
constexpr unsigned k_streams_per_turn = 32;  // shmipc-go's GetStream moves on every 32 calls

struct slot {
    session s;
    std::vector<stream> pool;
    int64_t redial_at = 0;   // a dead session is dialled again from then on
    int64_t backoff_ns = 0;  // 0: the next redial failure waits redial_min

    void drop_pool() {
        for (auto& p : pool) (void)p.close();
        pool.clear();
    }
    void close() {
        drop_pool();
        (void)s.close();
    }
};
}  // namespace

struct session_manager::state {
    manager_options opts;
    gluon::mutex mu;
    std::vector<slot> slots;
    std::vector<session> retired;  // pre-hot-restart sessions, until the old server hangs up
    std::shared_ptr<detail::region_ref> region;  // the current sessions'
    unsigned calls = 0;
    unsigned restarts = 0;
    unsigned redials = 0;
    bool closed = false;

    result<session> dial(const std::shared_ptr<detail::region_ref>& r) {
        auto si = GLUON_TRY(detail::client_handshake(opts.address, opts.session, r));
        si->start_reader();
        return session(std::move(si));
    }

    // New shared memory and every session on it; `region` changes only if all connect.
    result<void> connect_all(std::vector<slot>& out) {
        auto r = GLUON_TRY(detail::create_region(opts.session, detail::unique_prefix(opts.session.path_prefix) + "_buffer"));
        for (unsigned i = 0; i < std::max(1u, opts.sessions); ++i) out.push_back({GLUON_TRY(dial(r)), {}});
        region = std::move(r);
        return {};
    }

    // Mu held. A HotRestart on any session: move every session to the new server.
    result<void> follow_hot_restart() {
        std::optional<uint64_t> epoch;
        for (auto& s : slots)
            if ((epoch = s.s.hot_restart_requested())) break;
        if (!epoch) return {};
        std::vector<slot> fresh;
        GLUON_TRY(connect_all(fresh));
        for (auto& s : slots) {
            s.drop_pool();
            (void)s.s.ack_hot_restart(*epoch);
            retired.push_back(std::move(s.s));
        }
        slots = std::move(fresh);
        ++restarts;
        GLUON_INFO("ipc: followed a hot restart (epoch {})", *epoch);
        return {};
    }

    void back_off(slot& s, int64_t now) const {
        const int64_t lo = std::max<int64_t>(0, opts.redial_min.count());
        const int64_t hi = std::max(lo, opts.redial_max == forever ? INT64_MAX / 4 : opts.redial_max.count());
        s.backoff_ns = s.backoff_ns ? std::min(hi, s.backoff_ns * 2) : lo;
        s.redial_at = now + s.backoff_ns;
    }

    // Mu held. Dials the dead sessions whose backoff has passed. When every session is dead the
    // server went away: the new ones get new shared memory (slices the old server held are
    // lost with the old region). Errors: the failed redial's, when every session is dead.
    result<void> redial_dead() {
        bool all_dead = true, any_dead = false;
        for (auto& s : slots) {
            const bool dead = !s.s.healthy();
            all_dead &= dead;
            any_dead |= dead;
        }
        if (!any_dead) return {};  // the common case: no clock read per stream
        const int64_t now = mono_now_ns();
        bool due = false;
        for (auto& s : slots) due |= !s.s.healthy() && now >= s.redial_at;
        if (!due) return {};
        if (all_dead) {
            std::vector<slot> fresh;
            if (auto r = connect_all(fresh); !r) {
                for (auto& s : slots) back_off(s, now);
                return r;
            }
            for (auto& s : slots) s.close();
            slots = std::move(fresh);
            ++redials;
            GLUON_INFO("ipc: every session to the server had died; connected {} again", slots.size());
            return {};
        }
        for (auto& s : slots) {
            if (s.s.healthy() || now < s.redial_at) continue;
            auto fresh = dial(region);
            if (!fresh) {
                back_off(s, now);
                continue;
            }
            s.close();
            s = {std::move(*fresh), {}};
            ++redials;
        }
        return {};
    }

    void reap_retired() {
        for (size_t i = 0; i < retired.size();) {
            if (retired[i].healthy()) {
                ++i;
                continue;
            }
            (void)retired[i].close();
            retired.erase(retired.begin() + long(i));
        }
    }
};

session_manager::session_manager() noexcept = default;
session_manager::session_manager(session_manager&&) noexcept = default;
session_manager& session_manager::operator=(session_manager&&) noexcept = default;
session_manager::~session_manager() { (void)close(); }

result<session_manager> session_manager::connect(const manager_options& opts) {
    session_manager m;
    m.st_ = std::make_unique<state>();
    m.st_->opts = opts;
    GLUON_TRY(m.st_->connect_all(m.st_->slots));
    return m;
}

result<stream> session_manager::get_stream() {
    if (!st_) return errno_error(EBADF);
    std::lock_guard lk(st_->mu);
    if (st_->closed) return errno_error(EBADF);
    GLUON_TRY(st_->follow_hot_restart());
    if (!st_->retired.empty()) st_->reap_retired();
    GLUON_TRY(st_->redial_dead());
    size_t n = st_->slots.size();
    size_t first = (st_->calls++ / k_streams_per_turn) % n;
    std::error_code last;
    for (size_t k = 0; k < n; ++k) {
        slot& s = st_->slots[(first + k) % n];
        if (!s.s.healthy()) {
            last = s.s.error();
            continue;
        }
        while (!s.pool.empty()) {
            stream st = std::move(s.pool.back());
            s.pool.pop_back();
            // The server may have closed it (or sent on it) while it sat in the pool: put_back
            // looked at it only when it came back.
            if (st.is_open() && st.readable() == 0) return st;
            (void)st.close();
        }
        auto st = s.s.open_stream();
        if (st) return st;
        last = st.error();
    }
    return unexpected(last);
}

void session_manager::put_back(stream s) {
    if (!st_ || !s.valid()) return;
    std::lock_guard lk(st_->mu);
    for (auto& sl : st_->slots) {
        if (!sl.s.healthy()) continue;
        // The stream's own session only: a stream of a retired session is closed.
        if (sl.s.impl_owner() == s.owner() && s.is_open() && !s.in_fallback() && s.readable() == 0 &&
            sl.pool.size() < st_->opts.max_pooled) {
            sl.pool.push_back(std::move(s));
            return;
        }
    }
    (void)s.close();
}

result<void> session_manager::close() {
    if (!st_) return {};
    std::lock_guard lk(st_->mu);
    if (st_->closed) return {};
    st_->closed = true;
    for (auto& sl : st_->slots) sl.close();
    for (auto& r : st_->retired) (void)r.close();
    st_->slots.clear();
    st_->retired.clear();
    return {};
}

std::vector<const session*> session_manager::sessions() const {
    std::vector<const session*> out;
    if (!st_) return out;
    for (auto& sl : st_->slots) out.push_back(&sl.s);
    return out;
}

unsigned session_manager::hot_restarts() const noexcept { return st_ ? st_->restarts : 0; }

unsigned session_manager::redials() const noexcept { return st_ ? st_->redials : 0; }

}  // namespace gluon::ipc
