// A plugin's own ops ("vendor ops"): a registry fragment shipped beside the plugin, in
// the registry grammar, with a top-level `namespace:` of the plugin's own:
//
//   namespace: acme
//   ops:
//     - schema: fused_gelu(Tensor x) -> Tensor
//       doc: ...
//       dtypes: [float32]
//       shape: {same_as: x}
//       reference: aten::gelu(x)
//
// The core gives those ops what it gives its own: the schema (torch.ops.acme.fused_gelu),
// the Meta kernel from the shape rule, the Autograd kernel from `backward:`, the
// conformance suite, bench rows, and rows in `backplane ops`. The plugin's manifest names
// the fragment (`registry:`, written by backplane_add_plugin(... REGISTRY file)), and the
// loader defines it just before it opens the plugin. Kernels register with
// BACKPLANE_NS_KERNEL(acme, KEY, fused_gelu, fn) (kernel.h).
//
// Refused, naming both files and lines: an op the core registry or another loaded
// fragment already defines, any op in the `backplane` namespace, and an op some other
// library already defined in this process.
#pragma once

#include <backplane/export.h>
#include <backplane/registry.h>

#include <string>
#include <vector>

namespace backplane {

struct BACKPLANE_API Fragment {
  std::string file;  // as given: read_fragment's path, or parse_fragment's file
  std::string ns;    // its namespace
  std::vector<OpDef> ops;
};

// Parses a fragment (the registry grammar; `namespace:` required; no classes). Throws
// RegistryError with file:line:column.
BACKPLANE_API Fragment parse_fragment(const std::string& text, const std::string& file);
BACKPLANE_API Fragment read_fragment(const std::string& path);

// Throws RegistryError, at the fragment's op and naming the other definition's file and
// line, when defining `fragment` now would redefine an op. A fragment already defined
// from the same file passes (defining it again is a no-op).
BACKPLANE_API void check_fragment(const Fragment& fragment);

// check_fragment, then defines each op in PyTorch (schema, Meta kernel, Autograd kernel)
// and adds it to all_ops(). `plugin` names who brought it, in messages. Ops are never
// undefined: a plugin that fails to open after this leaves them defined, with no kernel.
BACKPLANE_API void define_fragment(const Fragment& fragment, const std::string& plugin);

}  // namespace backplane
