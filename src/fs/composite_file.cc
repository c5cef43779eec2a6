// linear and striped files: map a logical range onto parts, piece by piece. A piece that comes
// back short ends the request (a short write is reported as is), except a read that stops
// before the file's end: a part can end before the file does, its missing bytes a hole.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "gluon/fs/decorators.h"

namespace gluon::fs {
namespace {

struct piece {
    size_t part;
    int64_t off;  // in the part
    size_t len;
};

class composite_file : public file {
public:
    explicit composite_file(std::vector<std::unique_ptr<file>> parts) : parts_(std::move(parts)) {}

    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        return transfer(static_cast<char*>(buf), n, off, false, d);
    }
    result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        return transfer(const_cast<char*>(static_cast<const char*>(buf)), n, off, true, d);
    }
    result<void> fsync() noexcept override {
        for (auto& p : parts_)
            if (auto r = p->fsync(); !r) return r;
        return {};
    }
    result<void> fdatasync() noexcept override {
        for (auto& p : parts_)
            if (auto r = p->fdatasync(); !r) return r;
        return {};
    }
    result<void> ftruncate(int64_t) noexcept override { return errno_error(EOPNOTSUPP); }
    result<void> close() noexcept override {
        result<void> first;
        for (auto& p : parts_)
            if (auto r = p->close(); !r && first) first = r;
        return first;
    }
    result<struct stat> fstat() noexcept override {
        auto st = parts_[0]->fstat();
        if (!st) return st;
        auto size = GLUON_TRY(logical_size());
        st->st_size = static_cast<off_t>(size);
        return st;
    }

protected:
    // The piece of [off, off + n) that starts at off.
    virtual piece locate(int64_t off, size_t n) const noexcept = 0;
    virtual result<uint64_t> logical_size() noexcept = 0;
    std::vector<std::unique_ptr<file>> parts_;

private:
    result<size_t> transfer(char* p, size_t n, int64_t off, bool write, deadline_t d) noexcept {
        if (off < 0) return errno_error(EINVAL);
        size_t done = 0;
        std::optional<uint64_t> size;  // the logical size, looked up at the first short read
        while (done < n) {
            piece pc = locate(off + static_cast<int64_t>(done), n - done);
            auto r = write ? parts_[pc.part]->pwrite(p + done, pc.len, pc.off, time_left(d))
                           : parts_[pc.part]->pread(p + done, pc.len, pc.off, time_left(d));
            if (!r) return done ? result<size_t>(done) : r;
            done += *r;
            if (*r == pc.len) continue;
            if (write) break;
            // The part ended, not necessarily the file: a stripe never written lies before the
            // ones written after it (its part is shorter than the others), and it reads as
            // zeros up to the file's end, as a hole does. Reads are short only at the end.
            if (!size) {
                auto s = logical_size();
                if (!s) return done ? result<size_t>(done) : unexpected(s.error());
                size = *s;
            }
            const uint64_t at = static_cast<uint64_t>(off) + done;
            if (at >= *size) break;
            const size_t hole = static_cast<size_t>(std::min<uint64_t>(pc.len - *r, *size - at));
            std::memset(p + done, 0, hole);
            done += hole;
            if (hole < pc.len - *r) break;
        }
        return done;
    }
};

class linear_file final : public composite_file {
public:
    linear_file(std::vector<std::unique_ptr<file>> parts, std::vector<uint64_t> sizes)
        : composite_file(std::move(parts)), sizes_(std::move(sizes)) {}

private:
    piece locate(int64_t off, size_t n) const noexcept override {
        uint64_t o = static_cast<uint64_t>(off);
        for (size_t i = 0; i + 1 < parts_.size(); ++i) {
            if (o < sizes_[i]) return {i, static_cast<int64_t>(o), static_cast<size_t>(std::min<uint64_t>(n, sizes_[i] - o))};
            o -= sizes_[i];
        }
        return {parts_.size() - 1, static_cast<int64_t>(o), n};
    }
    result<uint64_t> logical_size() noexcept override {
        uint64_t total = 0;
        for (size_t i = 0; i + 1 < parts_.size(); ++i) total += sizes_[i];
        auto st = GLUON_TRY(parts_.back()->fstat());
        return total + static_cast<uint64_t>(st.st_size);
    }
    std::vector<uint64_t> sizes_;
};

class striped_file final : public composite_file {
public:
    striped_file(std::vector<std::unique_ptr<file>> parts, size_t stripe)
        : composite_file(std::move(parts)), stripe_(stripe) {}

private:
    piece locate(int64_t off, size_t n) const noexcept override {
        const uint64_t o = static_cast<uint64_t>(off), k = o / stripe_, within = o % stripe_;
        const size_t cnt = parts_.size();
        return {static_cast<size_t>(k % cnt), static_cast<int64_t>((k / cnt) * stripe_ + within),
                static_cast<size_t>(std::min<uint64_t>(n, stripe_ - within))};
    }
    result<uint64_t> logical_size() noexcept override {
        uint64_t end = 0;
        for (size_t i = 0; i < parts_.size(); ++i) {
            auto st = GLUON_TRY(parts_[i]->fstat());
            if (st.st_size == 0) continue;
            const uint64_t last = static_cast<uint64_t>(st.st_size) - 1;
            end = std::max(end, ((last / stripe_) * parts_.size() + i) * stripe_ + last % stripe_ + 1);
        }
        return end;
    }
    size_t stripe_;
};

}  // namespace

result<std::unique_ptr<file>> make_linear(std::vector<std::unique_ptr<file>> parts) {
    if (parts.empty()) return errno_error(EINVAL);
    std::vector<uint64_t> sizes;
    for (auto& p : parts) {
        if (!p) return errno_error(EINVAL);
        auto st = GLUON_TRY(p->fstat());
        sizes.push_back(static_cast<uint64_t>(st.st_size));
    }
    return std::unique_ptr<file>(new linear_file(std::move(parts), std::move(sizes)));
}

result<std::unique_ptr<file>> make_striped(std::vector<std::unique_ptr<file>> parts, size_t stripe_size) {
    if (parts.empty() || stripe_size == 0) return errno_error(EINVAL);
    for (auto& p : parts)
        if (!p) return errno_error(EINVAL);
    return std::unique_ptr<file>(new striped_file(std::move(parts), stripe_size));
}

}  // namespace gluon::fs
