// Inputs for conformance cases: the same values on every device (drawn on the CPU
// from a seed, then moved), in the layouts kernels get wrong. The benchmarks take the same
// views over values drawn on the device (make_in with a value source).
#pragma once

#include <backplane/export.h>

#include "formula/reference_expr.h"
#include "registry/sample_layouts.h"
#include <backplane/registry.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace backplane::conformance {

// Layout, kLayouts, layout_name, layout_named, layout_fits: registry/sample_layouts.h.

// A tensor in a layout, and the whole storage it views (to check that a write through
// the view left the rest alone).
struct BACKPLANE_API Made {
  at::Tensor view;
  at::Tensor base;
};

// Values from N(0, 1) seeded by `seed`, times `magnitude` (a sample's `magnitude:`; in
// float64, before rounding to dtype), as dtype, on device, in layout.
BACKPLANE_API Made make_in(at::IntArrayRef sizes, Layout layout, c10::ScalarType dtype, c10::Device device, uint64_t seed,
                           double magnitude = 1.0);
// The same views over bases that `values(base_sizes)` makes (its dtype and device), for
// callers that need no values common to every device (the benchmarks draw on the device).
BACKPLANE_API Made make_in(at::IntArrayRef sizes, Layout layout,
                           const std::function<at::Tensor(at::IntArrayRef)>& values);
inline at::Tensor make(at::IntArrayRef sizes, Layout layout, c10::ScalarType dtype, c10::Device device, uint64_t seed,
                       double magnitude = 1.0) {
  return make_in(sizes, layout, dtype, device, seed, magnitude).view;
}

// Tolerances PyTorch's assert_close uses for dtype (rtol, atol).
BACKPLANE_API std::pair<double, double> tolerances(c10::ScalarType dtype);

// nullopt when actual (any device) matches expected (CPU): same sizes and dtype, and
// bitwise equal (exact) or within (rtol, atol), by default tolerances(dtype).
BACKPLANE_API std::optional<std::string> compare(const at::Tensor& actual, const at::Tensor& expected, bool exact,
                                   std::optional<std::pair<double, double>> tolerance = std::nullopt);

// nullopt when fn throws a c10::Error whose message contains `expected`.
template <typename Fn>
std::optional<std::string> expect_error(Fn&& fn, const std::string& expected) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::string msg = e.what_without_backtrace();
    if (msg.find(expected) != std::string::npos) return std::nullopt;
    return "error message '" + msg + "' does not contain '" + expected + "'";
  }
  return "expected an error containing '" + expected + "', but the call succeeded";
}

// The op's arguments, in schema order, for registry inputs: each Tensor argument made by
// `tensor(sizes)`, any other as given or else its schema default.
BACKPLANE_API std::vector<c10::IValue> op_arguments(const OpDef& op, const OpInputs& inputs,
                                                    const std::function<at::Tensor(at::IntArrayRef)>& tensor);

// The values the op's `reference` gives, one per output: an op returning several tensors
// takes every value of its reference (a call returning a tuple, or a list [a, b]);
// otherwise the expression's one value.
BACKPLANE_API std::vector<c10::IValue> reference_values(const OpDef& op, const ReferenceExpr& reference,
                                                        const std::map<std::string, c10::IValue>& names);

// The tensors a call of the op produced, from its stack after the call: each new output,
// or for an op that writes, the written argument (from `args`, the call's arguments).
BACKPLANE_API std::vector<at::Tensor> op_results(const OpDef& op, const std::vector<c10::IValue>& args,
                                                 const std::vector<c10::IValue>& returned);

// The op through the dispatcher, as a user's call would reach it.
BACKPLANE_API c10::OperatorHandle op_handle(const OpDef& op);

}  // namespace backplane::conformance
