#include "backward_workloads.h"

#include "bench_inputs.h"
#include "distinct_bytes.h"
#include "result_check.h"

#include "conformance/inputs.h"
#include "formula/reference_expr.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

namespace backplane::bench {
namespace {

// A preset's arguments with each differentiable Tensor argument requiring grad.
struct BackwardInputs {
  std::vector<c10::IValue> args;             // schema order
  std::vector<at::Tensor> differentiable;    // those the `backward:` keys name, schema order
  std::vector<std::string> differentiable_names;
  std::map<std::string, c10::IValue> names;  // for the baseline formula
};

BackwardInputs make_backward_inputs(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype, c10::Device d) {
  BackwardInputs in;
  in.args = make_args(op, shape, dtype, d);
  for (size_t i = 0; i < in.args.size(); ++i) {
    const std::string& name = op.arguments[i].name();
    if (in.args[i].isTensor() && op.backward.count(name)) {
      at::Tensor t = in.args[i].toTensor();
      t.requires_grad_(true);  // the IValue holds the same tensor
      in.differentiable.push_back(t);
      in.differentiable_names.push_back(name);
    }
    in.names[name] = in.args[i];
  }
  return in;
}

std::vector<at::Tensor> call_op(const c10::OperatorHandle& handle, const OpDef& op,
                                const std::vector<c10::IValue>& args) {
  torch::jit::Stack stack(args.begin(), args.end());
  handle.callBoxed(stack);
  return conformance::op_results(op, args, stack);
}

// The baseline's values, one per output of the op (a call returning more, such as a
// PyTorch op that also returns saved statistics, gives its first ones).
std::vector<at::Tensor> call_baseline(const conformance::ReferenceExpr& baseline, const OpDef& op,
                                      const std::map<std::string, c10::IValue>& names) {
  const std::vector<c10::IValue> values = baseline.evaluate_all(names);
  if (values.size() < op.new_outputs())
    throw std::runtime_error("the baseline gives " + std::to_string(values.size()) + " value(s) for " +
                             std::to_string(op.new_outputs()) + " output(s)");
  std::vector<at::Tensor> outputs;
  for (size_t k = 0; k < op.new_outputs(); ++k) outputs.push_back(values[k].toTensor());
  return outputs;
}

// A fixed random gradient per output: a gradient of ones hides softmax's (its rows sum to 1).
std::vector<at::Tensor> output_gradients(const std::vector<at::Tensor>& outputs) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& out : outputs)
    grads.push_back(at::randn(out.sizes(), at::TensorOptions().dtype(out.scalar_type()).device(out.device())));
  return grads;
}

// The gradients of `inputs` for the outputs (those that require grad) and their gradients.
std::vector<at::Tensor> backward_of(const OpDef& op, const std::vector<at::Tensor>& outputs,
                                    const std::vector<at::Tensor>& output_grads,
                                    const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> differentiated, grads;
  for (size_t k = 0; k < outputs.size(); ++k)
    if (outputs[k].requires_grad()) {
      differentiated.push_back(outputs[k]);
      grads.push_back(output_grads[k]);
    }
  if (differentiated.empty())
    throw std::runtime_error("no output of " + op.qualified_name() + " requires grad; expected a graph to the "
                             "arguments its backward: names");
  return torch::autograd::grad(differentiated, inputs, grads);
}

std::vector<c10::IValue> detached(const std::vector<c10::IValue>& args) {
  std::vector<c10::IValue> out;
  for (const auto& a : args) out.push_back(a.isTensor() ? c10::IValue(a.toTensor().detach()) : a);
  return out;
}

std::string formatted(double value) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", value);
  return buf;
}

// nullopt when backplane's gradients (for `outputs`, already computed) match the
// baseline's on the same inputs and output gradients; else which one differs and how.
std::optional<std::string> gradient_disagreement(const OpDef& op, const BackwardInputs& in,
                                                 const std::vector<at::Tensor>& outputs,
                                                 const std::vector<at::Tensor>& output_grads) {
  const std::string& formula = op.checks.bench_baseline();
  if (formula.empty()) return std::nullopt;  // nothing of PyTorch's to check against
  const std::vector<at::Tensor> ours = backward_of(op, outputs, output_grads, in.differentiable);
  const std::vector<at::Tensor> theirs = backward_of(
      op, call_baseline(conformance::ReferenceExpr::parse(formula), op, in.names), output_grads, in.differentiable);
  for (size_t i = 0; i < ours.size(); ++i)
    if (auto wrong = normwise_disagreement(ours[i], theirs[i]))
      return "the gradient of " + in.differentiable_names[i] + " differs from the baseline's (" + formula +
             "): " + *wrong;
  return std::nullopt;
}

