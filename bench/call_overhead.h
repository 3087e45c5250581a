// Per-call cost of a backplane op through the dispatcher, beside at::add, on a
// 1-element float32 tensor: what the dispatcher, the op's contract checks and the
// output allocation cost when there is no work to hide them.
#pragma once

#include "backend_selection.h"

namespace backplane::bench {

// Rows call_overhead_add/<backend>/{backplane,torch}/1. Host wall time per call;
// on a device the calls are queued without a sync per call.
void register_call_overhead(const SelectedBackend& backend);

}  // namespace backplane::bench
