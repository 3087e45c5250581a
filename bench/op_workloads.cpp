#include "op_workloads.h"

#include "workload_timing.h"

#include <backplane/registry.h>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <array>
#include <iostream>
#include <set>

// Inputs are not rotated between calls: a 1M-float32 tensor (4 MiB) stays in L2/L3
// from one call to the next on a CPU, and so would 16M on a host with a large L3.
// PyTorch's row runs under the same conditions, so the comparison stays fair; the
// rows at and above 64M elements (devices only) are the out-of-cache figures.

namespace backplane::bench {
namespace {

struct Row {
  std::string impl;  // "backplane", "torch", "torch_composite"
  WorkloadFactory make;
};

template <class Signature>
c10::TypedOperatorHandle<Signature> backplane_op(const std::string& name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(("backplane::" + name).c_str(), "").typed<Signature>();
}

// Random values, never zeros: a kernel cannot be fast by accident on special data.
at::Tensor random(at::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  return at::randn(sizes, at::TensorOptions().dtype(dtype).device(device));
}

int64_t bytes_of(c10::ScalarType dtype) { return static_cast<int64_t>(c10::elementSize(dtype)); }

const char* dtype_name(c10::ScalarType dtype) { return dtype == at::kBFloat16 ? "bfloat16" : "float32"; }

constexpr auto kF32 = at::kFloat;

template <class T>
void keep(T&& value) {
  benchmark::DoNotOptimize(value);
}

std::vector<Row> identity_conv_rows(int64_t n) {
  const int64_t bytes = 2 * n * bytes_of(kF32);
  return {
      {"backplane",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d);
         auto op = backplane_op<at::Tensor(const at::Tensor&)>("identity_conv");
         return Workload{[op, x] { keep(op.call(x)); }, bytes, n, "float32 backplane::identity_conv(x)"};
       }},
      {"torch",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d);
         return Workload{[x] { keep(x.clone()); }, bytes, n, "float32 x.clone()"};
       }},
  };
}

// out.copy_(x): the device's copy bandwidth, the reference every other row is read against.
Row copy_row(at::IntArrayRef sizes_in, c10::ScalarType dtype) {
  std::vector<int64_t> sizes = sizes_in.vec();
  const int64_t n = c10::multiply_integers(sizes);
  return {"torch", [=](c10::Device d) {
            at::Tensor x = random(sizes, dtype, d), out = at::empty_like(x);
            return Workload{[x, out]() mutable { out.copy_(x); }, 2 * n * bytes_of(dtype), n,
                            std::string(dtype_name(dtype)) + " out.copy_(x)"};
          }};
}

std::vector<Row> add_rows(int64_t n) {
  const int64_t bytes = 3 * n * bytes_of(kF32);
  using Sig = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&);
  return {
      {"backplane",
       [=](c10::Device d) {
         at::Tensor a = random({n}, kF32, d), b = random({n}, kF32, d);
         auto op = backplane_op<Sig>("add");
         return Workload{[op, a, b] { keep(op.call(a, b, 1)); }, bytes, n, "float32 backplane::add(a, b)"};
       }},
      {"torch",
       [=](c10::Device d) {
         at::Tensor a = random({n}, kF32, d), b = random({n}, kF32, d);
         return Workload{[a, b] { keep(at::add(a, b)); }, bytes, n, "float32 at::add(a, b)"};
       }},
  };
}

// In place, so the factor alternates 2 and 0.5: exact in binary, the values neither
// drift nor reach inf or denormals however many calls a row makes.
std::vector<Row> scale_rows(int64_t n) {
  const int64_t bytes = 2 * n * bytes_of(kF32);
  return {
      {"backplane",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d);
         auto op = backplane_op<void(at::Tensor&, double)>("scale_");
         return Workload{[op, x, up = false]() mutable {
                           up = !up;
                           op.call(x, up ? 2.0 : 0.5);
                         },
                         bytes, n, "float32 backplane::scale_(x, s)"};
       }},
      {"torch",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d);
         return Workload{[x, up = false]() mutable {
                           up = !up;
                           x.mul_(up ? 2.0 : 0.5);
                         },
                         bytes, n, "float32 x.mul_(s)"};
       }},
  };
}

std::vector<Row> sin_out_rows(int64_t n) {
  const int64_t bytes = 2 * n * bytes_of(kF32);
  return {
      {"backplane",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d), out = at::empty_like(x);
         auto op = backplane_op<void(const at::Tensor&, at::Tensor&)>("sin_out");
         return Workload{[op, x, out]() mutable { op.call(x, out); }, bytes, n,
                         "float32 backplane::sin_out(x, out=out)"};
       }},
      {"torch",
       [=](c10::Device d) {
         at::Tensor x = random({n}, kF32, d), out = at::empty_like(x);
         return Workload{[x, out]() mutable { at::sin_out(out, x); }, bytes, n, "float32 at::sin_out(out, x)"};
       }},
  };
}

// crop's size is its output: n elements as [n/1024, 1024] rows, cut at column 128 from
// an image with 256 more columns and n/8 more rows above and below. Traffic is the
// window read once and the output written once.
struct CropGeometry {
  std::vector<int64_t> img_sizes;
  std::vector<int64_t> box;  // top, left, height, width
};

CropGeometry crop_geometry(int64_t n) {
  const int64_t rows = std::max<int64_t>(1, n / 1024), pad = std::max<int64_t>(1, rows / 8);
  return {{rows + 2 * pad, 1024 + 256}, {pad, 128, rows, n / rows}};
}

