#include "op_workloads.h"

#include "backward_workloads.h"
#include "bench_inputs.h"
#include "distinct_bytes.h"
#include "result_check.h"
#include "workload_timing.h"

#include "conformance/inputs.h"
#include "formula/reference_expr.h"
#include <backplane/registry.h>
#include <backplane/selection.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

// With --backward, a row times a forward+backward instead (backward_workloads.h) and ops
// without a `backward:` are skipped; copy_ rows are the same in both.
//
// Every row derives from the registry: each op's `bench` shapes (by default its first;
// elementwise rules default to 1M elements), in float32 and bfloat16 where the op takes them, beside its
// baseline: PyTorch's own op where the registry names one (`baseline:`, e.g. aten::rms_norm),
// else its `reference` (the PyTorch expression the conformance suite checks it against), run in
// the same dtype on the same device, and a copy_ row of the op's largest tensor as the
// device's bandwidth reference. Rows are named <op>/<backend>/<impl>/<shape>_<dtype>:
//   add/cpu/backplane/1M_elements_float32   add/cpu/reference/...   add/cpu/copy_/...
// The reference and copy_ rows are the device's, not a backend's: they are timed under the
// first selected backend on each device only (the run's context says "shared_rows.<b>":
// where backend b finds them).
//
// Inputs are not rotated between calls: a 4 MiB tensor stays in L2/L3 from one call to
// the next on a CPU; the reference row runs under the same conditions. In-place ops
// write the same tensor every call (values may reach inf: a constant-speed path on
// every device here).

namespace backplane::bench {
namespace {

// Each tensor argument's distinct elements read once (an expanded view: its one row) and
// each output (or the written argument) written once.
int64_t traffic_bytes(const OpDef& op, const std::vector<c10::IValue>& args, int64_t* out_elements) {
  int64_t bytes = 0;
  for (const auto& a : args)
    if (a.isTensor()) bytes += distinct_bytes(a.toTensor());
  if (op.writes()) {
    const at::Tensor& written = args[op.arg_index(op.shape.args[0])].toTensor();
    *out_elements = written.numel();
    // in place: read and written; out: only written (already counted once).
    return op.shape.kind == ShapeRuleKind::InPlace ? bytes + written.nbytes() : bytes;
  }
  torch::jit::Stack stack(args.begin(), args.end());
  conformance::op_handle(op).callBoxed(stack);
  *out_elements = 0;
  for (const at::Tensor& out : conformance::op_results(op, args, stack)) {
    *out_elements += out.numel();
    bytes += out.nbytes();
  }
  return bytes;
}

// The registry's `flops:` (per element of the largest Tensor argument) times that
// argument's elements (of the view: an expanded argument counts every element it shows);
// 0 where the registry gives none.
double flops_per_call(const OpDef& op, const std::vector<c10::IValue>& args) {
  int64_t largest = 0;
  for (const auto& a : args)
    if (a.isTensor()) largest = std::max<int64_t>(largest, a.toTensor().numel());
  return op.checks.flops_per_element * static_cast<double>(largest);
}

WorkloadFactory backplane_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype) {
  // Checked on the row's first build: --interleave rebuilds a row each time it comes round
  // again, and the float64 reference on the CPU takes seconds at the 64M presets.
  auto checked = std::make_shared<bool>(false);
  return [&op, shape, dtype, checked](c10::Device d) {
    const auto args = make_args(op, shape, dtype, d);
    if (!*checked) {
      if (auto wrong = check_result(op, args))
        throw std::runtime_error("wrong result against the reference, not timed: " + *wrong);
      *checked = true;
    }
    int64_t elements = 0;
    const int64_t bytes = traffic_bytes(op, args, &elements);
    const auto handle = conformance::op_handle(op);
    return Workload{[handle, args] {
                      torch::jit::Stack stack(args.begin(), args.end());
                      handle.callBoxed(stack);
                      benchmark::DoNotOptimize(stack);
                    },
                    bytes, elements, dtype_name(dtype) + " " + op.qualified_name(), flops_per_call(op, args)};
  };
}

WorkloadFactory reference_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype) {
  return [&op, shape, dtype](c10::Device d) {
    const auto args = make_args(op, shape, dtype, d);
    int64_t elements = 0;
    const int64_t bytes = traffic_bytes(op, args, &elements);
    std::map<std::string, c10::IValue> names;
    for (size_t i = 0; i < args.size(); ++i) names[op.arguments[i].name()] = args[i];
    const conformance::ReferenceExpr baseline = conformance::ReferenceExpr::parse(op.checks.bench_baseline());
    return Workload{[baseline, names] { benchmark::DoNotOptimize(baseline.evaluate_all(names)); }, bytes, elements,
                    dtype_name(dtype) + " " + op.checks.bench_baseline(), flops_per_call(op, args)};
  };
}

