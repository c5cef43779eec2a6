// Fiber-switch annotations for AddressSanitizer and ThreadSanitizer. Private to the runtime.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define GLUON_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GLUON_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define GLUON_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GLUON_TSAN 1
#endif
#endif

#ifdef GLUON_ASAN
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
}
#endif

#ifdef GLUON_TSAN
extern "C" {
void* __tsan_get_current_fiber(void);
void* __tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void* fiber);
void __tsan_switch_to_fiber(void* fiber, unsigned flags);
}
#endif
