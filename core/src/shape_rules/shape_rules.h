// Hand-written shape rules that the registry names with {custom: name}: the escape
// hatch for shapes the closed set of rules cannot say. Each checks the op's
// arguments beyond dtype and device, and returns the output sizes.
#pragma once

#include <backplane/registry.h>

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace backplane {

using CustomShapeRule = std::vector<int64_t> (*)(const OpDef& op, c10::ArrayRef<c10::IValue> args);

// nullptr when core has no rule of that name.
CustomShapeRule find_custom_shape_rule(const std::string& name);
std::vector<std::string> custom_shape_rule_names();

// The rules themselves, one file each.
std::vector<int64_t> crop_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);
std::vector<int64_t> rms_norm_shape(const OpDef& op, c10::ArrayRef<c10::IValue> args);

}  // namespace backplane
