// Gradient cases: each `backward:` formula of an op checked against PyTorch's autograd
// through the op's `reference:`, so that a wrong formula (two arguments swapped) fails
// `backplane check` and `make test` naming the op, the argument, the formula and its
// registry file:line, rather than as a nameless Jacobian mismatch in a gradcheck.
//
// For each registry sample, in float64 (float32 where the op lacks float64):
//  - the formula's value: the op called through the dispatcher on the device under test
//    with one differentiable argument requiring grad at a time, so that the core's Autograd
//    kernel evaluates that argument's formula alone (the one that is wrong is named), then
//    torch::autograd::grad with a fixed random output gradient;
//  - the expected value: the reference evaluated on the CPU in float64 over the same
//    values and differentiated by autograd (a registry op it calls that has no `backward:`
//    of its own runs as its reference, as under double backward);
//  - the two compared within the dtype's tolerances (the op's `tolerance:` where given).
// Limits: contiguous inputs only (the formulas are dispatcher calls; layouts are the
// kernels' cases); Tensor arguments without a formula (rotary's cos and sin: caches) are
// inputs, never differentiated; ops that write an argument have no `backward:` (the
// registry refuses one) and ops without a `reference:` have nothing to compare with, so
// neither gets gradient cases; an op taking neither float64 nor float32 gets cases that
// skip, saying so. A reference calling a registry op that has a `backward:` is
// differentiated through that op's formula, which that op's own gradient cases check.
#include "conformance/gradient_cases.h"

#include "formula/formula_node.h"

#include "conformance/inputs.h"
#include "formula/reference_expr.h"

#include <ATen/DeviceAccelerator.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/autograd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {
namespace {

// float64 where the op takes it, else float32; nullopt: neither.
std::optional<c10::ScalarType> gradient_dtype(const OpDef& op) {
  for (c10::ScalarType dtype : {at::kDouble, at::kFloat})
    if (op.supports(dtype)) return dtype;
  return std::nullopt;
}

// PyTorch's autograd engine keeps its stream bookkeeping for torch's one accelerator: a
// backward on another device type in the same process (cuda, once a PrivateUse1 device
// such as npu is registered and is the accelerator) trips its assert
// `opt_ready_stream && opt_parent_stream` (pytorch/pytorch#161129).
void skip_unless_backward_runs_on(c10::Device device) {
  if (device.is_cpu()) return;
  const std::optional<c10::DeviceType> accelerator = at::accelerator::getAccelerator(false);
  if (accelerator == device.type()) return;
  const std::string other = accelerator ? c10::DeviceTypeName(*accelerator, true) : std::string("none");
  throw CaseSkipped("a backward on " + c10::DeviceTypeName(device.type(), true) +
                    " in a process where torch's accelerator is " + other +
                    " trips PyTorch's autograd engine (pytorch/pytorch#161129); check it in a process where no " +
                    other + " plugin is loaded");
}

// PyTorch's autograd engine makes a thread per device type when the process's first
// backward runs: a device whose plugin loaded after that has none, and its backward trips
// the engine's assert on device_ready_queues_. Said as a skip, not as that assert.
void skip_if_engine_lacks(const c10::Error& e, c10::Device device) {
  if (device.is_cpu() || std::string(e.what_without_backtrace()).find("device_ready_queues_") == std::string::npos)
    return;
  throw CaseSkipped("PyTorch's autograd engine has no thread for " + c10::DeviceTypeName(device.type(), true) +
                    ": it started (at the process's first backward) before that device's plugin loaded; load the "
                    "plugin before any backward");
}

// d(sum_k <outputs[k], grads[k]>) / d(inputs), zeros for an input no output depends on.
std::vector<at::Tensor> vjp(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& grads,
                            const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> differentiable, their_grads;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].requires_grad()) {
      differentiable.push_back(outputs[k]);
      their_grads.push_back(grads[k]);
    }
  std::vector<at::Tensor> out(inputs.size());
  if (!differentiable.empty())
    out = torch::autograd::grad(differentiable, inputs, their_grads, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!out[i].defined()) out[i] = at::zeros_like(inputs[i]);
  return out;
}

// "the gradient of 'a' by its backward formula `...` (registry/ops.yaml:71:18)"
std::string formula_named(const std::string& arg, const GradientFormula& gradient) {
  std::string out = "the gradient of '" + arg + "' by its backward formula `" + gradient.formula + "`";
  if (gradient.outputs > 1)
    out += " (its value " + std::to_string(gradient.output) + " of " + std::to_string(gradient.outputs) + ")";
  return out + " (" + gradient.where.str() + ")";
}

