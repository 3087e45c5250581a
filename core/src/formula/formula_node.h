// The parsed form of a registry formula (formula/reference_expr.h), shared by its
// parser (formula_parse.cpp), its checker (formula_check.cpp) and its evaluator
// (formula_evaluate.cpp).
#pragma once

#include "formula/reference_expr.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {

struct ReferenceExpr::Node {
  enum class Kind { Call, Name, Index, Literal, List, Dtype } kind;
  std::string name;      // Call: "aten::add"; Name/Index/Dtype: the argument
  std::string overload;  // Call
  size_t column = 0;     // 1-based, where the node starts in the text (for check()'s errors)
  // Call: the op, found on first evaluation (ops are never removed, and a backward formula
  // runs at every backward: no lookup each time).
  mutable std::once_flag found;
  mutable std::optional<c10::OperatorHandle> handle;
  int64_t index = 0;     // Index
  c10::IValue literal;   // Literal
  // Call: (keyword or "", its column, value); List: ("", column, item).
  struct Arg {
    std::string keyword;
    size_t column;
    std::shared_ptr<const Node> value;
  };
  std::vector<Arg> args;
};

// While one is alive on this thread, a formula's call of a registry op that has no
// `backward:` evaluates that op's `reference:` instead: aten calls, which autograd can
// differentiate. The core's backward sets it under create_graph, so that a fused backward
// op (mul_backward, rms_norm_backward) does not end second derivatives; at other times
// the fused op runs.
class ReferencesForUndifferentiable {
 public:
  ReferencesForUndifferentiable();
  ~ReferencesForUndifferentiable();
  ReferencesForUndifferentiable(const ReferencesForUndifferentiable&) = delete;
  ReferencesForUndifferentiable& operator=(const ReferencesForUndifferentiable&) = delete;

 private:
  bool previous_;
};

}  // namespace backplane::conformance
