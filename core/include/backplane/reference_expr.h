// The registry's `reference:` expressions (the conformance suite evaluates them in
// float64 on the CPU; the benchmarks in the op's dtype on its device): calls of PyTorch ops over an op's arguments,
// e.g. `aten::add.Tensor(a, b, alpha=alpha)` or
// `aten::narrow(aten::narrow(img, -2, box[0], box[2]), -1, box[1], box[3])`.
//
// Grammar: expr := call | name | name '[' int ']' | dtype '(' name ')' | number | true
//                 | false | None | '[' expr, ... ']';  call := ns::op[.overload]( [name=]expr, ... ).
// dtype(t) is tensor argument t's dtype, for a ScalarType argument
// (aten::_softmax_backward_data's input_dtype).
// A call resolves its overload exactly as written (no overload: the default one) and
// fills arguments left out from the schema's defaults. A list holds ints (dims, sizes)
// or tensors (aten::cat's Tensor[]). Limits: no arithmetic, no tuples; a call's first
// return value is its value (evaluate_all gives every one of the outermost call's).
#pragma once

#include <backplane/export.h>

#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace backplane::conformance {

class BACKPLANE_API ReferenceExpr {
 public:
  // Throws std::invalid_argument naming the column on a syntax error.
  static ReferenceExpr parse(const std::string& text);
  // Evaluates with the op's arguments bound by name. Throws c10::Error or
  // std::invalid_argument (unknown name, op or argument).
  c10::IValue evaluate(const std::map<std::string, c10::IValue>& names) const;
  // Every value the expression gives: each return value of an outermost call (an op
  // returning several tensors, such as backplane::rms_norm_backward), each item of an
  // outermost list ([aten::sin(x), aten::cos(x)]), else the one value evaluate() gives.
  std::vector<c10::IValue> evaluate_all(const std::map<std::string, c10::IValue>& names) const;
  // The argument names the expression reads (as a name, an index or dtype(name)).
  std::set<std::string> names() const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
};

}  // namespace backplane::conformance