std::optional<std::string> check_gradients(const OpDef& op, const ReferenceExpr& reference, const OpInputs& in,
                                           c10::ScalarType dtype, c10::Device device) {
  skip_unless_backward_runs_on(device);
  const c10::InferenceMode not_inference(false);
  const at::AutoGradMode grad_on(true);
  uint64_t seed = 1;
  const std::vector<c10::IValue> args = op_arguments(op, in, [&](at::IntArrayRef sizes) {
    return make(sizes, Layout::Contiguous, dtype, device, seed++, in.magnitude);
  });

  // The expected gradients: autograd through the reference, on the CPU in float64.
  std::vector<size_t> wanting;  // schema positions of the arguments with a formula
  std::vector<at::Tensor> leaves;
  std::map<std::string, c10::IValue> names;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& name = op.arguments[i].name();
    if (!args[i].isTensor()) {
      names[name] = args[i];
      continue;
    }
    at::Tensor t = args[i].toTensor().cpu().to(at::kDouble, /*non_blocking=*/false, /*copy=*/true);
    if (op.backward.count(name)) {
      wanting.push_back(i);
      leaves.push_back(t.requires_grad_(true));
    }
    names[name] = t;
  }
  std::vector<c10::IValue> values;
  {
    const ReferencesForUndifferentiable stand_ins;
    values = reference_values(op, reference, names);
  }
  if (values.size() != op.new_outputs())
    return "the reference gave " + std::to_string(values.size()) + " value(s) for " +
           std::to_string(op.new_outputs()) + " output(s)";
  std::vector<at::Tensor> expected_outputs, grads, grads_here;  // grads: fixed, N(0, 1)
  for (size_t k = 0; k < values.size(); ++k) {
    if (!values[k].isTensor()) return std::string("the reference gave no tensor");
    expected_outputs.push_back(values[k].toTensor());
    grads.push_back(make(values[k].toTensor().sizes(), Layout::Contiguous, at::kDouble, at::kCPU, 1000 + k));
    grads_here.push_back(grads.back().to(device, dtype));
  }
  const std::vector<at::Tensor> expected = vjp(expected_outputs, grads, leaves);

  // Each formula's value, through the core's Autograd kernel on the device under test.
  std::optional<std::pair<double, double>> tolerance;
  if (auto it = op.checks.tolerance.find(dtype); it != op.checks.tolerance.end()) tolerance = it->second;
  std::string failures;
  for (size_t j = 0; j < wanting.size(); ++j) {
    const std::string& arg = op.arguments[wanting[j]].name();
    const std::string formula = formula_named(arg, op.backward.at(arg));
    std::vector<c10::IValue> call = args;
    const at::Tensor input = args[wanting[j]].toTensor().detach().requires_grad_(true);
    call[wanting[j]] = input;
    std::optional<std::string> wrong;
    try {
      torch::jit::Stack stack(call);
      op_handle(op).callBoxed(stack);
      wrong = compare(vjp(op_results(op, call, stack), grads_here, {input})[0], expected[j].to(dtype), false, tolerance);
      if (wrong) *wrong = " differs from autograd through the reference `" + op.checks.reference + "` (" +
                          op.checks.reference_where.str() + "): " + *wrong;
    } catch (const c10::Error& e) {
      skip_if_engine_lacks(e, device);
      wrong = std::string(" threw: ") + e.what_without_backtrace();
    }
    if (wrong) failures += (failures.empty() ? "" : "; ") + formula + *wrong;
  }
  if (failures.empty()) return std::nullopt;
  return op.qualified_name() + ": " + failures;
}

}  // namespace

void add_gradient_cases(const OpDef& op, std::vector<Case>& cases) {
  if (op.backward.empty() || op.checks.reference.empty()) return;
  const ReferenceExpr reference = ReferenceExpr::parse(op.checks.reference);
  const std::optional<c10::ScalarType> dtype = gradient_dtype(op);
  for (const OpInputs& in : op.checks.samples) {
    Case c{"gradient/" + in.name,
           [&op, reference, in, dtype](c10::ScalarType used, c10::Device device) -> std::optional<std::string> {
             if (!dtype) throw CaseSkipped("gradients are compared in float64 or float32, and the op takes neither");
             return check_gradients(op, reference, in, used, device);
           }};
    c.gradient = true;
    c.dtypes = {dtype.value_or(op.dtypes.front())};
    cases.push_back(std::move(c));
  }
}

}  // namespace backplane::conformance
