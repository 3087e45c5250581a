// Names a registry document may not give its namespace or its ops: torch.ops.<ns>.<name>
// must reach the op.
#pragma once

#include <string>

namespace backplane::detail {

// Why a fragment may not use namespace `ns` (empty: it may).
std::string reserved_namespace(const std::string& ns);
// Why an op may not be named `name` (empty: it may).
std::string reserved_op_name(const std::string& name);

}  // namespace backplane::detail
