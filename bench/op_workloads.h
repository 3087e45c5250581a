// The op rows: every registry op at several sizes on one backend, each beside its
// PyTorch equivalent on the same device, and copy_ rows as the device's bandwidth
// reference. Rows are named <op>/<backend>/<impl>/<size> so a reader can group them:
//   add/cpu/backplane/1048576   add/cpu/torch/1048576   copy_/cpu/torch/1048576
//   rms_norm/cpu/torch_composite/256x4096_bfloat16
// Elementwise sizes are element counts of float32 tensors; rms_norm sizes are
// tokens x hidden with the dtype.
#pragma once

#include "backend_selection.h"
#include "bench_options.h"

namespace backplane::bench {

// Rows for each op, shape preset and dtype the options select. device_rows: also the
// reference and copy_ rows (the first backend on each device; the others share them).
void register_op_benchmarks(const SelectedBackend& backend, const BenchOptions& options, bool device_rows);

}  // namespace backplane::bench
