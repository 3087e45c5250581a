// CPU kernels are compiled once per instruction set (DEFAULT, AVX2, AVX512; CMake sets
// CPU_CAPABILITY), the way ATen builds its own CPU kernels. A kernel file ends with
//
//   BACKPLANE_CPU_KERNEL(add, add)            // or BACKPLANE_CPU_WRITING_KERNEL
//
// Each build of the file records its variant; the DEFAULT build also registers the op
// on the CPU key with a trampoline that calls the variant capability() picked, resolved
// on the first call (after every variant of the plugin has been recorded).
#pragma once

#include "capability.h"

#include <backplane/kernel.h>

namespace backplane::cpu {

using AnyFunction = void (*)();

// Records one instruction set's kernel for op; returns true (for a static initializer).
bool add_variant(const char* op, Capability capability, AnyFunction fn);
// The kernel of op for capability(), falling back to narrower instruction sets.
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

#define BACKPLANE_CPU_VARIANT_(op, fn)                                                  \
  namespace {                                                                           \
  const bool op##_variant_recorded = ::backplane::cpu::add_variant(                     \
      #op, ::backplane::cpu::kBuiltCapability,                                          \
      reinterpret_cast<::backplane::cpu::AnyFunction>(&::backplane::cpu::CPU_CAPABILITY::fn)); \
  constexpr auto op##_selected = &::backplane::cpu::SelectedVariant<                    \
      #op, ::backplane::detail::FunctionType<decltype(&::backplane::cpu::CPU_CAPABILITY::fn)>::type>::call; \
  }

#ifdef CPU_CAPABILITY_DEFAULT
#define BACKPLANE_CPU_KERNEL(op, fn) BACKPLANE_CPU_VARIANT_(op, fn) BACKPLANE_KERNEL(CPU, op, op##_selected)
#define BACKPLANE_CPU_WRITING_KERNEL(op, fn) \
  BACKPLANE_CPU_VARIANT_(op, fn) BACKPLANE_WRITING_KERNEL(CPU, op, op##_selected)
#else
#define BACKPLANE_CPU_KERNEL(op, fn) BACKPLANE_CPU_VARIANT_(op, fn)
#define BACKPLANE_CPU_WRITING_KERNEL(op, fn) BACKPLANE_CPU_VARIANT_(op, fn)
#endif
#endif  // CPU_CAPABILITY
