#include "workload_timing.h"

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

void run_on_cpu(benchmark::State& state, const Workload& w) {
  for (int i = 0; i < kWarmupCalls; ++i) w.step();
  for (auto _ : state) w.step();
}

// `batch`: calls per timed batch, chosen on the row's first run and kept for the rest,
// also where --interleave builds the row again (Google Benchmark requires every repetition
// of a row to run the same iterations, and aborts the process otherwise).
void run_on_device(benchmark::State& state, c10::Device device, const Workload& w, int64_t& batch) {
  const c10::DeviceGuard guard(device);
  DeviceBatchTimer timer(device);
  timer.time_batch(w.step, kWarmupCalls);
  if (batch == 0) {
    // Size the batch from a measured one: one call per batch for 1 GiB tensors, hundreds
    // for 1K elements, where a single call is mostly launch latency.
    const double per_call = timer.time_batch(w.step, 16) / 16;
    const auto wanted = static_cast<int64_t>(std::ceil(kTargetBatchSeconds / std::max(per_call, 1e-9)));
    batch = std::clamp<int64_t>(wanted, 1, kMaxBatch);
  }
  // Each timed batch counts as `batch` iterations: Google Benchmark sizes the run from
  // iterations x time per iteration, so a batch counted as one iteration would make the
  // run `batch` times longer than --min-time asks.
  if (cuda_graph_enabled() && device.is_cuda()) {
    // The same batch, recorded once and replayed: device time without the host's launches.
    const std::unique_ptr<RecordedBatch> recorded = record_cuda_graph(device, w.step, batch);
    while (state.KeepRunningBatch(batch)) state.SetIterationTime(recorded->replay_seconds());
    state.counters["cuda_graph"] = 1;
  } else {
    while (state.KeepRunningBatch(batch)) state.SetIterationTime(timer.time_batch(w.step, batch));
  }
  state.counters["calls_per_batch"] = static_cast<double>(batch);
  if (!timer.uses_events()) state.counters["host_timed"] = 1;
}

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

double& min_time_seconds() {
  static double seconds = 0;  // 0: Google Benchmark's default
  return seconds;
}

// Google Benchmark calls a row's function several times (to size the iteration count,
// then once per repetition), one row after another, or in a random order with
// --interleave. The row's inputs are built on its first call and kept until another row
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

// Google Benchmark (1.7) aborts the process when the repetitions of a row ran different
// iteration counts, a failed repetition included. So a failed run still counts out its
// iterations, in the batches a timed run takes, and a row that failed once fails every
// later run the same way (RowState::failed): a kernel that fails only in the third
// repetition is a row reported as failed, not a lost run.
struct RowState {
  int64_t batch = 0;   // device rows: calls per timed batch, fixed on the first run
  std::string failed;  // why the row failed, once it has
};

// Only for a run whose timed loop has not finished: everything that can throw in a row's
// function runs before the loop ends (a second FinishKeepRunning would abort).
void fail_run(benchmark::State& state, const RowState& row) {
  const int64_t batch = std::max<int64_t>(row.batch, 1);
  while (state.KeepRunningBatch(batch)) {
  }
  state.SkipWithError(row.failed.c_str());
}

}  // namespace

void set_min_time(double seconds) { min_time_seconds() = seconds; }

void set_cuda_graph(bool enabled) { cuda_graph_enabled() = enabled; }

benchmark::internal::Benchmark* register_workload(const std::string& name, c10::Device device, WorkloadFactory make) {
  auto shared = std::make_shared<RowState>();
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [name, device, make = std::move(make),
                                                        shared](benchmark::State& state) {
    RowState& row_state = *shared;
    if (!row_state.failed.empty()) return fail_run(state, row_state);
    try {
      CurrentRow& row = row_for(name, device, make);
      const Workload& w = *row.workload;
      if (device.is_cpu()) run_on_cpu(state, w);
      else run_on_device(state, device, w, row_state.batch);
      state.SetBytesProcessed(state.iterations() * w.bytes);
      state.SetItemsProcessed(state.iterations() * w.elements);
      state.SetLabel(w.label);
    } catch (const std::exception& e) {
      row_state.failed = message_of(e);
      fail_run(state, row_state);
    }
  });
  b->Unit(benchmark::kMicrosecond);
  if (min_time_seconds() > 0) b->MinTime(min_time_seconds());  // the API: the flag's syntax differs by version
  if (device.is_cpu()) b->UseRealTime();
  else b->UseManualTime();
  return b;
}

}  // namespace backplane::bench
