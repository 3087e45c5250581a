// Hand-written shape rules that the registry names with {custom: name}: the escape
// hatch for shapes the closed set of rules cannot say. Each checks the op's
// arguments beyond dtype and device, and returns the output sizes.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/ivalue.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace backplane {

// Sizes are symbolic: compare them with sym_* and expect_true, never by value, so
// dynamic dimensions survive torch.export.
using CustomShapeRule = std::vector<c10::SymInt> (*)(const OpDef& op, c10::ArrayRef<c10::IValue> args);

// nullptr when core has no rule of that name.
CustomShapeRule find_custom_shape_rule(const std::string& name);
std::vector<std::string> custom_shape_rule_names();

// Whether a and b have the same sizes (symbolically: a dynamic dimension stays dynamic).
bool same_sizes(const at::Tensor& a, const at::Tensor& b);

// The rules themselves, one file each.
std::vector<c10::SymInt> crop_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);
std::vector<c10::SymInt> rms_norm_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);
std::vector<c10::SymInt> rms_norm_backward_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);
std::vector<c10::SymInt> rotary_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);
std::vector<c10::SymInt> softmax_backward_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);

}  // namespace backplane