std::string trimmed(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  return begin == std::string::npos ? "" : s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

int64_t elements_of(const std::vector<at::Tensor>& outputs) {
  int64_t n = 0;
  for (const at::Tensor& out : outputs) n += out.numel();
  return n;
}

std::string label(c10::ScalarType dtype, const std::string& what) {
  return dtype_name(dtype) + " forward+backward " + what;
}

}  // namespace

std::optional<std::string> normwise_disagreement(const at::Tensor& ours, const at::Tensor& theirs) {
  if (ours.sizes() != theirs.sizes())
    return "sizes " + c10::str(theirs.sizes()) + " where backplane's are " + c10::str(ours.sizes());
  if (ours.numel() == 0) return std::nullopt;
  const bool wide = ours.scalar_type() == at::kFloat || ours.scalar_type() == at::kDouble;
  const double tol = wide ? 1e-4 : 1e-2;
  const at::Tensor a = ours.detach().to(at::kDouble), b = theirs.detach().to(at::kDouble);
  const double scale = a.abs().max().item<double>();
  const double diff = (b - a).abs().max().item<double>();
  if (diff <= tol * std::max(scale, 1.0)) return std::nullopt;  // NaN: not <=, reported
  return "max |difference| " + formatted(diff) + " against max |backplane's| " + formatted(scale) + " (tolerance " +
         formatted(tol) + " of it)";
}

int64_t forward_backward_bytes(const OpDef& op, const std::vector<c10::IValue>& args,
                               const std::vector<at::Tensor>& outputs) {
  int64_t output_bytes = 0;
  for (const at::Tensor& out : outputs) output_bytes += out.nbytes();
  int64_t forward = output_bytes, backward = 0;
  for (const auto& a : args)
    if (a.isTensor()) forward += distinct_bytes(a.toTensor());
  std::set<std::string> reads;
  for (const auto& [name, gradient] : op.backward) {
    const at::Tensor& input = args.at(op.arg_index(name)).toTensor();
    if (trimmed(gradient.formula) == "grad") {
      if (input.sizes() != outputs.front().sizes()) {  // summed to the input's size
        reads.insert("grad");
        backward += input.nbytes();
      }
      continue;
    }
    const auto names = conformance::ReferenceExpr::parse(gradient.formula).names();
    reads.insert(names.begin(), names.end());
    backward += input.nbytes();
  }
  if (reads.count("grad")) backward += output_bytes;
  if (reads.count("result")) backward += outputs.front().nbytes();
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].isTensor() && reads.count(op.arguments[i].name())) backward += distinct_bytes(args[i].toTensor());
  return forward + backward;
}

WorkloadFactory backward_backplane_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype) {
  // Checked on the row's first build only, as a forward row is (--interleave rebuilds rows).
  auto checked = std::make_shared<bool>(false);
  return [&op, shape, dtype, checked](c10::Device d) {
    const BackwardInputs in = make_backward_inputs(op, shape, dtype, d);
    const auto handle = conformance::op_handle(op);
    const std::vector<at::Tensor> outputs = call_op(handle, op, in.args);
    const std::vector<at::Tensor> output_grads = output_gradients(outputs);
    if (!*checked) {
      if (auto wrong = check_result(op, detached(in.args)))
        throw std::runtime_error("wrong result against the reference, not timed: " + *wrong);
      if (auto wrong = gradient_disagreement(op, in, outputs, output_grads))
        throw std::runtime_error("wrong gradient, not timed: " + *wrong);
      *checked = true;
    }
    return Workload{[&op, handle, in, output_grads] {
                      benchmark::DoNotOptimize(
                          backward_of(op, call_op(handle, op, in.args), output_grads, in.differentiable));
                    },
                    forward_backward_bytes(op, in.args, outputs), elements_of(outputs),
                    label(dtype, op.qualified_name())};
  };
}

WorkloadFactory backward_reference_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype) {
  return [&op, shape, dtype](c10::Device d) {
    const BackwardInputs in = make_backward_inputs(op, shape, dtype, d);
    const auto baseline = conformance::ReferenceExpr::parse(op.checks.bench_baseline());
    const std::vector<at::Tensor> outputs = call_baseline(baseline, op, in.names);
    const std::vector<at::Tensor> output_grads = output_gradients(outputs);
    return Workload{[&op, baseline, in, output_grads] {
                      benchmark::DoNotOptimize(
                          backward_of(op, call_baseline(baseline, op, in.names), output_grads, in.differentiable));
                    },
                    forward_backward_bytes(op, in.args, outputs), elements_of(outputs),
                    label(dtype, op.checks.bench_baseline())};
  };
}

}  // namespace backplane::bench
