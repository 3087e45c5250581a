#include "conformance/inputs.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/CPUGeneratorImpl.h>

#include <numeric>
#include <sstream>

namespace backplane::conformance {

Made make_in(at::IntArrayRef sizes, Layout layout, c10::ScalarType dtype, c10::Device device, uint64_t seed,
             double magnitude) {
  auto gen = at::detail::createCPUGenerator(seed);
  return make_in(sizes, layout, [&](at::IntArrayRef s) {
    at::Tensor values = at::randn(s, gen, at::TensorOptions().dtype(at::kDouble));
    if (magnitude != 1.0) values.mul_(magnitude);
    return values.to(device, dtype);
  });
}

Made make_in(at::IntArrayRef sizes, Layout layout, const std::function<at::Tensor(at::IntArrayRef)>& values) {
  std::vector<int64_t> shape = sizes.vec();
  const int64_t numel = c10::multiply_integers(shape);
  TORCH_CHECK(layout_fits(layout, static_cast<int64_t>(shape.size())), layout_name(layout), " layout does not fit ",
              shape.size(), " dimensions");
  at::Tensor base;
  switch (layout) {
    case Layout::Contiguous:
      base = values(shape);
      return {base, base};
    case Layout::Strided: {
      std::vector<int64_t> wide = shape;
      wide.back() *= 2;
      base = values(wide);
      return {base.slice(-1, 0, c10::nullopt, 2), base};
    }
    case Layout::Transposed: {
      std::vector<int64_t> swapped = shape;
      std::swap(swapped[swapped.size() - 1], swapped[swapped.size() - 2]);
      base = values(swapped);
      return {base.transpose(-1, -2), base};
    }
    case Layout::Offset:
      base = values({numel + 5});
      return {base.slice(0, 5).view(shape), base};
    case Layout::Expanded: {
      std::vector<int64_t> one = shape;
      one[0] = 1;
      base = values(one);
      return {base.expand(shape), base};
    }
    case Layout::Permuted: {
      // The base holds the sizes in reverse order; the view permutes them back.
      std::vector<int64_t> reversed(shape.rbegin(), shape.rend()), order(shape.size());
      std::iota(order.rbegin(), order.rend(), int64_t{0});
      base = values(reversed);
      return {base.permute(order), base};
    }
  }
  TORCH_CHECK(false, "unknown layout");
}

std::pair<double, double> tolerances(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf: return {1e-3, 1e-5};
    case at::kBFloat16: return {1.6e-2, 1e-5};
    case at::kFloat: return {1.3e-6, 1e-5};
    default: return {1e-7, 1e-7};
  }
}

std::optional<std::string> compare(const at::Tensor& actual_any, const at::Tensor& expected, bool exact,
                                   std::optional<std::pair<double, double>> tolerance) {
  const at::Tensor actual = actual_any.cpu();
  std::ostringstream why;
  if (actual.sizes() != expected.sizes()) {
    why << "sizes " << actual.sizes() << ", expected " << expected.sizes();
    return why.str();
  }
  if (actual.scalar_type() != expected.scalar_type()) {
    why << "dtype " << actual.scalar_type() << ", expected " << expected.scalar_type();
    return why.str();
  }
  if (actual.numel() == 0) return std::nullopt;
  const at::Tensor a = actual.to(at::kDouble), e = expected.to(at::kDouble);
  const at::Tensor diff = (a - e).abs();
  if (exact) {
    // Bitwise: compare the raw bytes, so -0.0 vs 0.0 and NaN payloads count too.
    const at::Tensor ab = actual.contiguous(), eb = expected.contiguous();
    if (std::memcmp(ab.data_ptr(), eb.data_ptr(), ab.nbytes()) == 0) return std::nullopt;
    why << "not bitwise equal; max abs difference " << diff.max().item<double>();
    return why.str();
  }
  const auto [rtol, atol] = tolerance.value_or(tolerances(expected.scalar_type()));
  const at::Tensor bad = diff.gt(atol + rtol * e.abs()).logical_or(a.isnan().logical_xor(e.isnan()));
  if (!bad.any().item<bool>()) return std::nullopt;
  const int64_t first = bad.flatten().nonzero()[0].item<int64_t>();
  why << bad.sum().item<int64_t>() << " of " << a.numel() << " elements differ beyond rtol " << rtol << ", atol "
      << atol << "; max abs difference " << diff.max().item<double>() << "; first at flat index " << first << ": got "
      << a.flatten()[first].item<double>() << ", expected " << e.flatten()[first].item<double>();
  return why.str();
}

std::vector<c10::IValue> op_arguments(const OpDef& op, const OpInputs& inputs,
                                      const std::function<at::Tensor(at::IntArrayRef)>& tensor) {
  std::vector<c10::IValue> args;
  for (const auto& arg : op.arguments) {
    const c10::IValue* given = inputs.find(arg.name());
    if (arg.type()->kind() == c10::TypeKind::TensorType)
      args.emplace_back(tensor(given->toIntVector()));
    else
      args.push_back(given ? *given : *arg.default_value());
  }
  return args;
}

std::vector<c10::IValue> reference_values(const OpDef& op, const ReferenceExpr& reference,
                                          const std::map<std::string, c10::IValue>& names) {
  if (op.new_outputs() > 1) return reference.evaluate_all(names);
  return {reference.evaluate(names)};
}

std::vector<at::Tensor> op_results(const OpDef& op, const std::vector<c10::IValue>& args,
                                   const std::vector<c10::IValue>& returned) {
  if (op.writes()) return {args.at(op.arg_index(op.shape.args[0])).toTensor()};
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < op.new_outputs() && k < returned.size(); ++k) out.push_back(returned[k].toTensor());
  return out;
}

c10::OperatorHandle op_handle(const OpDef& op) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(op.qualified_name().c_str(), "");
}

}  // namespace backplane::conformance
