// Evaluating a formula: each call through the dispatcher, with the op's arguments bound
// by name.
#include "formula/formula_node.h"

#include <backplane/registry.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <c10/core/TensorOptions.h>

namespace backplane::conformance {
namespace {

using Node = ReferenceExpr::Node;

thread_local bool references_for_undifferentiable = false;

// The parsed reference of a registry op with no `backward:` (and that writes nothing),
// or null: what a call of it evaluates as under ReferencesForUndifferentiable.
const ReferenceExpr* differentiable_stand_in(const std::string& qualified_name) {
  // PyTorch's own ops, nearly every call of every formula: answered without the lock.
  if (qualified_name.rfind("aten::", 0) == 0 || qualified_name.rfind("prims::", 0) == 0) return nullptr;
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ReferenceExpr>> parsed;  // null: none
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = parsed.try_emplace(qualified_name);
  if (added) {
    const OpDef* def = find_op_def(qualified_name);
    if (def && def->backward.empty() && !def->writes() && !def->checks.reference.empty())
      it->second = std::make_unique<ReferenceExpr>(ReferenceExpr::parse(def->checks.reference));
  }
  return it->second.get();
}

// True when no loaded plugin has a kernel for the device of the call's first tensor (a
// fused backward op, mul_backward, that the plugin serving mul lacks): the formula then
// computes it from the op's reference through ATen, and says so once per op and device.
// Meta tensors (shape propagation) have the core's Meta kernel and never take this path.
// Limits: a kernel found is remembered (kernels are never unloaded); until then each call
// asks the dispatcher's table, which a plugin loading on another thread at that moment may
// be writing (torch reads it without a lock here too).
bool lacks_kernel(const c10::OperatorHandle& handle, const std::vector<c10::IValue>& values) {
  const auto first = std::find_if(values.begin(), values.end(),
                                  [](const c10::IValue& v) { return v.isTensor() && v.toTensor().defined(); });
  if (first == values.end()) return false;
  const at::Tensor& t = first->toTensor();
  const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, t.layout(), t.device());
  static std::mutex mutex;
  static std::set<std::pair<std::string, c10::DispatchKey>> served, warned;
  const std::pair<std::string, c10::DispatchKey> op_on_key(handle.schema().name(), key);
  std::lock_guard<std::mutex> lock(mutex);
  if (served.count(op_on_key)) return false;
  if (handle.hasKernelForDispatchKey(key)) {
    served.insert(op_on_key);
    return false;
  }
  if (warned.insert(op_on_key).second)
    TORCH_WARN(handle.schema().name(), " has no kernel for ", c10::toString(key), " in any loaded plugin; a "
               "formula that calls it (a `backward:`, or another op's `reference:`) computes it from its registry "
               "`reference:` through ATen instead "
               "(slower than a fused kernel: load a plugin that serves ", handle.schema().name(), " on ",
               c10::toString(key), " to use its kernel). Said once per op and device.");
  return true;
}

// A value for a schema argument: ints where an int is expected, doubles for floats.
c10::IValue coerce(const c10::IValue& v, const c10::Argument& arg) {
  const auto kind = arg.type()->kind();
  if (kind == c10::TypeKind::FloatType && v.isInt()) return c10::IValue(static_cast<double>(v.toInt()));
  return v;
}

std::vector<c10::IValue> eval_call(const Node& node, const std::map<std::string, c10::IValue>& names);

c10::IValue eval(const Node& node, const std::map<std::string, c10::IValue>& names) {
  switch (node.kind) {
    case Node::Kind::Literal:
      return node.literal;
    case Node::Kind::Name: {
      auto it = names.find(node.name);
      if (it == names.end()) throw std::invalid_argument("reference names '" + node.name + "', which is no argument of the op");
      return it->second;
    }
    case Node::Kind::Index: {
      auto it = names.find(node.name);
      if (it == names.end() || !it->second.isIntList())
        throw std::invalid_argument("reference indexes '" + node.name + "', which is no int-list argument of the op");
      const auto list = it->second.toIntVector();
      const int64_t i = node.index < 0 ? node.index + static_cast<int64_t>(list.size()) : node.index;
      if (i < 0 || i >= static_cast<int64_t>(list.size()))
        throw std::invalid_argument("reference: " + node.name + "[" + std::to_string(node.index) + "] is out of range");
      return c10::IValue(list[i]);
    }
    case Node::Kind::Dtype: {
      auto it = names.find(node.name);
      if (it == names.end() || !it->second.isTensor())
        throw std::invalid_argument("reference: dtype(" + node.name + ") names no Tensor argument of the op");
      return c10::IValue(it->second.toTensor().scalar_type());
    }
    case Node::Kind::List: {  // int[] (dims, sizes) or Tensor[] (aten::cat)
      std::vector<c10::IValue> items;
      for (const auto& item : node.args) items.push_back(eval(*item.value, names));
      const bool tensors = !items.empty() && std::all_of(items.begin(), items.end(), [](const c10::IValue& v) { return v.isTensor(); });
      if (tensors) {
        std::vector<at::Tensor> list;
        for (const c10::IValue& v : items) list.push_back(v.toTensor());
        return c10::IValue(list);
      }
      std::vector<int64_t> ints;
      for (const c10::IValue& v : items) {
        if (!v.isInt()) throw std::invalid_argument("reference: a list holds integers only or tensors only");
        ints.push_back(v.toInt());
      }
      return c10::IValue(ints);
    }
    case Node::Kind::Call:
      break;
  }
  return eval_call(node, names).front();
}

// Every return value of a call.
std::vector<c10::IValue> eval_call(const Node& node, const std::map<std::string, c10::IValue>& names) {
  std::call_once(node.found, [&] {
    node.handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(node.name, node.overload));
  });
  std::optional<c10::OperatorHandle> handle = node.handle;
  if (!handle)  // not defined when first evaluated: look again (a plugin may define it later)
    handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(node.name, node.overload));
  if (!handle)
    throw std::invalid_argument("reference calls " + node.name + (node.overload.empty() ? "" : "." + node.overload) +
                                ", which this torch does not have (write the overload, e.g. aten::add.Tensor)");
  const auto& schema = handle->schema();
  std::vector<c10::IValue> values(schema.arguments().size());
  std::vector<bool> given(values.size(), false);
  size_t positional = 0;
  for (const auto& [keyword, _, arg] : node.args) {
    size_t slot = positional;
    if (keyword.empty()) {
      ++positional;
    } else {
      auto idx = schema.argumentIndexWithName(keyword);
      if (!idx) throw std::invalid_argument("reference: " + schema.name() + " has no argument '" + keyword + "'");
      slot = *idx;
    }
    if (slot >= values.size()) throw std::invalid_argument("reference: too many arguments for " + schema.name());
    values[slot] = coerce(eval(*arg, names), schema.arguments()[slot]);
    given[slot] = true;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (given[i]) continue;
    const auto& def = schema.arguments()[i].default_value();
    if (!def) throw std::invalid_argument("reference: " + schema.name() + " needs argument '" + schema.arguments()[i].name() + "'");
    values[i] = *def;
  }
  if (const ReferenceExpr* stand_in = differentiable_stand_in(schema.operator_name().name)) {
    const bool unserved = !references_for_undifferentiable && lacks_kernel(*handle, values);
    if (references_for_undifferentiable || unserved) {
      std::map<std::string, c10::IValue> bound;
      for (size_t i = 0; i < values.size(); ++i) bound[schema.arguments()[i].name()] = values[i];
      return stand_in->evaluate_all_in_opmath(bound);
    }
  }
  // Multiplying a tensor by the scalar 1 gives it unchanged: no kernel, no new tensor, as
  // PyTorch's own derivatives skip it (maybe_multiply). add's gradient for b,
  // aten::mul.Scalar(grad, alpha), costs nothing at the usual alpha=1.
  // (A floating tensor and a real scalar only: anything else may change the dtype.)
  if (schema.operator_name().name == "aten::mul" && schema.overload_name() == "Scalar" && values[0].isTensor() &&
      values[0].toTensor().is_floating_point() && values[1].isScalar() && !values[1].toScalar().isComplex() &&
      !values[1].toScalar().isBoolean() && values[1].toScalar().equal(1))
    return {values[0]};
  torch::jit::Stack stack(values.begin(), values.end());
  handle->callBoxed(stack);
  if (stack.empty()) throw std::invalid_argument("reference: " + schema.name() + " returns nothing");
  return stack;
}

}  // namespace

