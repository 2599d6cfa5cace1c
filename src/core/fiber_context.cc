#include "core/fiber_context.h"

#include <cstdint>

#ifdef STEPS_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#endif

#ifdef STEPS_FIBER_SWITCH_X86_64

// steps_fiber_switch(void** save_sp, void* load_sp): pushes the registers
// the System V ABI says a call keeps (rbp, rbx, r12-r15) and the SSE and
// x87 control words, stores the stack pointer in *save_sp, takes load_sp as
// the stack pointer and pops the same from it; `ret` then resumes whatever
// saved it, or, for a new context, steps_fiber_entry.
//
// steps_fiber_entry: the first code a new context runs. MakeFiberContext
// leaves the entry function in r12 and a 16-byte aligned stack pointer, so
// the call below meets the ABI. The entry function never returns.
asm(R"(
  .pushsection .text
  .p2align 4
  .globl steps_fiber_switch
  .hidden steps_fiber_switch
  .type steps_fiber_switch, @function
steps_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $16, %rsp
  stmxcsr 8(%rsp)
  fnstcw 12(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr 8(%rsp)
  fldcw 12(%rsp)
  addq $16, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size steps_fiber_switch, .-steps_fiber_switch

  .p2align 4
  .globl steps_fiber_entry
  .hidden steps_fiber_entry
  .type steps_fiber_entry, @function
steps_fiber_entry:
  .cfi_startproc
  .cfi_undefined rip
  xorl %ebp, %ebp
  callq *%r12
  ud2
  .cfi_endproc
  .size steps_fiber_entry, .-steps_fiber_entry
  .popsection
)");

extern "C" void steps_fiber_switch(void** save_sp, void* load_sp);
extern "C" void steps_fiber_entry();

namespace steps::fiber_internal {

void MakeFiberContext(FiberContext& c, char* stack, size_t bytes,
                      void (*entry)()) {
#ifdef STEPS_FIBER_ASAN
  // A stack taken over from a finished fiber still has the redzones of
  // that fiber's frames marked (its last switch left them); a new context
  // starts clean, as makecontext's interception would make it.
  __asan_unpoison_memory_region(stack, bytes);
#endif
  uint32_t mxcsr = 0;
  uint16_t fpucw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  // The entry's stack pointer: 16-byte aligned, with 16 bytes above it
  // that nothing reads (an unwinder stops at steps_fiber_entry).
  auto* p = reinterpret_cast<uint64_t*>(stack + bytes - 16);
  *--p = reinterpret_cast<uint64_t>(&steps_fiber_entry);  // Popped by ret.
  *--p = 0;                                                // rbp
  *--p = 0;                                                // rbx
  *--p = reinterpret_cast<uint64_t>(entry);                // r12
  *--p = 0;                                                // r13
  *--p = 0;                                                // r14
  *--p = 0;                                                // r15
  *--p = uint64_t{mxcsr} | (uint64_t{fpucw} << 32);        // 8(%rsp)
  *--p = 0;                                                // 0(%rsp)
  c.sp = p;
}

void SwitchFiberContext(FiberContext& from, FiberContext& to) {
  steps_fiber_switch(&from.sp, to.sp);
}

}  // namespace steps::fiber_internal

#else  // ucontext

namespace steps::fiber_internal {

void MakeFiberContext(FiberContext& c, char* stack, size_t bytes,
                      void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}

void SwitchFiberContext(FiberContext& from, FiberContext& to) {
  swapcontext(&from.uc, &to.uc);
}

}  // namespace steps::fiber_internal

#endif
