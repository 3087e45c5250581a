// backplane_bench_cuda_graph: records a batch of bench calls as one CUDA graph
// (at::cuda::CUDAGraph, as torch.cuda.graph does) and times its replays with CUDA events.
// Loaded by backplane_bench for --cuda-graph (recorded_batch.h); built only with the CUDA
// plugin, so that the engine itself stays device-generic.
// A forward+backward step (--backward) is captured whole: the autograd engine's CUDA thread
// runs each backward node on the stream its forward ran on, the recording stream here, and
// the caching allocator serves a captured stream from the graph's pool whichever thread
// asks; the warm-up calls start that thread before the capture.
#include "recorded_batch.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>

namespace backplane::bench {
namespace {

// A CUDA event with timing, made on `device` (events record only on their device's streams).
class TimingEvent {
 public:
  explicit TimingEvent(c10::DeviceIndex device) {
    const c10::cuda::CUDAGuard guard(device);
    C10_CUDA_CHECK(cudaEventCreate(&event_));
  }
  ~TimingEvent() { cudaEventDestroy(event_); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

constexpr int kWarmupCallsOnStream = 2;

class CudaGraphBatch final : public RecordedBatch {
 public:
  CudaGraphBatch(c10::DeviceIndex device, const std::function<void()>& step, int64_t calls,
                 const std::function<void()>* before_each_replay)
      : device_(device),
        before_each_replay_(before_each_replay),
        stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)),
        start_{TimingEvent(device), TimingEvent(device)},
        stop_{TimingEvent(device), TimingEvent(device)} {
    const c10::cuda::CUDAGuard device_guard(device_);
    // The inputs were made on the current stream: the recording stream starts after them.
    c10::cuda::device_synchronize();
    // The memory of earlier recordings' pools goes back to the driver here, as
    // torch.cuda.graph does before a capture: a destroyed graph's pool is only marked
    // freeable, and the caching allocator frees such pools on an out-of-memory retry,
    // which it does not attempt while a capture is under way. Without this, a run of
    // every preset fills the device with dead pools and its later captures fail out of
    // memory.
    c10::cuda::CUDACachingAllocator::emptyCache();
    const c10::cuda::CUDAStreamGuard stream_guard(stream_);
    // Warmed up on the recording stream too, as torch.cuda.graph advises: state a library
    // sets up per stream on first use must not be first made inside the capture.
    for (int i = 0; i < kWarmupCallsOnStream; ++i) step();
    C10_CUDA_CHECK(cudaStreamSynchronize(stream_.stream()));
    graph_.capture_begin();
    try {
      for (int64_t i = 0; i < calls; ++i) step();
    } catch (...) {
      // The stream must leave capture mode whatever happened inside it.
      try {
        graph_.capture_end();
      } catch (...) {
      }
      (void)cudaGetLastError();
      throw;
    }
    graph_.capture_end();
    replay();  // the first replay uploads the graph to the device: not timed
    C10_CUDA_CHECK(cudaStreamSynchronize(stream_.stream()));
  }

  // Waits for what is still queued: the replay the last call left in flight writes into
  // tensors that may be freed once this batch is gone.
  ~CudaGraphBatch() override {
    if (in_flight_) (void)cudaStreamSynchronize(stream_.stream());
  }

  // Each call queues the next timed replay before it waits for the one in flight, so the
  // device goes from one replay to the next without waiting for the host and no launch's
  // host latency falls between a pair of events. (Waiting before queuing the next one
  // left that latency inside every interval; an untimed replay ahead of each timed one
  // kept it out at twice the device time.) The first call queues one untimed replay ahead
  // of its interval for the same reason; the last leaves one replay unused.
  double replay_seconds() override {
    const c10::cuda::CUDAGuard device_guard(device_);
    if (!in_flight_) {
      replay();
      queue_timed_replay(next_);
      in_flight_ = true;
    }
    const int current = next_;
    next_ ^= 1;
    queue_timed_replay(next_);
    C10_CUDA_CHECK(cudaEventSynchronize(stop_[current].get()));
    float ms = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms, start_[current].get(), stop_[current].get()));
    return static_cast<double>(ms) * 1e-3;
  }

 private:
  void replay() {
    const c10::cuda::CUDAStreamGuard stream_guard(stream_);  // CUDAGraph replays on the current stream
    graph_.replay();
  }

  // --cold-l2's flush runs here, on the recording stream ahead of the start event: outside
  // the timed interval, and keeping the device busy while the replay is queued.
  void queue_timed_replay(int slot) {
    if (before_each_replay_) {
      const c10::cuda::CUDAStreamGuard stream_guard(stream_);
      (*before_each_replay_)();
    }
    C10_CUDA_CHECK(cudaEventRecord(start_[slot].get(), stream_.stream()));
    replay();
    C10_CUDA_CHECK(cudaEventRecord(stop_[slot].get(), stream_.stream()));
  }

  c10::DeviceIndex device_;
  const std::function<void()>* before_each_replay_;  // null: none; owned by the caller
  c10::cuda::CUDAStream stream_;
  at::cuda::CUDAGraph graph_;
  // Two intervals, used in turn: one being waited for, the next already queued.
  TimingEvent start_[2], stop_[2];
  int next_ = 0;
  bool in_flight_ = false;
};

void copy_message(const std::string& message, char* error, std::size_t error_size) {
  std::snprintf(error, error_size, "%s", message.c_str());  // cut to fit, NUL-terminated
}

std::string message_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace
}  // namespace backplane::bench

extern "C" __attribute__((visibility("default"))) backplane::bench::RecordedBatch* backplane_bench_record_cuda_graph(
    int device_index, const std::function<void()>* step, int64_t calls,
    const std::function<void()>* before_each_replay, char* error, std::size_t error_size) {
  try {
    const auto device = static_cast<c10::DeviceIndex>(device_index < 0 ? c10::cuda::current_device() : device_index);
    return new backplane::bench::CudaGraphBatch(device, *step, calls, before_each_replay);
  } catch (const std::exception& e) {
    backplane::bench::copy_message(backplane::bench::message_of(e), error, error_size);
  } catch (...) {  // nothing may cross the C entry point
    backplane::bench::copy_message("an exception that is not a std::exception", error, error_size);
  }
  return nullptr;
}

static_assert(std::is_same_v<decltype(&backplane_bench_record_cuda_graph), backplane::bench::RecordCudaGraphFn>,
              "the entry point must match what recorded_batch.cpp looks up");
