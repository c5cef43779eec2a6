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
/// Stamps every 4 KiB block of buf, which goes to file offset off.
void stamp(char* buf, size_t n, int64_t off) noexcept;
/// Checks the stamps of buf read from offset off (blocks not 4 KiB aligned are not checked).
bool check_stamp(const char* buf, size_t n, int64_t off) noexcept;

}  // namespace bench
