#include "gluon/http/server.h"

#include "connection.h"

namespace gluon::http {

void serve_connection(net::byte_stream& s, const handler& h, const server_options& opts, const bool* stopping) {
    detail::connection c(s, h, opts, stopping);
    c.run();
}

struct server::state {
    handler h;
    server_options opts;
    bool stopping = false;
    intrusive_list<detail::connection, &detail::connection::hook> conns;
    size_t count = 0;
    std::unique_ptr<net::server> net;
};

result<std::unique_ptr<server>> server::start(const net::address& addr, handler h, server_options opts) {
    std::unique_ptr<server> srv(new server);
    srv->st_ = std::make_unique<state>();
    state* st = srv->st_.get();
    st->h = std::move(h);
    st->opts = std::move(opts);
    // Every read of a connection goes through its byte_stream on the connection's fiber (a
    // handler that takes the connection over, for an upgrade or a tunnel, reads it that way too).
    st->opts.read_ahead = true;
    st->net = GLUON_TRY(net::server::start(
        addr,
        [st](net::byte_stream& s) {
            detail::connection c(s, st->h, st->opts, &st->stopping);
            st->conns.push_back(c);
            ++st->count;
            // Off the list however run() ends (bad_alloc growing a buffer escapes it): stop()
            // walks the list.
            struct unlist {
                state* st;
                detail::connection& c;
                ~unlist() {
                    st->conns.erase(c);
                    --st->count;
                }
            } guard{st, c};
            c.run();
        },
        st->opts));
    return srv;
}

server::~server() {
    if (st_) stop(duration::zero());
}

const net::address& server::local_address() const noexcept { return st_->net->local_address(); }

size_t server::connections() const noexcept { return st_->count; }

void server::stop(duration grace) noexcept {
    st_->stopping = true;
    st_->conns.for_each([](detail::connection& c) { c.wake_for_stop(); });
    st_->net->stop(grace);
}

}  // namespace gluon::http
