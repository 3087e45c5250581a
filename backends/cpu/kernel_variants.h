// CPU kernels are compiled once per instruction set (DEFAULT, AVX2, AVX512; CMake sets
// CPU_CAPABILITY), the way ATen builds its own CPU kernels. A kernel file ends with
//
//   BACKPLANE_CPU_KERNEL(add, add)            // or BACKPLANE_CPU_WRITING_KERNEL
//
// Each build of the file records its variant; the DEFAULT build also registers the op
// on the CPU key with a trampoline that calls the chosen variant, resolved on the first
// call (after every variant of the plugin has been recorded).
//
// Which variant runs follows ATen (DispatchStub.h): on an AVX512 processor a kernel runs
// its AVX2 build unless its file opts in with BACKPLANE_CPU_KERNEL_AVX512 (or
// BACKPLANE_CPU_WRITING_KERNEL_AVX512), as ALSO_REGISTER_AVX512_DISPATCH does for aten's
// softmax. A memory-bound loop gains nothing from 512-bit vectors and can lose clock
// speed (float32 add ran slower in its AVX512 build than in its AVX2 build: see
// bench/results/).
// BACKPLANE_CPU_CAPABILITY (capability.h) makes every kernel use one instruction set.
#pragma once

#include "capability.h"

#include <backplane/plugin/kernel.h>

namespace backplane::cpu {

using AnyFunction = void (*)();

// Records one instruction set's kernel for op; `preferred`: the kernel opted into this
// (AVX512) build. Returns true (for a static initializer).
bool add_variant(const char* op, Capability capability, AnyFunction fn, bool preferred);
// The kernel of op for the requested capability, else the widest the processor supports
// (AVX512 only where op opted in), falling back to narrower instruction sets.
AnyFunction selected_variant(const char* op);

template <OpName Op, typename Signature>
struct SelectedVariant;

template <OpName Op, typename R, typename... Args>
struct SelectedVariant<Op, R(Args...)> {
  static R call(Args... args) {
    static const auto fn = reinterpret_cast<R (*)(Args...)>(selected_variant(Op.value));
    return fn(args...);
  }
};

}  // namespace backplane::cpu

// The rest is for kernel files only, which CMake builds once per instruction set with
// CPU_CAPABILITY defined.
#ifdef CPU_CAPABILITY
namespace backplane::cpu {

#if defined(CPU_CAPABILITY_AVX512)
inline constexpr Capability kBuiltCapability = Capability::Avx512;
#elif defined(CPU_CAPABILITY_AVX2)
inline constexpr Capability kBuiltCapability = Capability::Avx2;
#else
inline constexpr Capability kBuiltCapability = Capability::Default;
#endif

}  // namespace backplane::cpu

#define BACKPLANE_CPU_VARIANT_(op, fn, preferred)                                       \
  namespace {                                                                           \
  const bool op##_variant_recorded = ::backplane::cpu::add_variant(                     \
      #op, ::backplane::cpu::kBuiltCapability,                                          \
      reinterpret_cast<::backplane::cpu::AnyFunction>(&::backplane::cpu::CPU_CAPABILITY::fn), preferred); \
  constexpr auto op##_selected = &::backplane::cpu::SelectedVariant<                    \
      #op, ::backplane::detail::FunctionType<decltype(&::backplane::cpu::CPU_CAPABILITY::fn)>::type>::call; \
  }

#ifdef CPU_CAPABILITY_DEFAULT
#define BACKPLANE_CPU_KERNEL_(op, fn, preferred) \
  BACKPLANE_CPU_VARIANT_(op, fn, preferred) BACKPLANE_KERNEL(CPU, op, op##_selected)
#define BACKPLANE_CPU_WRITING_KERNEL_(op, fn, preferred) \
  BACKPLANE_CPU_VARIANT_(op, fn, preferred) BACKPLANE_WRITING_KERNEL(CPU, op, op##_selected)
#else
#define BACKPLANE_CPU_KERNEL_(op, fn, preferred) BACKPLANE_CPU_VARIANT_(op, fn, preferred)
#define BACKPLANE_CPU_WRITING_KERNEL_(op, fn, preferred) BACKPLANE_CPU_VARIANT_(op, fn, preferred)
#endif
#define BACKPLANE_CPU_KERNEL(op, fn) BACKPLANE_CPU_KERNEL_(op, fn, false)
#define BACKPLANE_CPU_WRITING_KERNEL(op, fn) BACKPLANE_CPU_WRITING_KERNEL_(op, fn, false)
#define BACKPLANE_CPU_KERNEL_AVX512(op, fn) BACKPLANE_CPU_KERNEL_(op, fn, true)
#define BACKPLANE_CPU_WRITING_KERNEL_AVX512(op, fn) BACKPLANE_CPU_WRITING_KERNEL_(op, fn, true)
#endif  // CPU_CAPABILITY
