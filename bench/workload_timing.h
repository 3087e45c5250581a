// How one benchmark row is timed, the same way for every implementation of an op: samples
// of a batch of calls (about 1 ms each) until the stop rule (adaptive_stop.h) is met; the
// row's time is the samples' median per call, its spread the samples' (counters "spread",
// "samples", "sampled_seconds", "calls_per_batch" in the JSON).
//   CPU: wall clock (ATen runs on several threads, so CPU time would count both cores).
//   any other device: device-side time from events on the current stream (UseManualTime),
//        through the device-generic c10::Event API; this file links no device runtime.
//   cuda with set_cuda_graph(true): the same batches recorded once as a CUDA graph and
//        replayed (recorded_batch.h), so ops shorter than a launch time the kernels, not
//        the host's launch rate.
//   cuda with set_cold_l2(true): each sample is one call after an untimed L2 flush
//        (cold_cache.h), with events or as a graph replay alike; such rows say cold_l2=1.
#pragma once

#include "adaptive_stop.h"

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
  // Floating-point operations per call (the registry's `flops:` times the elements of the
  // op's largest Tensor argument; the JSON's "flops" counter); 0: not known, not recorded.
  double flops = 0;
};

// Builds the inputs on the device when the row runs, so a device holds only one row's
// tensors at a time (rows of 1 GiB tensors would not all fit at once).
using WorkloadFactory = std::function<Workload(c10::Device)>;

// Registers a row named `name` that builds its workload, warms up, then times step().
// A throw while building or running (a kernel missing on a backend, out of memory)
// marks the row with the error instead of ending the process.
benchmark::internal::Benchmark* register_workload(const std::string& name, c10::Device device, WorkloadFactory make);

// Rows registered so far (for the progress line).
int registered_workloads();

// When the rows stop sampling (each repetition of each row).
void set_stop_rule(const StopRule& rule);

// Whether CUDA rows are timed as replays of a CUDA graph (off: events around eager calls).
void set_cuda_graph(bool enabled);

// Whether CUDA rows flush the L2 cache before each sample of one call (--cold-l2).
void set_cold_l2(bool enabled);

}  // namespace backplane::bench
