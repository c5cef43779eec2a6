// The frame reader and the pipelining writer of a native RPC connection.
#include "conn.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace gluon::rpc::detail {

namespace {
// Pieces up to this size are copied into the staging buffer, next to their neighbours: one
// writev of a few large iovecs costs the kernel less than one of many tiny ones.
constexpr size_t k_small_piece = 1024;
constexpr size_t k_stage_bytes = 16
                                 << 10; // allocated at the first write: idle connections are cheap
} // namespace

void join_fully(fiber& f) noexcept {
    bool interrupted = false;
    while (f.joinable()) {
        auto r = f.join();
        if (r) break;
        if (r.error() != std::errc::operation_canceled) break;
        interrupted = true;
    }
    if (interrupted) restore_interrupt();
}

frame_writer::frame_writer(net::byte_stream& s) : s_(s) {}

frame_writer::~frame_writer() {
    stop();
}

result<void> frame_writer::start() {
    fiber_ = GLUON_TRY(spawn(fiber_options{.name = "rpc-writer"}, [this] { run(); }));
    return {};
}

void frame_writer::push(out_frame& f) {
    if (broken_ || stopped_) {
        f.done(&f, false);
        return;
    }
    f.st = out_frame::state::queued;
    q_.push_back(f);
    if (idle_) {
        idle_ = false;
        wake_.set();
    }
}

bool frame_writer::unqueue(out_frame& f) noexcept {
    if (f.st != out_frame::state::queued) return false;
    q_.erase(f);
    f.st = out_frame::state::idle;
    return true;
}

void frame_writer::wait_not_writing(out_frame& f) noexcept {
    bool interrupted = false;
    while (f.st == out_frame::state::writing) {
        if (!batch_done_.wait()) interrupted = true; // the interrupt was consumed: wait on
    }
    if (interrupted) restore_interrupt();
}

void frame_writer::release(out_frame& f) noexcept {
    // The interrupt ends the writer's write with ECANCELED (or, if that write completed first,
    // its next one, or its next wait for frames): it then copies what is left. stopped_ is not
    // set, so the writer takes it as this request and goes on.
    if (f.st == out_frame::state::writing) (void)fiber_.interrupt();
    wait_not_writing(f);
}

void frame_writer::stop() noexcept {
    if (stopped_) return;
    stopped_ = true;
    if (fiber_.joinable()) {
        (void)fiber_.interrupt();
        join_fully(fiber_);
    }
    drop_all();
}

void frame_writer::drop_all() noexcept {
    while (out_frame* f = q_.pop_front()) {
        f->st = out_frame::state::idle;
        f->done(f, false);
    }
}

void frame_writer::run() {
    while (!stopped_) {
        if (q_.empty()) {
            idle_ = true;
            wake_.reset();
            (void)wake_.wait(); // ECANCELED: stop() (stopped_ is set)
            idle_ = false;
            continue;
        }
        if (!write_batch()) {
            broken_ = true;
            drop_all();
            if (broken_fn_ && !stopped_) broken_fn_(broken_ctx_);
            return;
        }
    }
}

bool frame_writer::write_batch() {
    batch_.clear();
    iov_.clear();
    if (!stage_) stage_.reset(new uint8_t[k_stage_bytes]);
    size_t staged = 0;
    uint8_t* stage = stage_.get();
    while (out_frame* f = q_.front()) {
        if (!batch_.empty() && iov_.size() + f->iov.size() > IOV_MAX) break;
        q_.pop_front();
        f->st = out_frame::state::writing;
        batch_.push_back(f);
        for (size_t i = 0; i < f->iov.size(); ++i) {
            const iovec& p = f->iov[i];
            if (p.iov_len <= k_small_piece && staged + p.iov_len <= k_stage_bytes) {
                std::memcpy(stage + staged, p.iov_base, p.iov_len);
                iovec* last = iov_.empty() ? nullptr : &iov_.back();
                if (last && static_cast<uint8_t*>(last->iov_base) + last->iov_len == stage + staged)
                    last->iov_len += p.iov_len;
                else
                    iov_.push_back({stage + staged, p.iov_len});
                staged += p.iov_len;
            } else {
                iov_.push_back(p);
            }
        }
    }
    batch_done_.reset();
    frames_ += batch_.size();
    ++writes_;
    bool ok = true;
    iovec* v = iov_.data();
    size_t n = iov_.size();
    std::unique_ptr<uint8_t[]> rest; // what was left when release() came, copied
    while (n > 0) {
        int cnt = n < size_t(IOV_MAX) ? int(n) : IOV_MAX;
        auto put = s_.writev(v, cnt);
        if (!put && put.error() == std::errc::operation_canceled && !stopped_) {
            // release(): the rest is copied and the frames' memory given back now; the copy
            // goes out whenever the peer reads.
            size_t len = 0;
            for (size_t i = 0; i < n; ++i)
                len += v[i].iov_len;
            std::unique_ptr<uint8_t[]> copy(new uint8_t[len]);
            for (size_t i = 0, at = 0; i < n; at += v[i].iov_len, ++i)
                std::memcpy(copy.get() + at, v[i].iov_base, v[i].iov_len);
            rest = std::move(copy);
            iov_.assign(1, iovec{rest.get(), len});
            v = iov_.data();
            n = 1;
            for (out_frame* f : batch_) {
                f->st = out_frame::state::idle;
                f->done(f, true); // may free f
            }
            batch_.clear();
            batch_done_.set();
            continue;
        }
        if (!put || *put == 0) {
            ok = false;
            break;
        }
        size_t k = *put;
        while (n > 0 && k >= v->iov_len) {
            k -= v->iov_len;
            ++v;
            --n;
        }
        if (n > 0) {
            v->iov_base = static_cast<uint8_t*>(v->iov_base) + k;
            v->iov_len -= k;
        }
    }
    for (out_frame* f : batch_) {
        f->st = out_frame::state::idle;
        f->done(f, ok); // may free f
    }
    batch_.clear();
    batch_done_.set();
    return ok;
}

