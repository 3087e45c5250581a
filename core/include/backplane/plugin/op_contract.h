// What an op promises about its arguments and its output, from the registry:
// allowed dtypes, one dtype and one device across Tensor arguments, the values a str
// argument may take (`choices:`), and the output shape from the op's shape rule. The Meta kernels and every backend's kernels go
// through the same contract, so a bad input raises the same message on every device
// and under FakeTensor.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/SymInt.h>
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
  // sizes the shape rule gives (for in_place and out rules, the written argument's).
  // Symbolic, so that under torch.export a dynamic dimension stays dynamic: the
  // rules compare sizes with expect_true/guard_or_false rather than specializing.
  std::vector<c10::SymInt> check(c10::ArrayRef<c10::IValue> args) const;

  // check(), then a new output of the rule's sizes with the dtype and device of the
  // first Tensor argument. Not for in_place or out rules. Contiguous, except for a
  // broadcast rule: its output takes the strides of the first of the rule's arguments
  // that has the output's sizes, where that one is dense but not contiguous (transposed,
  // permuted, channels_last), as aten's elementwise ops lay out theirs. Kernels of
  // broadcast ops must therefore honour out's strides.
  at::Tensor new_output(c10::ArrayRef<c10::IValue> args) const;
  // The same for every output of an op returning several tensors (OpDef::extra_outputs):
  // one new tensor per return value, each of its own rule's sizes and layout.
  std::vector<at::Tensor> new_outputs(c10::ArrayRef<c10::IValue> args) const;
  // The argument a broadcast output's layout follows (see new_output), or nullptr.
  const at::Tensor* layout_source(size_t which, c10::SymIntArrayRef sizes, c10::ArrayRef<c10::IValue> args) const;

  // check() for an out rule: out must already have the sizes of `like`. Custom ops
  // cannot resize a mutated argument under torch.compile/export (functionalization
  // assumes its shape is fixed), so out is never resized; a mismatch is an error.
  void check_out(c10::ArrayRef<c10::IValue> args) const { check(args); }

  // "backplane::add"
  const std::string& qualified_name() const { return qualified_name_; }

 private:
  void check_tensors(c10::ArrayRef<c10::IValue> args) const;
  void check_scalars(c10::ArrayRef<c10::IValue> args) const;
  void check_choice(const std::string& arg, const std::string& value) const;
  void check_written(const std::string& written_name, const at::Tensor& written,
                     c10::ArrayRef<c10::IValue> args) const;
  // Sizes by the rule of output `which` (0: OpDef::shape, then extra_outputs).
  std::vector<c10::SymInt> rule_sizes(size_t which, c10::ArrayRef<c10::IValue> args) const;
  at::Tensor allocate(size_t which, const std::vector<c10::SymInt>& sizes, c10::ArrayRef<c10::IValue> args) const;
  const OpDef* def_;
  std::string qualified_name_;
  // Argument positions, resolved once: this runs on every call of every kernel.
  std::vector<int> tensor_positions_;             // def().tensor_args
  std::vector<std::vector<int>> rule_positions_;  // the arguments each output's rule names
};

}  // namespace backplane
