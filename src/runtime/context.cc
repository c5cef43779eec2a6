#include "context.h"

// The trampoline pops (entry, arg) prepared by make_context and enters entry(arg) with the stack
// aligned as after a call. It jumps instead of calling (the pushed 0 is a return address nobody
// uses): the CPU's return-stack predictor then holds, when the fiber ends, exactly what it held
// when the fiber was switched to, so the fiber that resumes next (typically its joiner) returns
// up its own call chain without mispredicting every `ret` (fiber_exit is inlined into fiber_main
// for the same reason: ADR 0011). `.cfi_undefined rip` marks the outermost frame so debuggers
// and unwinders stop here instead of walking into garbage.
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
    pushq $0
    jmpq *%rax
    .cfi_endproc
    .size gluon_context_trampoline, .-gluon_context_trampoline
)");