frame_reader::frame_reader(net::byte_stream& s, size_t buffer_bytes)
    : s_(s), buf_(new uint8_t[buffer_bytes]), cap_(buffer_bytes) {}

// The frame's own deadline starts at its first wait rather than at its first byte: that saves
// a clock read per frame that arrived whole, and what lies between is this side's work only.
deadline_t frame_reader::bound(deadline_t until) noexcept {
    if (frame_timeout_ == forever) return until;
    if (!frame_waited_) {
        frame_waited_ = true;
        frame_until_ = timeout_deadline(frame_timeout_);
    }
    return std::min(until, frame_until_);
}

result<void> frame_reader::ensure(size_t n, deadline_t until, bool frame_begun) {
    if (end_ - pos_ >= n) return {};
    if (end_ == pos_) pos_ = end_ = 0; // an empty buffer: read from its start
    if (n > cap_) {
        std::unique_ptr<uint8_t[]> b(new uint8_t[n]);
        std::memcpy(b.get(), buf_.get() + pos_, end_ - pos_);
        buf_ = std::move(b);
        cap_ = n;
        end_ -= pos_;
        pos_ = 0;
    } else if (pos_ + n > cap_) {
        std::memmove(buf_.get(), buf_.get() + pos_, end_ - pos_);
        end_ -= pos_;
        pos_ = 0;
    }
    while (end_ - pos_ < n) {
        // Before a frame's first byte the wait is the connection's idle one.
        deadline_t d = frame_begun || end_ > pos_ ? bound(until) : until;
        size_t got = GLUON_TRY(s_.read_some(buf_.get() + end_, cap_ - end_, timeout_left(d)));
        if (got == 0) return errno_error(ENODATA);
        end_ += got;
    }
    return {};
}

result<wire::header> frame_reader::next_header() {
    frame_waited_ = false;
    GLUON_TRY(ensure(wire::k_header_size, k_no_deadline, false));
    wire::header h = wire::get(buf_.get() + pos_);
    pos_ += wire::k_header_size;
    left_ = h.length;
    return h;
}

result<const uint8_t*> frame_reader::take(size_t n, deadline_t until) {
    GLUON_TRY(ensure(n, until));
    const uint8_t* p = buf_.get() + pos_;
    pos_ += n;
    left_ -= n;
    return p;
}

result<void> frame_reader::fill(rx_list& t, deadline_t until) {
    for (size_t i = 0; i < t.size(); ++i) {
        rx_part& p = t[i];
        size_t done = 0;
        while (done < p.len) {
            size_t want = p.len - done;
            if (p.to && pos_ == end_ && want >= cap_ / 2) {
                // A large rest with its room ready: straight from the transport, no copy.
                size_t got = GLUON_TRY(
                    s_.read_some(p.to + done, want, timeout_left(bound(until))));
                if (got == 0) return errno_error(ENODATA);
                done += got;
                left_ -= got;
                continue;
            }
            // Otherwise through the buffer (with whatever follows: the next frames), a piece
            // at a time: a field grows only by bytes that came.
            GLUON_TRY(ensure(p.unit, until));
            size_t k = std::min(end_ - pos_, want);
            if (p.to) {
                std::memcpy(p.to + done, buf_.get() + pos_, k);
            } else {
                k -= k % p.unit;
                p.append(p.field, buf_.get() + pos_, k, p.len);
            }
            pos_ += k;
            left_ -= k;
            done += k;
        }
    }
    return {};
}

result<void> frame_reader::skip(size_t n) {
    while (n > 0) {
        GLUON_TRY(ensure(1, k_no_deadline));
        size_t k = std::min(end_ - pos_, n);
        pos_ += k;
        left_ -= k;
        n -= k;
    }
    return {};
}

} // namespace gluon::rpc::detail