ReferencesForUndifferentiable::ReferencesForUndifferentiable() : previous_(references_for_undifferentiable) {
  references_for_undifferentiable = true;
}

ReferencesForUndifferentiable::~ReferencesForUndifferentiable() { references_for_undifferentiable = previous_; }

c10::IValue ReferenceExpr::evaluate(const std::map<std::string, c10::IValue>& names) const {
  return eval(*root_, names);
}

std::vector<c10::IValue> ReferenceExpr::evaluate_all(const std::map<std::string, c10::IValue>& names) const {
  if (root_->kind == Node::Kind::Call) return eval_call(*root_, names);
  if (root_->kind == Node::Kind::List) {
    std::vector<c10::IValue> items;
    for (const auto& item : root_->args) items.push_back(eval(*item.value, names));
    return items;
  }
  return {eval(*root_, names)};
}

std::vector<c10::IValue> ReferenceExpr::evaluate_all_in_opmath(const std::map<std::string, c10::IValue>& names) const {
  std::optional<at::ScalarType> storage;  // the promoted dtype of the floating tensors bound
  std::map<std::string, c10::IValue> widened;
  for (const auto& [name, value] : names) {
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().is_floating_point()) {
      const at::Tensor& t = value.toTensor();
      storage = storage ? c10::promoteTypes(*storage, t.scalar_type()) : t.scalar_type();
      if (at::isReducedFloatingType(t.scalar_type())) {
        widened.emplace(name, t.to(at::kFloat));
        continue;
      }
    }
    widened.emplace(name, value);
  }
  if (!storage || !at::isReducedFloatingType(*storage)) return evaluate_all(names);
  std::vector<c10::IValue> values = evaluate_all(widened);
  for (c10::IValue& value : values)
    if (value.isTensor() && value.toTensor().defined() && value.toTensor().scalar_type() == at::kFloat)
      value = value.toTensor().to(*storage);
  return values;
}

}  // namespace backplane::conformance
