// The registry's `reference:` expressions (the conformance suite evaluates them in
// float64 on the CPU; the benchmarks in the op's dtype on its device): calls of PyTorch ops over an op's arguments,
// e.g. `aten::add.Tensor(a, b, alpha=alpha)` or
// `aten::narrow(aten::narrow(img, -2, box[0], box[2]), -1, box[1], box[3])`.
//
// Grammar: expr := call | name | name '[' int ']' | dtype '(' name ')' | number | string
//                 | true | false | None | '[' expr, ... ']';  call := ns::op[.overload]( [name=]expr, ... );
//          string := '...' | "..." (no escapes), e.g. aten::gelu(x, approximate='tanh').
// dtype(t) is tensor argument t's dtype, for a ScalarType argument
// (aten::_softmax_backward_data's input_dtype).
// A call resolves its overload exactly as written (no overload: the default one) and
// fills arguments left out from the schema's defaults. A list holds ints (dims, sizes)
// or tensors (aten::cat's Tensor[]). Limits: no arithmetic, no tuples, nesting at most
// 100 deep; a call's first return value is its value (evaluate_all gives every one of the
// outermost call's). The registry parser check()s every formula when it reads a file
// (core/src/registry/), so a misspelt name or op fails the build, not the first backward.
#pragma once

#include <backplane/export.h>

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace backplane::conformance {

// A formula that does not parse or does not check: what() is "formula 'TEXT', column
// N: message"; column() is N (1-based, into the formula's text), message() the rest.
class BACKPLANE_API FormulaError : public std::invalid_argument {
 public:
  FormulaError(const std::string& text, size_t column, const std::string& message);
  size_t column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  size_t column_;
  std::string message_;
};

// What check() resolves against, so that it can run where the ops it calls are not yet
// defined (a registry document's own ops).
struct BACKPLANE_API FormulaScope {
  // The type of each name the formula may read (an op's arguments; `grad`, `result`).
  std::map<std::string, c10::TypePtr> names;
  // The schema of op `name` ("aten::add") overload `overload` ("" for the default);
  // nullopt when there is none.
  std::function<std::optional<c10::FunctionSchema>(const std::string& name, const std::string& overload)> schema;
  // The overload names op `name` has (for messages only); empty when it has none.
  std::function<std::vector<std::string>(const std::string& name)> overloads;

  // Resolves every call with the dispatcher's schemas (the ops defined in this process).
  static FormulaScope dispatcher(std::map<std::string, c10::TypePtr> names);
};

class BACKPLANE_API ReferenceExpr {
 public:
  // Throws FormulaError naming the column on a syntax error.
  static ReferenceExpr parse(const std::string& text);
  // Evaluates with the op's arguments bound by name. Throws c10::Error or
  // std::invalid_argument (unknown name, op or argument).
  c10::IValue evaluate(const std::map<std::string, c10::IValue>& names) const;
  // Every value the expression gives: each return value of an outermost call (an op
  // returning several tensors, such as backplane::rms_norm_backward), each item of an
  // outermost list ([aten::sin(x), aten::cos(x)]), else the one value evaluate() gives.
  std::vector<c10::IValue> evaluate_all(const std::map<std::string, c10::IValue>& names) const;
  // evaluate_all as the kernels compute: float16 and bfloat16 tensors bound to `names` are
  // read in float32 (their opmath type), and every float32 tensor the expression gives is
  // cast back to the inputs' promoted dtype when that is a half type. Autograd and forward
  // AD see the casts, so gradients and tangents flow through them. Where the formula runs
  // in the storage dtype instead, `x*x` overflows float16 above 256 and a gradient built on
  // it comes back all zero. Limits: Tensor[] arguments are not cast; a float32 result of an
  // all-half call is taken to be a value of the half dtype (what the kernels return).
  std::vector<c10::IValue> evaluate_all_in_opmath(const std::map<std::string, c10::IValue>& names) const;
  // The argument names the expression reads (as a name, an index or dtype(name)).
  std::set<std::string> names() const;
  // Checks without evaluating: each name is in `scope` (an index names an int list,
  // dtype() a Tensor), each call's op and overload exist, its keywords are arguments of
  // it, no argument is given twice or too many, and every argument without a default is
  // given. Returns the types of the values evaluate_all() gives (nullptr where unknown:
  // an empty list). Throws FormulaError at the offending name's column. Limits: argument
  // types are not checked (the evaluator converts ints to floats, and PyTorch checks
  // the rest when it runs).
  std::vector<c10::TypePtr> check(const FormulaScope& scope) const;

  struct Node;
  // The parsed tree (formula/formula_node.h), for the C API's backplane_c_formula_tree.
  const Node& root() const { return *root_; }

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

}  // namespace backplane::conformance
