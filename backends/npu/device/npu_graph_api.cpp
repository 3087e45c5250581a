// What reaches device/npu_graph.h from outside C++: the C functions torch.npu.NPUGraph
// calls (python/backplane_npu/_graphs.py, through ctypes), and on torch 2.12 and later
// the device's implementation behind torch.accelerator.Graph (at::GraphImplInterface).
#include "device/c_api.h"
#include "device/npu_graph.h"

#include <cstdint>
#include <fstream>

#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define BACKPLANE_NPU_HAS_GRAPH_IMPL 1
#else
#define BACKPLANE_NPU_HAS_GRAPH_IMPL 0  // torch 2.11: no torch.accelerator.Graph to serve
#endif

namespace backplane::npu {
namespace {

Graph* as_graph(void* handle) {
  TORCH_CHECK(handle != nullptr, "backplane npu: expected an NPUGraph handle, got null");
  return static_cast<Graph*>(handle);
}

#if BACKPLANE_NPU_HAS_GRAPH_IMPL
// Every capture mode behaves as "global" does on CUDA for the capturing stream: the
// driver refuses host waits and queries of that stream, from any thread; other streams
// are not restricted (there is nothing on them a capture could corrupt).
struct AcceleratorGraph final : at::GraphImplInterface {
  explicit AcceleratorGraph(const at::GraphImplArgs& /*args: keep_graph changes nothing here*/) {}
  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode /*mode*/) override { graph.capture_begin(pool); }
  void capture_end() override { graph.capture_end(); }
  void instantiate() override {}  // a recording is launchable as it stands
  void replay() override { graph.replay(); }
  void reset() override { graph.reset(); }
  c10::MempoolId_t pool() const override { return graph.pool(); }
  void enable_debug_mode() override {}  // debug_dump works without it
  void debug_dump(const std::string& path) override {
    std::ofstream out(path);
    TORCH_CHECK(out, "backplane npu: Graph.debug_dump: cannot open ", path, " for writing");
    out << "npu graph: " << graph.node_count() << " nodes (tasks and event records), replayed as one task\n";
  }
  Graph graph;
};
#endif

}  // namespace
}  // namespace backplane::npu

namespace {
using backplane::npu::as_graph;
using backplane::npu::guarded;
}  // namespace

BACKPLANE_NPU_C_API void* backplane_npu_graph_create() { return new backplane::npu::Graph(); }
BACKPLANE_NPU_C_API void backplane_npu_graph_destroy(void* graph) { delete static_cast<backplane::npu::Graph*>(graph); }

BACKPLANE_NPU_C_API int backplane_npu_graph_capture_begin(void* graph, uint64_t pool_a, uint64_t pool_b, char* message,
                                                          size_t size) {
  return guarded(message, size, [&] { as_graph(graph)->capture_begin({pool_a, pool_b}); });
}

BACKPLANE_NPU_C_API int backplane_npu_graph_capture_end(void* graph, char* message, size_t size) {
  return guarded(message, size, [&] { as_graph(graph)->capture_end(); });
}

BACKPLANE_NPU_C_API int backplane_npu_graph_replay(void* graph, char* message, size_t size) {
  return guarded(message, size, [&] { as_graph(graph)->replay(); });
}

BACKPLANE_NPU_C_API int backplane_npu_graph_reset(void* graph, char* message, size_t size) {
  return guarded(message, size, [&] { as_graph(graph)->reset(); });
}

// out[0], out[1]: the pool id ({0, 0} before the first capture); out[2]: the recording's nodes.
BACKPLANE_NPU_C_API int backplane_npu_graph_info(void* graph, uint64_t* out, char* message, size_t size) {
  return guarded(message, size, [&] {
    const c10::MempoolId_t pool = as_graph(graph)->pool();
    out[0] = pool.first;
    out[1] = pool.second;
    out[2] = as_graph(graph)->node_count();
  });
}

// *capturing: whether the current stream of `device` captures a graph.
BACKPLANE_NPU_C_API int backplane_npu_is_current_stream_capturing(int device, int* capturing, char* message,
                                                                  size_t size) {
  return guarded(message, size, [&] {
    *capturing = backplane::npu::is_capturing(backplane::npu::current_stream(backplane::npu::device_index(device)));
  });
}

// Registers the device's graph behind torch.accelerator.Graph: 1 done (or done before),
// 0 where this torch has no such interface (2.11). Called once the backend's name is
// registered, since the registry's key is that name (c10::DeviceTypeName).
BACKPLANE_NPU_C_API int backplane_npu_register_accelerator_graph() {
#if BACKPLANE_NPU_HAS_GRAPH_IMPL
  const std::string key = c10::DeviceTypeName(backplane::npu::kNpu, /*lower_case=*/false);
  if (!at::GraphImplRegistry()->Has(key))
    at::GraphImplRegistry()->Register(key, [](const at::GraphImplArgs& args) -> std::unique_ptr<at::GraphImplInterface> {
      return std::make_unique<backplane::npu::AcceleratorGraph>(args);
    });
  return 1;
#else
  return 0;
#endif
}
