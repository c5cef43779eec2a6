#include "layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace bench {
namespace {

constexpr uint64_t k_magic = 0x676c756f6e66696fULL;  // "gluonfio"
constexpr size_t k_block = 4096;

uint64_t stamp_of(int64_t off) { return static_cast<uint64_t>(off) / k_block ^ k_magic; }

bool stamped(int fd, uint64_t size) {
    for (uint64_t off : {uint64_t{0}, (size / k_block - 1) * k_block}) {
        uint64_t v = 0;
        if (::pread(fd, &v, sizeof v, static_cast<off_t>(off)) != sizeof v) return false;
        if (v != stamp_of(static_cast<int64_t>(off))) return false;
    }
    return true;
}

// Calls fn(i, v, from, len) for each stamp, or part of one, that falls in buf, which holds the
// file's bytes [off, off + n): bytes [from, from + len) of stamp v belong at buf + i. Blocks
// start at every 4 KiB of the file, whatever the block size of the I/O: a write of 6 KiB at
// 6 KiB carries the stamp of the block at 8 KiB, and a write cut through a stamp carries part.
template <typename F>
void each_stamp(size_t n, int64_t off, F fn) {
    const uint64_t begin = static_cast<uint64_t>(off), end = begin + n;
    for (uint64_t b = begin / k_block * k_block; b < end; b += k_block) {
        const uint64_t lo = std::max(b, begin), hi = std::min(b + sizeof(uint64_t), end);
        if (lo < hi) fn(lo - begin, stamp_of(static_cast<int64_t>(b)), lo - b, hi - lo);
    }
}

}  // namespace

void stamp(char* buf, size_t n, int64_t off) noexcept {
    each_stamp(n, off, [buf](uint64_t i, uint64_t v, uint64_t from, uint64_t len) {
        std::memcpy(buf + i, reinterpret_cast<const char*>(&v) + from, len);
    });
}

bool check_stamp(const char* buf, size_t n, int64_t off) noexcept {
    bool ok = true;
    each_stamp(n, off, [&](uint64_t i, uint64_t v, uint64_t from, uint64_t len) {
        ok = ok && std::memcmp(buf + i, reinterpret_cast<const char*>(&v) + from, len) == 0;
    });
    return ok;
}

std::string layout(const fio_options& o) {
    int fd = ::open(o.filename.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return o.filename + ": " + std::strerror(errno);
    struct stat st {};
    ::fstat(fd, &st);
    if (static_cast<uint64_t>(st.st_size) >= o.size && stamped(fd, o.size)) {
        ::close(fd);
        return "";
    }
    std::fprintf(stderr, "gluon-fio: laying out %s (%llu MiB) ...\n", o.filename.c_str(),
                 static_cast<unsigned long long>(o.size >> 20));
    const size_t chunk = 1 << 20;
    std::vector<char> buf(chunk, 'g');
    for (uint64_t off = 0; off < o.size; off += chunk) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, o.size - off));
        stamp(buf.data(), n, static_cast<int64_t>(off));
        if (::pwrite(fd, buf.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
            std::string err = std::strerror(errno);
            ::close(fd);
            return "laying out " + o.filename + ": " + err;
        }
        if ((off / chunk) % 256 == 255)
            std::fprintf(stderr, "gluon-fio:   %llu MiB\n", static_cast<unsigned long long>((off + n) >> 20));
    }
    ::fsync(fd);
    ::close(fd);
    return "";
}

}  // namespace bench
