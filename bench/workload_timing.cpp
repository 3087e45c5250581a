#include "workload_timing.h"

#include "cold_cache.h"
#include "recorded_batch.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

namespace backplane::bench {
namespace {

constexpr int kWarmupCalls = 3;
// Calls per timed batch on a device are chosen so one batch lasts about this long:
// long enough that event resolution and the gap after each sync do not count.
constexpr double kTargetBatchSeconds = 1e-3;
constexpr int64_t kMaxBatch = 4096;

// Times batches of calls on one device stream with device events. A runtime that has
// no events or no elapsed time between them (the interface's defaults throw) falls back
// to synchronize + steady_clock around the whole batch: host time, which includes the
// final sync, so it reads slightly slow for short batches; such rows say host_timed=1.
class DeviceBatchTimer {
 public:
  explicit DeviceBatchTimer(c10::Device device)
      : impl_(c10::impl::getDeviceGuardImpl(device.type())),
        stream_(impl_->getStream(device)),
        start_(device.type(), c10::EventFlag::BACKEND_DEFAULT),
        stop_(device.type(), c10::EventFlag::BACKEND_DEFAULT) {
    try {
      start_.record(stream_);
      stop_.record(stream_);
      stop_.synchronize();
      start_.elapsedTime(stop_);
      use_events_ = true;
    } catch (const c10::Error&) {
      use_events_ = false;
    }
  }