// out.copy_(x) for the op's largest tensor: the device's copy bandwidth.
WorkloadFactory copy_row(const OpDef& op, const OpInputs& shape, c10::ScalarType dtype) {
  std::vector<int64_t> largest;
  for (const auto& t : op.tensor_args) {
    const auto sizes = shape.find(t)->toIntVector();
    if (c10::multiply_integers(sizes) > c10::multiply_integers(largest)) largest = sizes;
  }
  return [largest, dtype](c10::Device d) {
    at::Tensor x = at::randn(largest, at::TensorOptions().dtype(dtype).device(d)), out = at::empty_like(x);
    return Workload{[x, out]() mutable { out.copy_(x); }, static_cast<int64_t>(2 * x.nbytes()), x.numel(),
                    dtype_name(dtype) + " out.copy_(x)"};
  };
}

// A backplane row times its own plugin's kernel. Where two selected plugins serve the op on
// one device, the core's selector would call the chosen one for both rows: the row holds a
// preference for its plugin from its build (the result check included) to its end.
WorkloadFactory served_by(const std::string& plugin, const std::string& op, WorkloadFactory make) {
  return [plugin, op, make = std::move(make)](c10::Device d) {
    auto hold = std::make_shared<ScopedPreference>(op, std::vector<std::string>{plugin});
    Workload w = make(d);
    w.step = [hold, step = std::move(w.step)] { step(); };
    return w;
  };
}

std::string shape_label(const OpInputs& shape) {
  std::string out;
  for (char c : shape.name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

}  // namespace

void register_op_benchmarks(const SelectedBackend& backend, const BenchOptions& options, bool device_rows) {
  for (const OpDef& op : all_ops()) {
    const std::string id = op.id();
    if (!options.wants_op(id)) continue;
    if (op.checks.bench.empty()) {
      std::cerr << "backplane_bench: " << id << " has no bench shapes in the registry; not benchmarked\n";
      continue;
    }
    if (options.backward && op.backward.empty()) {
      // Once per op, though each backend registers its rows.
      static std::set<std::string> reported;
      if (reported.insert(id).second)
        std::cerr << "backplane_bench: " << id << " has no backward: in the registry; not benchmarked with "
                     "--backward\n";
      continue;
    }
    if (!backend.ops.count(id) && device_rows)
      std::cerr << "backplane_bench: " << id << " is not implemented on " << backend.name
                << "; only its reference rows run\n";
    for (const auto& shape : op.checks.bench)
      for (auto dtype : options.dtypes) {
        if (!op.supports(dtype) || !options.wants_shape(shape.name, &shape == &op.checks.bench.front())) continue;
        const std::string suffix = "/" + shape_label(shape) + "_" + dtype_name(dtype);
        const std::string prefix = id + "/" + backend.name + "/";
        if (device_rows) register_workload(prefix + "copy_" + suffix, backend.device, copy_row(op, shape, dtype));
        if (backend.ops.count(id))
          register_workload(prefix + "backplane" + suffix, backend.device,
                            served_by(backend.name, id,
                                      options.backward ? backward_backplane_row(op, shape, dtype)
                                                       : backplane_row(op, shape, dtype)));
        if (device_rows && !op.checks.bench_baseline().empty())
          register_workload(prefix + "reference" + suffix, backend.device,
                            options.backward ? backward_reference_row(op, shape, dtype)
                                             : reference_row(op, shape, dtype));
      }
  }
}

}  // namespace backplane::bench
