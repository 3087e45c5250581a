// What an op promises about its arguments and its output, from the registry:
// allowed dtypes, one dtype and one device across Tensor arguments, and the output
// shape from the op's shape rule. The Meta kernels and every backend's kernels go
// through the same contract, so a bad input raises the same message on every device
// and under FakeTensor.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string_view>
#include <vector>

namespace backplane {

class BACKPLANE_API OpContract {
 public:
  // Looks the op up in registry(); throws if the registry has no such op.
  explicit OpContract(std::string_view op_name);

  const OpDef& def() const { return *def_; }

  // Checks the arguments (all of them, in schema order) and returns the output
  // sizes the shape rule gives. For in-place ops, the mutated argument's sizes.
  std::vector<int64_t> check(c10::ArrayRef<c10::IValue> args) const;

  // check(), then a new contiguous output of the rule's sizes with the dtype and
  // device of the first Tensor argument. Not for in_place or out rules.
  at::Tensor new_output(c10::ArrayRef<c10::IValue> args) const;

  // check(), then resizes the out argument to the rule's sizes (out rule only),
  // with PyTorch's resize_output semantics (warns when resizing a non-empty tensor).
  const at::Tensor& prepare_out(c10::ArrayRef<c10::IValue> args) const;

  // "backplane::add"
  const std::string& qualified_name() const { return qualified_name_; }

 private:
  void check_tensors(c10::ArrayRef<c10::IValue> args) const;
  const OpDef* def_;
  std::string qualified_name_;
};

}  // namespace backplane