  // Seconds that `calls` calls of step take on the device.
  double time_batch(const std::function<void()>& step, int64_t calls) {
    // One untimed call ahead of the start event keeps the device busy while the host
    // queues the timed calls, so the launch latency after the previous sync is not
    // counted as device time.
    step();
    if (use_events_) {
      start_.record(stream_);
      for (int64_t i = 0; i < calls; ++i) step();
      stop_.record(stream_);
      stop_.synchronize();
      return start_.elapsedTime(stop_) * 1e-3;  // elapsedTime is in milliseconds
    }
    impl_->synchronizeStream(stream_);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < calls; ++i) step();
    impl_->synchronizeStream(stream_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  // Seconds of one call of step after `flush`, which is queued first and not timed: the
  // call starts on a cold cache. The flush also keeps the device busy while the host
  // queues the timed call, as the untimed call does in time_batch.
  double time_cold_call(const std::function<void()>& step, const std::function<void()>& flush) {
    if (!use_events_) throw std::runtime_error("--cold-l2 times one call between device events, which this "
                                               "device's runtime does not record");
    flush();
    start_.record(stream_);
    step();
    stop_.record(stream_);
    stop_.synchronize();
    return start_.elapsedTime(stop_) * 1e-3;
  }

  bool uses_events() const { return use_events_; }

 private:
  const c10::impl::DeviceGuardImplInterface* impl_;
  c10::Stream stream_;
  c10::Event start_, stop_;
  bool use_events_ = false;
};

bool& cuda_graph_enabled() {
  static bool enabled = false;
  return enabled;
}

bool& cold_l2_enabled() {
  static bool enabled = false;
  return enabled;
}

StopRule& stop_rule() {
  static StopRule rule;
  return rule;
}

// Calls per sample for a call of `per_call` seconds: one sample lasts about
// kTargetBatchSeconds (one call for 1 GiB tensors, hundreds for 1K elements).
int64_t batch_for(double per_call) {
  const auto wanted = static_cast<int64_t>(std::ceil(kTargetBatchSeconds / std::max(per_call, 1e-9)));
  return std::clamp<int64_t>(wanted, 1, kMaxBatch);
}

// Takes samples of `batch` calls (seconds each, from `sample`) until the stop rule says
// enough; reports the median per-call time as the run's one iteration, and the spread.
void sample_until_stable(benchmark::State& state, int64_t batch, const std::function<double()>& sample) {
  std::vector<double> per_call;
  double elapsed = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    while (!should_stop(per_call, elapsed, stop_rule())) {
      per_call.push_back(sample() / static_cast<double>(batch));
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    state.SetIterationTime(median_of(per_call));
  }
  state.counters["spread"] = relative_spread(per_call);
  state.counters["samples"] = static_cast<double>(per_call.size());
  state.counters["sampled_seconds"] = elapsed;
  state.counters["calls_per_batch"] = static_cast<double>(batch);
}

double wall_seconds_of(const std::function<void()>& step, int64_t calls) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i) step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// `batch`: calls per sample, chosen on the row's first run and kept for its repetitions
// (also where --interleave builds the row again), so they time the same thing.
void run_on_cpu(benchmark::State& state, const Workload& w, int64_t& batch) {
  for (int i = 0; i < kWarmupCalls; ++i) w.step();
  if (batch == 0) batch = batch_for(wall_seconds_of(w.step, 1));
  sample_until_stable(state, batch, [&] { return wall_seconds_of(w.step, batch); });
}

void run_on_device(benchmark::State& state, c10::Device device, const Workload& w, int64_t& batch) {
  const c10::DeviceGuard guard(device);
  DeviceBatchTimer timer(device);
  timer.time_batch(w.step, kWarmupCalls);
  if (cold_l2_enabled() && device.is_cuda()) {
    // One call per sample: the calls after a batch's first would find the inputs in L2.
    batch = 1;
    const std::function<void()> flush = l2_flush(device);  // outlives `recorded`, which calls it
    if (cuda_graph_enabled()) {
      const std::unique_ptr<RecordedBatch> recorded = record_cuda_graph(device, w.step, 1, flush);
      sample_until_stable(state, 1, [&] { return recorded->replay_seconds(); });
      state.counters["cuda_graph"] = 1;
    } else {
      sample_until_stable(state, 1, [&] { return timer.time_cold_call(w.step, flush); });
    }
    state.counters["cold_l2"] = 1;
    return;
  }
  if (batch == 0) batch = batch_for(timer.time_batch(w.step, 16) / 16);
  if (cuda_graph_enabled() && device.is_cuda()) {
    // The same batch, recorded once and replayed: device time without the host's launches.
    const std::unique_ptr<RecordedBatch> recorded = record_cuda_graph(device, w.step, batch);
    sample_until_stable(state, batch, [&] { return recorded->replay_seconds(); });
    state.counters["cuda_graph"] = 1;
  } else {
    sample_until_stable(state, batch, [&] { return timer.time_batch(w.step, batch); });
  }
  if (!timer.uses_events()) state.counters["host_timed"] = 1;
}

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

// Google Benchmark calls a row's function once per repetition, one row after another, or
// in a random order with --interleave. The row's inputs are built on its first call and kept until another row
// starts: one row's tensors on the device at a time. Interleaved, a row is built again
// each time it comes round (its result check runs on the first build only).
struct CurrentRow {
  std::string name;
  std::shared_ptr<const Workload> workload;
  std::string error;  // building it failed: every call reports the same
};
CurrentRow& current_row() {
  static CurrentRow row;
  return row;
}

CurrentRow& row_for(const std::string& name, c10::Device device, const WorkloadFactory& make) {
  CurrentRow& row = current_row();
  if (row.name != name) {
    row = CurrentRow{name, nullptr, ""};  // the previous row's tensors go first
    try {
      row.workload = std::make_shared<const Workload>(make(device));
    } catch (const std::exception& e) {
      row.error = message_of(e);
    }
  }
  if (!row.workload) throw std::runtime_error(row.error);
  return row;
}

// Every run of a row is one iteration (the sampling happens inside it); a row that failed
// once fails every later repetition the same way (RowState::failed): a kernel that fails
// only in the third repetition is a row reported as failed, not a lost run.
struct RowState {
  int64_t batch = 0;   // calls per sample, fixed on the first run
  std::string failed;  // why the row failed, once it has
};

// For a run whose timed loop has not started, or was left by a throw: KeepRunning goes on
// from where the loop was (a range-for would start it again, which aborts the process).
void fail_run(benchmark::State& state, const RowState& row) {
  while (state.KeepRunning()) {
  }
  state.SkipWithError(row.failed.c_str());
}

int& workload_count() {
  static int count = 0;
  return count;
}

}  // namespace

void set_stop_rule(const StopRule& rule) { stop_rule() = rule; }

void set_cuda_graph(bool enabled) { cuda_graph_enabled() = enabled; }

void set_cold_l2(bool enabled) { cold_l2_enabled() = enabled; }

int registered_workloads() { return workload_count(); }

benchmark::internal::Benchmark* register_workload(const std::string& name, c10::Device device, WorkloadFactory make) {
  ++workload_count();
  auto shared = std::make_shared<RowState>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [name, device, make = std::move(make),
                                                        shared](benchmark::State& state) {
    RowState& row_state = *shared;
    if (!row_state.failed.empty()) return fail_run(state, row_state);
    try {
      CurrentRow& row = row_for(name, device, make);
      const Workload& w = *row.workload;
      if (device.is_cpu()) run_on_cpu(state, w, row_state.batch);
      else run_on_device(state, device, w, row_state.batch);
      state.SetBytesProcessed(state.iterations() * w.bytes);
      state.SetItemsProcessed(state.iterations() * w.elements);
      if (w.flops > 0) state.counters["flops"] = w.flops;  // per call: a counter is reported as set
      state.SetLabel(w.label);
    } catch (const std::exception& e) {
      row_state.failed = message_of(e);
      fail_run(state, row_state);
    }
  });
  // One iteration per repetition, timed by the samples' median (sample_until_stable).
  b->Unit(benchmark::kMicrosecond)->Iterations(1)->UseManualTime();
  return b;
}

}  // namespace backplane::bench
