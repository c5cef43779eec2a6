#include "context.h"

#include <cstdint>

// The trampoline pops (entry, arg) prepared by make_context and calls entry(arg) with a 16-byte
// aligned stack. `.cfi_undefined rip` marks the outermost frame so debuggers and unwinders stop
// here instead of walking into garbage.
asm(R"(
    .text
    .globl gluon_context_trampoline
    .type gluon_context_trampoline, @function
gluon_context_trampoline:
    .cfi_startproc
    .cfi_undefined rip
    movq 8(%rsp), %rdi
    movq 0(%rsp), %rax
    addq $16, %rsp
    xorl %ebp, %ebp
    callq *%rax
    ud2
    .cfi_endproc
    .size gluon_context_trampoline, .-gluon_context_trampoline
)");

namespace gluon::detail {

void make_context(cpu_context* ctx, void* stack_top, void (*entry)(void*), void* arg) {
    auto top = reinterpret_cast<uintptr_t>(stack_top) & ~uintptr_t{15};
    auto* slots = reinterpret_cast<void**>(top - 16);  // [entry, arg]; rsp = top after the pops
    slots[0] = reinterpret_cast<void*>(entry);
    slots[1] = arg;
    ctx->sp = slots;
    ctx->ip = reinterpret_cast<void*>(&gluon_context_trampoline);
    ctx->bp = nullptr;
}

}  // namespace gluon::detail
