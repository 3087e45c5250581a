// Graph capture and replay on the npu: the PyTorch side of the driver's stream capture
// (runtime/npu_runtime.h, "graphs"), behind torch.npu.NPUGraph (python/backplane_npu/
// _graphs.py) and, on torch 2.12 and later, torch.accelerator.Graph.
//
// A capture records what is queued on one stream (the current stream at capture_begin):
// Backplane kernels, aten kernels, copies, compiled kernels, and aten ops served by the
// CPU fallback (queued in stream order while capturing: npu_graph_fallback.cpp). Replay
// queues the recording as one task on the current stream. Allocations on the capturing
// stream come from a private pool of the caching allocator (caching_allocator.h), and the
// recorded tasks hold the tensors they use, so every address a replay touches stays
// fixed until reset(). Host waits and reads of captured work are refused (the driver
// refuses them) and spoil the capture: capture_end then raises.
// Limits: one stream per capture; a task failing during a replay reports its failure at
// the next synchronize of the stream it was captured on; random ops in the fallback are
// refused while capturing (a replay would not redraw them as eager does).
#pragma once

#include "device/npu_stream.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <optional>

namespace backplane::npu {

class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Begins capturing the current stream of the current device into `pool` ({0, 0}: a
  // fresh private pool; another id: share that pool, as graphs replayed in turn may).
  void capture_begin(c10::MempoolId_t pool = {0, 0});
  void capture_end();
  void replay();  // on the current stream of the graph's device
  // Drops the recording and its reference to the pool; replay is refused afterwards.
  void reset();
  c10::MempoolId_t pool() const { return pool_; }
  size_t node_count() const;  // tasks and event records in the recording (0: none)

 private:
  npuGraph_t graph_ = nullptr;
  std::optional<c10::Stream> capture_stream_;  // set while capturing
  c10::MempoolId_t pool_{0, 0};
  bool holds_pool_ = false;  // a reference taken by the capture's begin_allocate_to_pool
  c10::DeviceIndex device_ = -1;
};

// Whether `stream` is capturing a graph.
bool is_capturing(const c10::Stream& stream);

// The CPU fallback's path while the current stream of `device` captures: the op's output
// shapes from its Meta kernel, its outputs allocated now, the CPU kernel queued on the
// stream over host views (npu_graph_fallback.cpp). Raises naming the op for ops whose
// outputs the Meta kernel cannot give, that return no tensor, or that draw random numbers.
void captured_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::Device device);

}  // namespace backplane::npu
