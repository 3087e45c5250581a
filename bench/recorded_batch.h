// A batch of calls recorded once as a device graph and then replayed: the time of a
// replay is the device's alone, without the host's cost of launching each call. Rows of
// ops shorter than a launch (a 1M-element add on an H100, say) otherwise time how fast
// the host queues them, not the kernel (bench/results/method.md).
//
// CUDA graphs only, from a module built beside the engine with the CUDA plugin
// (cuda_graph_batch.cpp, cuda_module.h): the engine itself links no device runtime, and
// loads the module only when asked (--cuda-graph). Limits: a call that synchronizes with the host or
// otherwise cannot be captured fails to record, and its row reports why; memory a call
// allocates comes from the graph's own pool, so a recorded batch holds one call's worth.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace backplane::bench {

class RecordedBatch {
 public:
  virtual ~RecordedBatch() = default;
  // Replays the recorded calls once, between two events on the recording stream, and
  // waits for them: the seconds between the events. The next replay is queued before the
  // wait, so no launch's host latency falls between the events (cuda_graph_batch.cpp).
  virtual double replay_seconds() = 0;
};

// The module's entry point (cuda_graph_batch.cpp): records `calls` calls of `step` on CUDA
// device `device_index`, or returns null with the reason in `error` (NUL-terminated,
// at most `error_size` bytes). `before_each_replay` (may be null) runs on the recording
// stream ahead of each timed replay, outside its events (--cold-l2's flush). C linkage, so
// the engine finds it with dlsym (cuda_module.h).
using RecordCudaGraphFn = RecordedBatch* (*)(int device_index, const std::function<void()>* step, int64_t calls,
                                            const std::function<void()>* before_each_replay, char* error,
                                            std::size_t error_size);
inline constexpr const char* kRecordCudaGraphSymbol = "backplane_bench_record_cuda_graph";

// Loads the module now, so that a build without it is refused when the run starts, not
// row by row. Throws std::runtime_error naming the file it looked for and why it failed.
void require_cuda_graph_module();

// Records `calls` calls of `step` on `device` (CUDA), after two warm-up calls on the
// recording stream. The graph keeps the addresses of the tensors `step` uses: they must
// outlive the RecordedBatch. before_each_replay (empty: nothing) runs eagerly on the
// recording stream before each timed replay, outside its events; it must outlive the
// RecordedBatch too. Throws std::runtime_error with the reason where the calls cannot be
// recorded.
std::unique_ptr<RecordedBatch> record_cuda_graph(c10::Device device, const std::function<void()>& step,
                                                 int64_t calls, const std::function<void()>& before_each_replay = {});

}  // namespace backplane::bench
