// The rows of a forward+backward run (backplane_bench --backward), for each op with a
// `backward:` in the registry. A step is one forward through the dispatcher (the core's
// Autograd kernel records the registry's formulas) and one torch::autograd::grad of every
// output, for a fixed random output gradient, with respect to the Tensor arguments the
// `backward:` keys name. The reference row runs the same step over the op's baseline
// (PyTorch's fused op where the registry names one, else its reference), differentiated
// by PyTorch's autograd. Gradients are returned, not accumulated into .grad: nothing needs
// zeroing between steps, and each step allocates its gradients as a training step does.
// A view argument (a preset's layout) is a leaf of its own: gradients are taken with
// respect to the view.
//
// Before a backplane row is timed, its output is checked against the reference (as a
// forward row's is) and its gradients against the baseline's; a disagreeing row is an
// error, not timed. Rows keep the forward run's names; the run's context says
// "pass": "forward+backward".
#pragma once

#include "workload_timing.h"

#include <backplane/registry.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace backplane::bench {

WorkloadFactory backward_backplane_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype);
WorkloadFactory backward_reference_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype);

// The least bytes a forward+backward must move for the op's registry formulas. Forward:
// each Tensor argument's distinct elements read once, each output written. Backward: the
// output gradients and the tensors its formulas name read (`result`: the output), and one
// gradient written per differentiable argument; a gradient that is `grad` itself moves
// nothing (no copy is made) unless it must be summed to a smaller input.
int64_t forward_backward_bytes(const OpDef& op, const std::vector<c10::IValue>& args,
                               const std::vector<at::Tensor>& outputs);

// nullopt when `theirs` matches `ours` normwise: max |difference| <= tol * max(max |ours|,
// 1), tol 1e-4 in float32 and wider, 1e-2 in 16-bit types. It catches wrong results, not
// rounding, which in a gradient summed over thousands of rows of a 16-bit type is large
// next to its small elements. Else what differs.
std::optional<std::string> normwise_disagreement(const at::Tensor& ours, const at::Tensor& theirs);

}  // namespace backplane::bench
