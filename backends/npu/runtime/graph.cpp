// Graphs: stream capture, and launch of a capture as one task (npu_runtime.h, "graphs").
// A capture lives in its stream (npuStream_::capture, under the stream's mutex); the
// stream's enqueue appends to it instead of queueing while it is open.
#include "internal.h"

#include <algorithm>

namespace npu_runtime {

npuError_t refuse_if_capturing(npuStream_t s, const char* call) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (!s->capture) return npuSuccess;
  if (s->capture->invalidated_by.empty()) s->capture->invalidated_by = call;
  return npuErrorStreamCaptureUnsupported;
}

bool capture_event_record(npuStream_t s, const std::shared_ptr<EventState>& state) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (!s->capture) return false;
  s->capture->nodes.push_back({nullptr, state});
  std::lock_guard<std::mutex> event_lock(state->mutex);
  state->pending_capture = s;
  return true;
}

}  // namespace npu_runtime

using namespace npu_runtime;

npuError_t npuStreamBeginCapture(npuStream_t stream) {
  if (stream == nullptr) return npuErrorInvalidValue;
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->capture) return npuErrorStreamCaptureUnmatched;
  stream->capture = std::make_unique<Capture>();
  return npuSuccess;
}

npuError_t npuStreamEndCapture(npuStream_t stream, npuGraph_t* graph) {
  if (stream == nullptr || graph == nullptr) return npuErrorInvalidValue;
  *graph = nullptr;
  std::unique_ptr<Capture> capture;
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    if (!stream->capture) return npuErrorStreamCaptureUnmatched;
    capture = std::move(stream->capture);
  }
  // Its records are no longer pending: host waits on those events see only launches.
  for (const CapturedNode& node : capture->nodes) {
    if (!node.record) continue;
    std::lock_guard<std::mutex> lock(node.record->mutex);
    if (node.record->pending_capture == stream) node.record->pending_capture = nullptr;
  }
  // A spoilt capture's tasks are dropped here, on the calling thread (their release
  // callbacks run now).
  if (!capture->invalidated_by.empty()) return npuErrorStreamCaptureInvalidated;
  *graph = new npuGraph_{std::make_shared<const std::vector<CapturedNode>>(std::move(capture->nodes))};
  return npuSuccess;
}

npuError_t npuStreamIsCapturing(npuStream_t stream, int* capturing) {
  if (stream == nullptr || capturing == nullptr) return npuErrorInvalidValue;
  std::lock_guard<std::mutex> lock(stream->mutex);
  *capturing = stream->capture ? 1 : 0;
  return npuSuccess;
}

npuError_t npuGraphLaunch(npuGraph_t graph, npuStream_t stream) {
  if (graph == nullptr || stream == nullptr) return npuErrorInvalidValue;
  int capturing = 0;
  npuStreamIsCapturing(stream, &capturing);
  if (capturing) return npuErrorStreamCaptureUnsupported;
  // Each event record of the graph takes its version now, as npuEventRecord does, so
  // that a host wait issued after this call waits for the launch.
  std::shared_ptr<const std::vector<CapturedNode>> nodes = graph->nodes;
  std::vector<uint64_t> versions(nodes->size(), 0);
  for (size_t i = 0; i < nodes->size(); ++i) {
    const auto& state = (*nodes)[i].record;
    if (!state) continue;
    std::lock_guard<std::mutex> lock(state->mutex);
    versions[i] = ++state->recorded;
  }
  enqueue(stream, [nodes, versions = std::move(versions)] {
    for (size_t i = 0; i < nodes->size(); ++i) {
      const CapturedNode& node = (*nodes)[i];
      if (!node.record) {
        node.run();
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(node.record->mutex);
        node.record->completed = std::max(node.record->completed, versions[i]);
        node.record->when = Clock::now();
      }
      node.record->reached.notify_all();
    }
  });
  return npuSuccess;
}

npuError_t npuGraphGetNodeCount(npuGraph_t graph, size_t* count) {
  if (graph == nullptr || count == nullptr) return npuErrorInvalidValue;
  *count = graph->nodes->size();
  return npuSuccess;
}

npuError_t npuGraphDestroy(npuGraph_t graph) {
  delete graph;  // the nodes go with the last queued launch that holds them
  return npuSuccess;
}
