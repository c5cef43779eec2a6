// Creating contexts; the switch itself is in gluon/runtime/detail/hot.h. Private to the runtime.
#pragma once

#include <cstdint>

#include "gluon/runtime/detail/hot.h"

namespace gluon::detail {

/// Entry of a new context (defined in context.cc): calls fiber_entry(arg) with the `arg` stored
/// at the top of the new stack by make_context. fiber_entry must never return.
extern "C" void gluon_context_trampoline();

/// Prepares *ctx so that switching to it runs entry(arg) on the stack whose highest address is
/// `stack_top`.
inline void make_context(cpu_context* ctx, void* stack_top, void (*entry)(void*), void* arg) {
    auto top = reinterpret_cast<uintptr_t>(stack_top) & ~uintptr_t{15};
    auto* slots = reinterpret_cast<void**>(top - 16);  // [entry, arg]; rsp = top after the pops
    slots[0] = reinterpret_cast<void*>(entry);
    slots[1] = arg;
    ctx->sp = slots;
    ctx->ip = reinterpret_cast<void*>(&gluon_context_trampoline);
    ctx->bp = nullptr;
}

}  // namespace gluon::detail
