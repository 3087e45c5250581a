// How one benchmark row is timed, the same way for every implementation of an op.
//   CPU: Google Benchmark's wall clock (UseRealTime: ATen runs on several threads,
//        so CPU time would count both cores).
//   any other device: device-side time from events on the current stream (UseManualTime),
//        through the device-generic c10::Event API; this file links no device runtime.
//   cuda with set_cuda_graph(true): the same batches recorded once as a CUDA graph and
//        replayed (recorded_batch.h), so ops shorter than a launch time the kernels, not
//        the host's launch rate.
#pragma once

#include <benchmark/benchmark.h>

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>

namespace backplane::bench {

// One call of an op on prepared inputs, with the traffic it needs at the least.
struct Workload {
  std::function<void()> step;
  int64_t bytes = 0;     // each input read once + each output written once
  int64_t elements = 0;  // elements of the output
  std::string label;     // what this row runs, shown beside it: "float32 at::add(a, b)"
};

// Builds the inputs on the device when the row runs, so a device holds only one row's
// tensors at a time (rows of 1 GiB tensors would not all fit at once).
using WorkloadFactory = std::function<Workload(c10::Device)>;

// Registers a row named `name` that builds its workload, warms up, then times step().
// A throw while building or running (a kernel missing on a backend, out of memory)
// marks the row with the error instead of ending the process.
benchmark::internal::Benchmark* register_workload(const std::string& name, c10::Device device, WorkloadFactory make);

// The least time per repetition of rows registered after this call (0: Google
// Benchmark's default). Set through the API: --benchmark_min_time's syntax changed
// between Google Benchmark versions ("0.05" before 1.8, "0.05s" after).
void set_min_time(double seconds);

// Whether CUDA rows are timed as replays of a CUDA graph (off: events around eager calls).
void set_cuda_graph(bool enabled);

}  // namespace backplane::bench
