#include "device/npu_graph.h"

#include "device/caching_allocator.h"
#include "device/launch.h"

#include <c10/util/Exception.h>

namespace backplane::npu {

bool is_capturing(const c10::Stream& stream) {
  int capturing = 0;
  check(npuStreamIsCapturing(native(stream), &capturing), "asking whether a stream captures");
  return capturing != 0;
}

Graph::~Graph() {
  try {
    if (capture_stream_) capture_end();
  } catch (...) {  // a spoilt capture: its error was raised where it was spoilt
  }
  try {
    reset();
  } catch (...) {  // a destructor must not throw; the pool stays held (leaked) then
  }
}

void Graph::capture_begin(c10::MempoolId_t pool) {
  TORCH_CHECK(!capture_stream_, "backplane npu: NPUGraph.capture_begin: this graph is capturing already; "
                                "expected capture_end first");
  TORCH_CHECK(graph_ == nullptr, "backplane npu: NPUGraph.capture_begin: this graph holds a capture already; "
                                 "expected reset() before capturing again");
  const c10::DeviceIndex device = current_device();
  const c10::Stream stream = current_stream(device);
  TORCH_CHECK(!is_capturing(stream), "backplane npu: NPUGraph.capture_begin: ", stream.device(), " stream ",
              stream.id(), " captures another graph already; expected one capture per stream at a time");
  const c10::MempoolId_t id = pool == c10::MempoolId_t{0, 0} ? caching::new_pool_id() : pool;
  caching::begin_allocate_to_pool(device, id, [stream](c10::Stream s) { return s == stream; });
  const npuError_t status = npuStreamBeginCapture(native(stream));
  if (status != npuSuccess) {
    caching::end_allocate_to_pool(device, id);
    caching::release_pool(device, id);
    check(status, "beginning a capture");
  }
  device_ = device;
  pool_ = id;
  holds_pool_ = true;
  capture_stream_ = stream;
}

void Graph::capture_end() {
  TORCH_CHECK(capture_stream_, "backplane npu: NPUGraph.capture_end: this graph is not capturing; expected "
                               "capture_begin first");
  const c10::Stream stream = *capture_stream_;
  capture_stream_.reset();
  npuGraph_t graph = nullptr;
  const npuError_t status = npuStreamEndCapture(native(stream), &graph);
  caching::end_allocate_to_pool(device_, pool_);
  release_finished_work();  // a spoilt capture's tasks, dropped by the driver
  if (status != npuSuccess) {
    reset();
    TORCH_CHECK(status != npuErrorStreamCaptureInvalidated, "backplane npu: the graph capture on ", stream.device(),
                " stream ", stream.id(), " was spoilt by a call refused during it (a host wait or read of captured "
                "work, which raised there); nothing was captured; expected a capture free of host waits");
    check(status, "ending a capture");
  }
  graph_ = graph;
}

void Graph::replay() {
  TORCH_CHECK(!capture_stream_, "backplane npu: NPUGraph.replay: this graph is still capturing; expected "
                                "capture_end first");
  TORCH_CHECK(graph_ != nullptr, "backplane npu: NPUGraph.replay: nothing to replay: this graph has no capture "
                                 "(never captured, or reset() released it and its memory pool); expected a "
                                 "capture first");
  release_finished_work();
  const c10::Stream stream = current_stream(device_);
  TORCH_CHECK(!is_capturing(stream), "backplane npu: NPUGraph.replay: ", stream.device(), " stream ", stream.id(),
              " is capturing a graph; replaying one into a capture is not supported");
  check(npuGraphLaunch(graph_, native(stream)), "replaying a graph");
}

void Graph::reset() {
  TORCH_CHECK(!capture_stream_, "backplane npu: NPUGraph.reset: this graph is capturing; expected capture_end "
                                "first");
  if (graph_ != nullptr) {
    npuGraphDestroy(graph_);  // queued replays keep the recording until they have run
    graph_ = nullptr;
  }
  release_finished_work();  // the tensors the recording held, unless a queued replay holds them
  if (holds_pool_) {
    holds_pool_ = false;
    caching::release_pool(device_, pool_);
  }
}

size_t Graph::node_count() const {
  size_t count = 0;
  if (graph_ != nullptr) check(npuGraphGetNodeCount(graph_, &count), "counting a graph's nodes");
  return count;
}

}  // namespace backplane::npu
