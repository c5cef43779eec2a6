// x86-64 context switch. Private to the runtime.
//
// Why an inline asm statement instead of a textbook out-of-line switch: the asm saves only rsp,
// rbp and the resume address; every other general-purpose and vector register is listed as
// clobbered, so the compiler spills exactly the registers that are live at the call site (often
// none) instead of the switch pushing all six callee-saved registers on every switch. Resuming
// goes through an indirect `jmp`, not `ret`: a `ret` to a different stack than the matching
// `call` always mispredicts the return stack buffer.
//
// Nothing is pushed on the stack by the asm, so the red zone of the enclosing function is safe.
// MXCSR and the x87 control word are not switched (ADR 0002): fibers share the vCPU's floating
// point environment.
#pragma once

#if !defined(__x86_64__)
#error "gluon's context switch is implemented for x86-64 only"
#endif

namespace gluon::detail {

struct cpu_context {
    void* sp = nullptr;
    void* ip = nullptr;
    void* bp = nullptr;
};

#if defined(__AVX512F__)
#define GLUON_AVX512_CLOBBERS                                                                   \
    , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6",  \
        "k7"
#else
#define GLUON_AVX512_CLOBBERS
#endif

/// Saves the current execution state into *from and continues at *to. Returns when some other
/// context switches back to *from.
__attribute__((always_inline)) inline void switch_context(cpu_context* from, cpu_context* to) {
    asm volatile(
        "leaq 1f(%%rip), %%rax\n\t"
        "movq %%rax, 8(%%rdi)\n\t"
        "movq %%rsp, 0(%%rdi)\n\t"
        "movq %%rbp, 16(%%rdi)\n\t"
        "movq 0(%%rsi), %%rsp\n\t"
        "movq 16(%%rsi), %%rbp\n\t"
        "jmpq *8(%%rsi)\n\t"
        "1:\n\t"
        : "+D"(from), "+S"(to)
        :
        : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
          "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
          "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "st", "st(1)", "st(2)",
          "st(3)", "st(4)", "st(5)", "st(6)", "st(7)" GLUON_AVX512_CLOBBERS);
}

/// Entry of a new context (defined in context.cc): calls fiber_entry(arg) with the `arg` stored
/// at the top of the new stack by make_context. fiber_entry must never return.
extern "C" void gluon_context_trampoline();

/// Prepares *ctx so that switching to it runs entry(arg) on the stack whose highest address is
/// `stack_top`.
void make_context(cpu_context* ctx, void* stack_top, void (*entry)(void*), void* arg);

}  // namespace gluon::detail