std::vector<Row> crop_rows(int64_t n) {
  const int64_t bytes = 2 * n * bytes_of(kF32);
  const CropGeometry g = crop_geometry(n);
  return {
      {"backplane",
       [=](c10::Device d) {
         at::Tensor img = random(g.img_sizes, kF32, d);
         auto op = backplane_op<at::Tensor(const at::Tensor&, at::IntArrayRef)>("crop");
         return Workload{[op, img, box = g.box] { keep(op.call(img, box)); }, bytes, n,
                         "float32 backplane::crop(img, box)"};
       }},
      {"torch",
       [=](c10::Device d) {
         at::Tensor img = random(g.img_sizes, kF32, d);
         const auto& b = g.box;
         return Workload{[img, b] { keep(img.slice(-2, b[0], b[0] + b[2]).slice(-1, b[1], b[1] + b[3]).contiguous()); },
                         bytes, n, "float32 img.slice(-2, ..).slice(-1, ..).contiguous()"};
       }},
  };
}

// Traffic: x read once, weight read once, y written once.
std::vector<Row> rms_norm_rows(int64_t tokens, int64_t hidden, c10::ScalarType dtype) {
  const int64_t n = tokens * hidden;
  const int64_t bytes = (2 * n + hidden) * bytes_of(dtype);
  const double eps = 1e-6;
  const std::string t = dtype_name(dtype);
  auto inputs = [=](c10::Device d) {
    return std::array<at::Tensor, 2>{random({tokens, hidden}, dtype, d), random({hidden}, dtype, d)};
  };
  return {
      {"backplane",
       [=](c10::Device d) {
         const auto xw = inputs(d);
         const at::Tensor x = xw[0], w = xw[1];
         auto op = backplane_op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("rms_norm");
         return Workload{[op, x, w, eps] { keep(op.call(x, w, eps)); }, bytes, n,
                         t + " backplane::rms_norm(x, w, eps)"};
       }},
      {"torch",
       [=](c10::Device d) {
         const auto xw = inputs(d);
         const at::Tensor x = xw[0], w = xw[1];
         return Workload{[x, w, hidden, eps] { keep(at::rms_norm(x, {hidden}, w, eps)); }, bytes, n,
                         t + " at::rms_norm(x, {H}, w, eps)"};
       }},
      {"torch_composite",
       [=](c10::Device d) {
         const auto xw = inputs(d);
         const at::Tensor x = xw[0], w = xw[1];
         return Workload{[x, w, eps] { keep(x * at::rsqrt(x.pow(2).mean(-1, true) + eps) * w); }, bytes, n,
                         t + " x * rsqrt(x.pow(2).mean(-1, true) + eps) * w"};
       }},
  };
}

std::vector<int64_t> elementwise_sizes(c10::Device device) {
  std::vector<int64_t> sizes = {1 << 10, 1 << 16, 1 << 20, 1 << 24};
  // Out of every cache: 256 MiB and 1 GiB of float32 per tensor.
  if (!device.is_cpu()) sizes.insert(sizes.end(), {int64_t{1} << 26, int64_t{1} << 28});
  return sizes;
}

std::vector<std::pair<int64_t, int64_t>> rms_norm_shapes(c10::Device device) {
  const std::vector<int64_t> tokens = device.is_cpu() ? std::vector<int64_t>{256} : std::vector<int64_t>{4096, 16384};
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int64_t t : tokens)
    for (int64_t h : {4096, 8192}) shapes.emplace_back(t, h);
  return shapes;
}

}  // namespace

void register_op_benchmarks(const SelectedBackend& backend) {
  auto register_rows = [&](const std::string& op, const std::string& size, std::vector<Row> rows) {
    for (auto& row : rows) {
      if (row.impl == "backplane" && !backend.ops.count(op)) continue;
      register_workload(op + "/" + backend.name + "/" + row.impl + "/" + size, backend.device, std::move(row.make));
    }
  };
  static const std::set<std::string> benchmarked = {"identity_conv", "add", "scale_", "sin_out", "crop", "rms_norm"};
  for (const auto& op : registry().ops()) {
    if (!benchmarked.count(op.name))
      std::cerr << "backplane_bench: registry op " << op.name
                << " has no benchmark; add it to bench/op_workloads.cpp\n";
    else if (!backend.ops.count(op.name))
      std::cerr << "backplane_bench: backend '" << backend.name << "' has no kernel for " << op.name
                << "; only its PyTorch rows run\n";
  }

  for (int64_t n : elementwise_sizes(backend.device)) {
    const std::string size = std::to_string(n);
    register_rows("copy_", size, {copy_row({n}, kF32)});
    register_rows("identity_conv", size, identity_conv_rows(n));
    register_rows("add", size, add_rows(n));
    register_rows("scale_", size, scale_rows(n));
    register_rows("sin_out", size, sin_out_rows(n));
    register_rows("crop", size, crop_rows(n));
  }
  for (auto dtype : {at::kFloat, at::kBFloat16})
    for (auto [tokens, hidden] : rms_norm_shapes(backend.device)) {
      const std::string size = std::to_string(tokens) + "x" + std::to_string(hidden) + "_" + dtype_name(dtype);
      register_rows("copy_", size, {copy_row({tokens, hidden}, dtype)});
      register_rows("rms_norm", size, rms_norm_rows(tokens, hidden, dtype));
    }
}

}  // namespace backplane::bench
