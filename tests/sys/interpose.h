// The counters of interpose.c: calls that reached libc's system-call wrappers.
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Zeroes every counter.
void interposed_reset(void);
/// Calls counted since the last reset; report gets "name=count ..." for the non-zero ones.
unsigned long interposed_total(char* report, size_t n);

#ifdef __cplusplus
}
#endif
