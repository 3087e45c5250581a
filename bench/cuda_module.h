// The engine's one way into CUDA: lib/backplane_bench_cuda_graph.so, a module built beside
// it with the CUDA plugin (CMakeLists.txt), loaded only when a run needs it. The engine
// itself links no device runtime. The module serves three things, each through one C entry
// point found with dlsym:
//   recording and replaying CUDA graphs (--cuda-graph; recorded_batch.h, cuda_graph_batch.cpp)
//   the device's L2 cache size (--cold-l2; cold_cache.h)
//   the device's peak FMA rate (%peak; peak_flops.h, cuda_peak_flops.cu)
#pragma once

#include <string>

namespace backplane::bench {

// The module's file: <prefix>/lib/backplane_bench_cuda_graph.so beside <prefix>/bin/backplane_bench.
std::string cuda_module_path();

// The entry point `name` of the module, which is loaded once and kept for the life of the
// process (recorded graphs point into it). Throws std::runtime_error naming the file and
// why it cannot be loaded (a build without the CUDA plugin has none), or the symbol.
void* cuda_module_symbol(const char* name);

// Messages from the module's entry points are written into a buffer of this size.
inline constexpr std::size_t kCudaModuleErrorSize = 2048;

}  // namespace backplane::bench
