// Deriving an op's conformance cases from its registry entry. Every case calls the op
// boxed through the dispatcher with inputs made on the device under test, then checks:
// the result against the reference (evaluated on the CPU in float64, rounded to the
// dtype), a new output's dtype, device and contiguity, inputs left untouched, and for
// ops that write: written in place, and nothing outside the written view changed.
#include "conformance/cases.h"

#include "conformance/inputs.h"
#include "formula/reference_expr.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cstring>
#include <sstream>

namespace backplane::conformance {
namespace {

bool is_tensor(const c10::Argument& arg) { return arg.type()->kind() == c10::TypeKind::TensorType; }

// The argument an in_place or out rule writes; empty for ops returning a new tensor.
std::string written_arg(const OpDef& op) {
  const auto k = op.shape.kind;
  return k == ShapeRuleKind::InPlace || k == ShapeRuleKind::Out ? op.shape.args[0] : "";
}

struct Call {
  std::vector<c10::IValue> args;   // in schema order, on the device
  std::vector<Made> tensors;       // by schema position (undefined for non-tensors)
};

// The inputs of a sample on device: each Tensor argument in `layout` where it fits (the
// written argument never expanded: it would alias itself) and scaled by the sample's
// magnitude, other arguments (strings too) as given or defaulted.
Call make_call(const OpDef& op, const OpInputs& in, Layout layout, c10::ScalarType dtype, c10::Device device) {
  Call call;
  const std::string written = written_arg(op);
  for (size_t i = 0; i < op.arguments.size(); ++i) {
    const auto& arg = op.arguments[i];
    const c10::IValue* given = in.find(arg.name());
    if (is_tensor(arg)) {
      const std::vector<int64_t> sizes = given->toIntVector();
      Layout l = layout_fits(layout, static_cast<int64_t>(sizes.size())) ? layout : Layout::Contiguous;
      if (l == Layout::Expanded && arg.name() == written) l = Layout::Contiguous;
      call.tensors.push_back(make_in(sizes, l, dtype, device, 1 + i, in.magnitude));
      call.args.emplace_back(call.tensors.back().view);
    } else {
      call.tensors.emplace_back();
      call.args.push_back(given ? *given : *arg.default_value());
    }
  }
  return call;
}

std::vector<c10::IValue> invoke(const OpDef& op, std::vector<c10::IValue> args) {
  torch::jit::Stack stack(std::move(args));
  op_handle(op).callBoxed(stack);
  return stack;
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  // An empty tensor's data pointer may be null, which memcmp must not see (UBSan).
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         (x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
}

// The elements of `base` (a contiguous CPU copy) outside the view with view's sizes,
// strides and offset into it.
at::Tensor outside(const at::Tensor& base, const at::Tensor& view, int64_t offset) {
  at::Tensor mask = at::ones({base.numel()}, at::kBool);
  if (view.numel() > 0) mask.as_strided(view.sizes(), view.strides(), offset).fill_(false);
  return base.flatten().masked_select(mask);
}

// The layout the contract promises (op_contract.h): a broadcast output, and a custom one
// naming its layout source (`layout: x`), takes the strides of the first of its rule's
// arguments with the output's sizes where that one is dense but not contiguous (a
// transposed input, as aten does); every other output is contiguous.
std::optional<std::string> wrong_layout(const OpDef& op, size_t k, const at::Tensor& result,
                                        const std::vector<c10::IValue>& args) {
  const ShapeRule& rule = k == 0 ? op.shape : op.extra_outputs[k - 1];
  if (rule.kind == ShapeRuleKind::Broadcast || rule.kind == ShapeRuleKind::Custom)
    for (const std::string& name : rule.args) {
      const at::Tensor& t = args[op.arg_index(name)].toTensor();
      if (t.sizes() != result.sizes()) continue;
      if (t.is_contiguous() || !t.is_non_overlapping_and_dense()) break;
      if (result.strides() == t.strides()) return std::nullopt;
      std::ostringstream why;
      why << "has strides " << result.strides() << ", expected " << t.strides() << " (those of '" << name
          << "', the first argument of its sizes, which is dense: outputs follow it as aten's do)";
      return why.str();
    }
  if (!result.is_contiguous()) return std::string("is not contiguous");
  return std::nullopt;
}

Case sample_case(const OpDef& op, const std::optional<ReferenceExpr>& reference, const OpInputs& in, Layout layout) {
  const std::string name = in.name + "/" + layout_name(layout);
  return {name, [&op, reference, in, layout](c10::ScalarType dtype, c10::Device device) -> std::optional<std::string> {
            Call call = make_call(op, in, layout, dtype, device);
            const std::string written = written_arg(op);
            const int written_pos = written.empty() ? -1 : op.arg_index(written);
            // Everything the check needs from before the call, on the CPU.
            std::vector<at::Tensor> before(call.tensors.size());
            std::vector<at::Tensor> base_before(call.tensors.size());
            for (size_t i = 0; i < call.tensors.size(); ++i)
              if (call.tensors[i].view.defined()) {
                before[i] = call.tensors[i].view.cpu().clone();
                base_before[i] = call.tensors[i].base.cpu().clone();
              }
            const void* written_ptr = written_pos >= 0 && call.tensors[written_pos].view.numel() > 0
                                          ? call.tensors[written_pos].view.data_ptr()
                                          : nullptr;
            std::vector<c10::IValue> returned = invoke(op, call.args);

            std::vector<at::Tensor> results;  // each output, or the written argument
            if (written_pos < 0) {
              const size_t n = op.new_outputs();
              if (returned.size() != n) return "the op returned " + std::to_string(returned.size()) +
                                               " value(s), expected " + std::to_string(n);
              for (size_t k = 0; k < n; ++k) {
                const std::string which = n == 1 ? "output" : "output " + std::to_string(k);
                if (!returned[k].isTensor()) return which + " is not a tensor";
                const at::Tensor& result = returned[k].toTensor();
                if (result.device() != device) {
                  std::ostringstream why;
                  why << which << " on " << result.device() << ", expected " << device;
                  return why.str();
                }
                if (auto wrong = wrong_layout(op, k, result, call.args)) return which + " " + *wrong;
                results.push_back(result);
              }
            } else {
              const at::Tensor& result = call.tensors[written_pos].view;
              if (written_ptr && result.data_ptr() != written_ptr)
                return "'" + written + "' was reallocated, not written in place";
              const at::Tensor& view = call.tensors[written_pos].view;
              const at::Tensor& base = call.tensors[written_pos].base;
              const int64_t offset = view.storage_offset() - base.storage_offset();
              if (!bitwise_equal(outside(base.cpu().contiguous(), view, offset),
                                 outside(base_before[written_pos].contiguous(), view, offset)))
                return "writing '" + written + "' changed memory outside its view";
              results.push_back(result);
            }
            for (size_t i = 0; i < call.tensors.size(); ++i)
              if (before[i].defined() && static_cast<int>(i) != written_pos &&
                  !(written_pos >= 0 && call.tensors[i].view.is_alias_of(call.tensors[written_pos].view)) &&
                  !bitwise_equal(call.tensors[i].view, before[i]))
                return "input '" + op.arguments[i].name() + "' was modified";
            if (!reference) return std::nullopt;
            std::map<std::string, c10::IValue> names;
            for (size_t i = 0; i < op.arguments.size(); ++i)
              names[op.arguments[i].name()] = before[i].defined() ? c10::IValue(before[i].to(at::kDouble)) : call.args[i];
            const std::vector<c10::IValue> values = reference_values(op, *reference, names);
            if (values.size() != results.size())
              return "the reference gave " + std::to_string(values.size()) + " value(s) for " +
                     std::to_string(results.size()) + " output(s)";
            std::optional<std::pair<double, double>> tol;
            if (auto it = op.checks.tolerance.find(dtype); it != op.checks.tolerance.end()) tol = it->second;
            for (size_t k = 0; k < results.size(); ++k) {
              if (!values[k].isTensor()) return std::string("the reference gave no tensor");
              const at::Tensor expected = values[k].toTensor().to(dtype).contiguous();
              if (auto wrong = compare(results[k], expected, op.checks.exact, tol))
                return results.size() == 1 ? wrong : "output " + std::to_string(k) + ": " + *wrong;
            }
            return std::nullopt;
          }};
}

// Inputs for an error case: each Tensor of the given sizes, filled with ones.
std::vector<c10::IValue> ones_call(const OpDef& op, const OpInputs& in, c10::ScalarType dtype, c10::Device device) {
  return op_arguments(op, in, [&](at::IntArrayRef sizes) {
    return at::ones(sizes, at::TensorOptions().dtype(dtype).device(device));
  });
}

template <typename Mutate>
Case error_case(const OpDef& op, std::string name, std::string message, Mutate mutate, bool accelerator_only = false) {
  return {"error/" + std::move(name),
          [&op, message, mutate](c10::ScalarType dtype, c10::Device device) {
            std::vector<c10::IValue> args = ones_call(op, op.checks.samples.front(), dtype, device);
            mutate(args, dtype, device);
            return expect_error([&] { invoke(op, args); }, message);
          },
          accelerator_only};
}

// The contract's errors, the same for every op: a dtype outside the registry's list,
// two dtypes or two devices across Tensor arguments, a written argument that aliases
// itself, an out of other sizes.
void contract_cases(const OpDef& op, std::vector<Case>& cases) {
  const std::string q = op.qualified_name() + ": ";
  const std::string first = op.tensor_args[0];
  const int first_pos = op.arg_index(first);
  const c10::ScalarType bad = op.supports(at::kLong) ? at::kBool : at::kLong;
  cases.push_back(error_case(op, "bad_dtype", q + "argument '" + first + "' has dtype " + dtype_name(bad),
                             [=](std::vector<c10::IValue>& args, c10::ScalarType, c10::Device) {
                               args[first_pos] = args[first_pos].toTensor().to(bad);
                             }));
  if (op.tensor_args.size() >= 2) {
    const std::string second = op.tensor_args[1];
    const int second_pos = op.arg_index(second);
    // Two dtypes the op supports, else no such call exists: with one, the second argument's
    // dtype would be unsupported, which the contract reports first (bad_dtype's case).
    if (op.dtypes.size() >= 2) {
      cases.push_back(error_case(op, "mixed_dtypes", q + "arguments '" + first + "' and '" + second + "' must share one dtype",
                                 [=, &op](std::vector<c10::IValue>& args, c10::ScalarType dtype, c10::Device) {
                                   c10::ScalarType other = dtype;
                                   for (auto d : op.dtypes)
                                     if (d != dtype) other = d;
                                   args[second_pos] = args[second_pos].toTensor().to(other);
                                 }));
    }
    cases.push_back(error_case(op, "mixed_devices", q + "arguments '" + first + "' and '" + second + "' must be on one device",
                               [=](std::vector<c10::IValue>& args, c10::ScalarType, c10::Device) {
                                 args[second_pos] = args[second_pos].toTensor().cpu();
                               },
                               /*accelerator_only=*/true));
  }
  const std::string written = written_arg(op);
  if (op.shape.kind == ShapeRuleKind::InPlace) {
    const int pos = op.arg_index(written);
    cases.push_back(error_case(op, "written_aliases_itself", q + "argument '" + written + "' is written but two of its indices reach the same element",
                               [=](std::vector<c10::IValue>& args, c10::ScalarType dtype, c10::Device device) {
                                 args[pos] = at::ones({1, 4}, at::TensorOptions().dtype(dtype).device(device)).expand({3, 4});
                               }));
  }
  if (op.shape.kind == ShapeRuleKind::Out) {
    const int pos = op.arg_index(written);
    cases.push_back(error_case(op, "out_of_other_sizes", q + "argument '" + written + "' has sizes [0], expected",
                               [=](std::vector<c10::IValue>& args, c10::ScalarType dtype, c10::Device device) {
                                 args[pos] = at::empty({0}, at::TensorOptions().dtype(dtype).device(device));
                               }));
    const int like = op.arg_index(op.shape.args[1]);
    cases.push_back(error_case(op, "out_overlaps_input", q + "argument '" + written + "' shares elements with input",
                               [=](std::vector<c10::IValue>& args, c10::ScalarType dtype, c10::Device device) {
                                 at::Tensor base = at::ones({12}, at::TensorOptions().dtype(dtype).device(device));
                                 args[like] = base.slice(0, 0, 10);
                                 args[pos] = base.slice(0, 1, 11);
                               }));
  }
}

}  // namespace

OpSuite derive_suite(const OpDef& op) {
  OpSuite suite{op.id(), {}};
  std::optional<ReferenceExpr> reference;
  if (!op.checks.reference.empty()) reference = ReferenceExpr::parse(op.checks.reference);
  for (const auto& sample : op.checks.samples)
    for (Layout layout : kLayouts) {
      bool fits = layout == Layout::Contiguous;
      for (const auto& t : op.tensor_args) {
        const auto dim = static_cast<int64_t>(sample.find(t)->toIntVector().size());
        fits |= layout_fits(layout, dim) && !(layout == Layout::Expanded && t == written_arg(op));
      }
      if (fits) suite.cases.push_back(sample_case(op, reference, sample, layout));
    }
  if (op.shape.kind == ShapeRuleKind::Out) {
    // out may be the input itself.
    const std::string out = op.shape.args[0], like = op.shape.args[1];
    suite.cases.push_back({"out_is_input", [&op, reference, out, like](c10::ScalarType dtype, c10::Device device)
                                               -> std::optional<std::string> {
                             std::vector<c10::IValue> args = ones_call(op, op.checks.samples.front(), dtype, device);
                             const at::Tensor x = make(args[op.arg_index(like)].toTensor().sizes(), Layout::Contiguous,
                                                       dtype, device, 7);
                             args[op.arg_index(like)] = x;
                             args[op.arg_index(out)] = x;
                             std::map<std::string, c10::IValue> names;
                             for (size_t i = 0; i < args.size(); ++i)
                               names[op.arguments[i].name()] =
                                   args[i].isTensor() ? c10::IValue(args[i].toTensor().cpu().to(at::kDouble).clone()) : args[i];
                             invoke(op, args);
                             if (!reference) return std::nullopt;
                             return compare(x, reference->evaluate(names).toTensor().to(dtype), op.checks.exact);
                           }});
  }
  contract_cases(op, suite.cases);
  for (const auto& e : op.checks.errors) {
    // The registry's message part, in an error that names the op first.
    const std::string prefix = op.qualified_name() + ": ";
    suite.cases.push_back({"error/" + e.inputs.name, [&op, e, prefix](c10::ScalarType dtype, c10::Device device) {
                             auto call = [&] { invoke(op, ones_call(op, e.inputs, dtype, device)); };
                             if (auto wrong = expect_error(call, e.message)) return wrong;
                             return expect_error(call, prefix);
                           }});
  }
  return suite;
}

}  // namespace backplane::conformance
