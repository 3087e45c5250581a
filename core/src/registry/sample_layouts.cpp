#include "registry/sample_layouts.h"

namespace backplane::conformance {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Strided: return "strided";
    case Layout::Transposed: return "transposed";
    case Layout::Offset: return "offset";
    case Layout::Expanded: return "expanded";
    case Layout::Permuted: return "permuted";
  }
  return "unknown";
}

std::optional<Layout> layout_named(std::string_view name) {
  for (Layout l : kLayouts)
    if (name == layout_name(l)) return l;
  return std::nullopt;
}

bool layout_fits(Layout layout, int64_t dim) {
  switch (layout) {
    case Layout::Transposed: return dim >= 2;
    case Layout::Permuted: return dim >= 3;
    case Layout::Strided:
    case Layout::Expanded: return dim >= 1;
    default: return true;
  }
}

}  // namespace backplane::conformance
