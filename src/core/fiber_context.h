// The machine context a fiber runs in, and the switch between two of them.
// On x86-64 Linux the switch saves and loads the callee-saved registers,
// the stack pointer and the floating-point control words: no system call.
// Elsewhere (or built with STEPS_FIBER_UCONTEXT) it is ucontext, whose
// swapcontext also saves and sets the signal mask, one system call per
// switch. A fiber therefore runs with its carrier thread's signal mask on
// x86-64 (nothing in steps changes a mask across a switch), and the x87
// status word (exception flags) stays with the thread; the SSE control and
// status register and the x87 control word go with the fiber.
// The switch returns on another stack, which a CET shadow stack forbids:
// fiber_context.cc is built without the shadow-stack mark
// (-fcf-protection=branch), so a binary holding it never runs with one.
#ifndef STEPS_CORE_FIBER_CONTEXT_H_
#define STEPS_CORE_FIBER_CONTEXT_H_

#include <cstddef>

// AddressSanitizer is told of every switch (fiber.cc) and of every new
// context's stack (fiber_context.cc).
#if defined(__SANITIZE_ADDRESS__)
#define STEPS_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STEPS_FIBER_ASAN 1
#endif
#endif

#if defined(__x86_64__) && defined(__linux__) && !defined(STEPS_FIBER_UCONTEXT)
#define STEPS_FIBER_SWITCH_X86_64 1
#else
#include <ucontext.h>
#endif

namespace steps::fiber_internal {

struct FiberContext {
#ifdef STEPS_FIBER_SWITCH_X86_64
  void* sp = nullptr;  // Where the switch left the saved registers.
#else
  ucontext_t uc;
#endif
};

// Makes `c` start `entry` on the stack [stack, stack + bytes) when first
// switched to. `entry` must never return (it switches away for good).
// REQUIRES: stack + bytes is 16-byte aligned; bytes >= 4096.
void MakeFiberContext(FiberContext& c, char* stack, size_t bytes,
                      void (*entry)());

// Saves the running context into `from` and runs `to`; returns when
// something switches back to `from`.
void SwitchFiberContext(FiberContext& from, FiberContext& to);

}  // namespace steps::fiber_internal

#endif  // STEPS_CORE_FIBER_CONTEXT_H_
