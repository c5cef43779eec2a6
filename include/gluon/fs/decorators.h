// File decorators: each wraps a file and is a file.
//   aligned    turns unaligned I/O into aligned I/O (for O_DIRECT files)
//   throttled  limits operations per second and bytes per second
//   linear     concatenates files into one address space
//   striped    spreads fixed-size stripes round-robin over files (RAID-0 style)
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "gluon/fs/file.h"

namespace gluon::fs {

/// Every request to `inner` becomes aligned to `alignment` (a power of two, >= 512): reads
/// widen to whole blocks through an aligned bounce buffer; a write that does not cover whole
/// blocks reads the edge blocks, merges and writes them back, serialised per file so two
/// writers of one block cannot lose each other's bytes; a write that extends the file leaves
/// it at its exact new length. Aligned requests go straight through, but, like ftruncate and
/// fallocate, wait while such a merge is in progress (it would write back or cut off their bytes);
/// a write's wait counts towards its timeout (ETIMEDOUT) and ends if the fiber is interrupted
/// (ECANCELED). Errors: EINVAL for a bad alignment (returned as a null result), plus those of inner.
result<std::unique_ptr<file>> make_aligned(std::unique_ptr<file> inner, size_t alignment = 4096);

struct throttle_limits {
    double iops = 0;         // operations per second; 0 = unlimited
    double bytes_per_s = 0;  // 0 = unlimited
};
/// Delays each operation (parking the fiber) so that the limits hold from the first request
/// on, with no burst. fsync/fstat/ftruncate are not counted.
std::unique_ptr<file> make_throttled(std::unique_ptr<file> inner, throttle_limits limits);

/// parts[0] then parts[1] ... as one file. Each part but the last keeps its size at creation
/// (fstat); the last grows. ftruncate: EOPNOTSUPP. Errors: EINVAL (no parts), fstat's.
result<std::unique_ptr<file>> make_linear(std::vector<std::unique_ptr<file>> parts);
/// Stripe k lives in parts[k % n] at offset (k / n) * stripe_size. The size is the end of the
/// furthest stripe written; a stripe before it that was never written (its part ends first)
/// reads as zeros, like a hole. ftruncate: EOPNOTSUPP. Errors: EINVAL (no parts, stripe_size 0).
result<std::unique_ptr<file>> make_striped(std::vector<std::unique_ptr<file>> parts, size_t stripe_size);

}  // namespace gluon::fs
