// Per-call cost of a backplane op through the dispatcher, beside aten's, on a 1-element
// float32 tensor: what the dispatcher, the op's contract checks, the output allocation (and
// for a stable-ABI plugin, its C interface) cost when there is no work to hide them.
#pragma once

#include "backend_selection.h"

namespace backplane::bench {

// Rows call_overhead_{add,mul}/<backend>/{backplane,torch}/1, for each of the two the backend
// serves. Host wall time per call; on a device the calls are queued without a
// sync per call.
void register_call_overhead(const SelectedBackend& backend);

}  // namespace backplane::bench
