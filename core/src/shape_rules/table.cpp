#include "shape_rules.h"

#include <map>

namespace backplane {
namespace {
const std::map<std::string, CustomShapeRule>& rules() {
  static const std::map<std::string, CustomShapeRule> table = {
      {"crop", &crop_shape},
      {"rms_norm", &rms_norm_shape},
      {"rms_norm_backward", &rms_norm_backward_shape},
      {"rotary", &rotary_shape},
      {"softmax_backward", &softmax_backward_shape},
  };
  return table;
}
}  // namespace

bool same_sizes(const at::Tensor& a, const at::Tensor& b) {
  bool same = a.dim() == b.dim();
  for (int64_t d = 0; same && d < a.dim(); ++d) same = a.sym_size(d).sym_eq(b.sym_size(d)).expect_true(__FILE__, __LINE__);
  return same;
}

CustomShapeRule find_custom_shape_rule(const std::string& name) {
  auto it = rules().find(name);
  return it == rules().end() ? nullptr : it->second;
}

std::vector<std::string> custom_shape_rule_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : rules()) names.push_back(name);
  return names;
}

}  // namespace backplane
