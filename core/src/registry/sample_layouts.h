// The layouts a registry sample may name (`layout:`), and which ranks each needs. The
// registry's readers check the names; the conformance suite and the benchmarks make the
// tensors (conformance/inputs.h). In namespace conformance, where every caller uses them.
#pragma once

#include <backplane/export.h>

#include <cstdint>
#include <optional>
#include <string_view>

namespace backplane::conformance {

enum class Layout {
  Contiguous,
  Strided,     // every other element of a larger tensor along the last dimension
  Transposed,  // last two dimensions swapped (needs 2 dimensions)
  Offset,      // contiguous, but starting 5 elements into its storage
  Expanded,    // the first dimension is a stride-0 broadcast (needs 1 dimension)
  Permuted,    // dimensions in reverse order in memory: the innermost is the outermost in
               // storage (needs 3 dimensions; for 2 it would be Transposed)
};
inline constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Strided, Layout::Transposed, Layout::Offset,
                                      Layout::Expanded,   Layout::Permuted};
BACKPLANE_API const char* layout_name(Layout layout);
// The layout of that name (layout_name's), or nullopt.
BACKPLANE_API std::optional<Layout> layout_named(std::string_view name);
// Whether a tensor of `dim` dimensions can take the layout.
BACKPLANE_API bool layout_fits(Layout layout, int64_t dim);

}  // namespace backplane::conformance
