// The benchmark file: laid out once with a stamp at the start of every 4 KiB block (the block's
// index), so every read can be checked for coming from the right place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "options.h"

namespace bench {

/// Creates or extends o.filename to o.size bytes of stamped blocks (skipped when the file is
/// already that size and stamped). Returns an error message, or "".
std::string layout(const fio_options& o);
/// Stamps buf, which goes to file offset off: every stamp, or part of one, that falls in it (the
/// block size and off need not be multiples of 4 KiB).
void stamp(char* buf, size_t n, int64_t off) noexcept;
/// Checks every stamp, or part of one, in buf read from offset off.
bool check_stamp(const char* buf, size_t n, int64_t off) noexcept;

}  // namespace bench
