// Standalone probe behind the early-trigger rule in backends/cuda/kernels/dependent_launch.cuh
// (its figures: bench/results/history/2026-11-26.md). No torch, no Backplane: one
// elementwise add, one 16-byte vector a thread, launched 20 times into a CUDA graph, in
// variants of the dependent-launch instructions (griddepcontrol.wait / launch_dependents)
// and of the launch attribute; median µs a call over 15 rounds of 200 graph replays.
//   nvcc -O3 -std=c++17 -arch=sm_90 experiments/dependent_launch_probe.cu -o /tmp/probe
//   /tmp/probe f32:1048576 bf16:1048576 f32:2097152     (dtype:elements, any number)
// It needs a GPU of compute capability 9.0 or above; nothing builds or runs it otherwise.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include <string>

#define CK(x) do { cudaError_t err_ = (x); if (err_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); exit(1);} } while (0)

template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

// MODE 0: no griddepcontrol. 1: wait, then trigger. 2: wait only. 5: wait, then trigger if
// the kernel argument `flag` says so. 6: wait, then trigger if the grid has at most 8
// blocks a multiprocessor, tested in the kernel (%nsmid).
__device__ __forceinline__ bool grid_leaves_room() {
  unsigned int sm_ids;
  asm("mov.u32 %0, %%nsmid;" : "=r"(sm_ids));
  return gridDim.x * gridDim.y * gridDim.z <= sm_ids * 8;
}
__global__ void nsmid_kernel(unsigned* out) {
  unsigned v; asm("mov.u32 %0, %%nsmid;" : "=r"(v)); out[0] = v;
}
template <typename T, int VPT, int THREADS, int MODE>
__global__ void __launch_bounds__(THREADS) add_kernel(const T* __restrict__ a, const T* __restrict__ b, T* c, int nvec, int flag) {
  constexpr int W = 16 / sizeof(T);
  using V = Vec<T, W>;
  if (MODE >= 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (MODE == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (MODE == 5 && flag) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (MODE == 6 && grid_leaves_room()) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int base = blockIdx.x * THREADS * VPT + threadIdx.x;
  V x[VPT], y[VPT];
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    const int i = base + u * THREADS;
    if (i < nvec) { x[u] = reinterpret_cast<const V*>(a)[i]; y[u] = reinterpret_cast<const V*>(b)[i]; }
  }
#pragma unroll
  for (int u = 0; u < VPT; ++u) {
    const int i = base + u * THREADS;
    if (i < nvec) {
      V z;
#pragma unroll
      for (int e = 0; e < W; ++e) z.v[e] = T(float(x[u].v[e]) + float(y[u].v[e]));
      reinterpret_cast<V*>(c)[i] = z;
    }
  }
}


template <typename T, int VPT, int THREADS, int MODE, bool PDL, int FLAG = 0>
void launch(const void* a, const void* b, void* c, int n, cudaStream_t s) {
  const int nvec = n / (16 / sizeof(T));
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3((nvec + THREADS * VPT - 1) / (THREADS * VPT));
  cfg.blockDim = dim3(THREADS);
  cfg.stream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = PDL ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, add_kernel<T, VPT, THREADS, MODE>, (const T*)a, (const T*)b, (T*)c, nvec, FLAG));
}


using LaunchFn = void (*)(const void*, const void*, void*, int, cudaStream_t);
struct Row { std::string name; LaunchFn fn; std::vector<float> us; };

template <typename T>
std::vector<Row> variants(const std::string& t) {
  return {
    {t + " 1v128 plain nopdl", launch<T, 1, 128, 0, false>},
    {t + " 1v128 wait+trig PDL", launch<T, 1, 128, 1, true>},
    {t + " 1v128 waitonly PDL", launch<T, 1, 128, 2, true>},
    {t + " 1v128 flag=0 PDL", launch<T, 1, 128, 5, true, 0>},
    {t + " 1v128 flag=1 PDL", launch<T, 1, 128, 5, true, 1>},
    {t + " 1v128 leaves_room PDL", launch<T, 1, 128, 6, true>},
    {t + " 1v128 flag=0 nopdl", launch<T, 1, 128, 5, false, 0>},
    {t + " 1v128 flag=1 nopdl", launch<T, 1, 128, 5, false, 1>},
  };
}

void run(std::vector<Row> rows, int n, cudaStream_t s, void* a, void* b, void* c) {
  const int calls = 20, replays = 200, rounds = 15;
  std::vector<cudaGraphExec_t> execs;
  for (auto& r : rows) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < calls; ++i) r.fn(a, b, c, n, s);
    CK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e; CK(cudaGraphInstantiate(&e, g, 0));
    execs.push_back(e);
    for (int i = 0; i < 20; ++i) CK(cudaGraphLaunch(e, s));
  }
  CK(cudaStreamSynchronize(s));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int round = 0; round < rounds; ++round)
    for (size_t v = 0; v < rows.size(); ++v) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < replays; ++i) CK(cudaGraphLaunch(execs[v], s));
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      rows[v].us.push_back(ms * 1000.f / (replays * calls));
    }
  printf("n=%d, %d calls a graph, %d replays, median of %d rounds (min, max)\n", n, calls, replays, rounds);
  for (auto& r : rows) {
    std::sort(r.us.begin(), r.us.end());
    printf("  %-26s %7.3f us  (%.3f %.3f)\n", r.name.c_str(), r.us[r.us.size() / 2], r.us.front(), r.us.back());
  }
}

int main(int argc, char** argv) {
  const int maxn = 1 << 23;
  void *a, *b, *c;
  CK(cudaMalloc(&a, maxn * 4)); CK(cudaMalloc(&b, maxn * 4)); CK(cudaMalloc(&c, maxn * 4));
  CK(cudaMemset(a, 0, maxn * 4)); CK(cudaMemset(b, 0, maxn * 4));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned* d; CK(cudaMalloc(&d, 4)); nsmid_kernel<<<1, 1>>>(d); unsigned h = 0;
  CK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  printf("nsmid %u, multiprocessors %d\n", h, sms);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const int n = atoi(arg.c_str() + arg.find(':') + 1);
    if (arg.rfind("f32:", 0) == 0) run(variants<float>("f32"), n, s, a, b, c);
    else run(variants<__nv_bfloat16>("bf16"), n, s, a, b, c);
  }
}
