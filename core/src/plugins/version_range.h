// A version range as a plugin manifest of kind triton states what it runs under
// (`triton: ">=3.0,<4"`, `torch: ">=2.11"`): clauses separated by ',', each an operator
// (>=, >, <=, <, ==, !=) and a dotted version of one to three whole numbers. The one
// reader of such ranges: the loader checks torch's with it, and Python checks Triton's
// through backplane._python_kernels (python/src/python_kernels.cpp).
#pragma once

#include <backplane/export.h>

#include <optional>
#include <string>

namespace backplane {

// Why `range` is not a range by the grammar above; nullopt when it is.
BACKPLANE_API std::optional<std::string> version_range_error(const std::string& range);

// Whether `version` ("2.14", "3.8.0", "2.14.1+cu130", "3.5.0a0": the local part after '+'
// and anything after a component's digits are ignored) lies in `range`. Throws
// std::invalid_argument, with version_range_error's text, for a bad range.
BACKPLANE_API bool version_in_range(const std::string& version, const std::string& range);

}  // namespace backplane
