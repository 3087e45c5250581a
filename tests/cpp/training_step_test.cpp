// A training step through libtorch alone, no Python: a small block (rms_norm -> fused
// gate/up projection -> silu_mul on its two halves -> down projection -> residual add ->
// rotary) built from Backplane ops called through the dispatcher, beside a twin written
// in aten ops with the same weights. The gradients come from the core's Autograd kernel
// (the registry's `backward:` formulas); every parameter's gradient must match the
// twin's, and an AdamW step must lower the loss. Runs on each backend of
// BACKPLANE_TEST_BACKENDS (default cpu) whose device is here and that implements the
// ops (npu too: its matrix products run on its own kernels). CTest runs each backend in a process of its own (tests/CMakeLists.txt: a
// registered PrivateUse1 device breaks CUDA backward in the same process).
#include <backplane/conformance.h>
#include <backplane/loader.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>

#include "test_backends.h"

namespace backplane {
namespace {

constexpr int64_t kBatch = 4, kSeq = 6, kDim = 16, kHidden = 24;
constexpr double kEps = 1e-6;

template <typename Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

struct Ops {
  virtual ~Ops() = default;
  virtual at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const = 0;
  virtual at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) const = 0;
  virtual at::Tensor add(const at::Tensor& a, const at::Tensor& b) const = 0;
  virtual at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const = 0;
};

struct BackplaneOps : Ops {
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const override {
    return op<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("backplane::rms_norm").call(x, w, kEps);
  }
  at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) const override {
    return op<at::Tensor(const at::Tensor&, const at::Tensor&)>("backplane::silu_mul").call(gate, up);
  }
  at::Tensor add(const at::Tensor& a, const at::Tensor& b) const override {
    return op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Scalar&)>("backplane::add").call(a, b, 1);
  }
  at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override {
    return op<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>("backplane::rotary")
        .call(x, cos, sin);
  }
};

struct AtenOps : Ops {
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& w) const override {
    return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + kEps) * w;
  }
  at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) const override { return at::silu(gate) * up; }
  at::Tensor add(const at::Tensor& a, const at::Tensor& b) const override { return a + b; }
  at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) const override {
    const auto halves = x.chunk(2, -1);
    return at::cat({halves[0] * cos - halves[1] * sin, halves[1] * cos + halves[0] * sin}, -1);
  }
};

// Made on `device` (drawn on the CPU, then moved): Module::to would set_data across
// TensorImpl types, which libtorch refuses for PrivateUse1 tensors (Python's Module.to
// replaces such parameters instead).
struct Block : torch::nn::Module {
  Block(const Ops& ops, c10::Device device) : ops(ops) {
    torch::manual_seed(0);
    norm = register_parameter("norm", (torch::ones({kDim}) + 0.1 * torch::randn({kDim})).to(device));
    gate_up = register_parameter("gate_up", (torch::randn({2 * kHidden, kDim}) / std::sqrt(double(kDim))).to(device));
    down = register_parameter("down", (torch::randn({kDim, kHidden}) / std::sqrt(double(kHidden))).to(device));
    const at::Tensor angles = torch::outer(torch::arange(kSeq, torch::kFloat), torch::rand({kDim / 2}));
    cos = register_buffer("cos", angles.cos().to(device));
    sin = register_buffer("sin", angles.sin().to(device));
  }

  at::Tensor forward(const at::Tensor& x) {
    // gate and up: strided views of one projection, as SwiGLU lays them out.
    const at::Tensor projected = at::linear(ops.rms_norm(x, norm), gate_up);
    const at::Tensor mlp = at::linear(ops.silu_mul(projected.narrow(-1, 0, kHidden), projected.narrow(-1, kHidden, kHidden)), down);
    return ops.rotary(ops.add(x, mlp), cos, sin);
  }

  const Ops& ops;
  at::Tensor norm, gate_up, down, cos, sin;
};

using testing_support::test_backends;

class TrainingStep : public testing::TestWithParam<std::string> {};

TEST_P(TrainingStep, GradientsMatchAtenAndAdamWLowersTheLoss) {
  const std::string backend = GetParam();
  LoadOptions options;
  options.dir = BACKPLANE_PLUGIN_DIR;
  const BackendRecord record = load(backend, options);
  std::string why;
  const auto device = conformance::device_for_key(record.dispatch_key, &why);
  if (!device) GTEST_SKIP() << "backend '" << backend << "': " << why;
  for (const char* name : {"rms_norm", "silu_mul", "add", "rotary"})
    if (std::find(record.ops.begin(), record.ops.end(), name) == record.ops.end())
      GTEST_SKIP() << name << ": not implemented on " << backend;

  BackplaneOps backplane_ops;
  AtenOps aten_ops;
  Block ours(backplane_ops, *device), twin(aten_ops, *device);
  torch::optim::AdamW optimizer(ours.parameters(), torch::optim::AdamWOptions(1e-2));

  torch::manual_seed(1);
  const at::Tensor x = torch::randn({kBatch, kSeq, kDim}).to(*device);
  const at::Tensor target = torch::randn({kBatch, kSeq, kDim}).to(*device);
  const at::Tensor loss = torch::mse_loss(ours.forward(x), target);
  torch::mse_loss(twin.forward(x), target).backward();
  optimizer.zero_grad();
  loss.backward();

  const auto named = ours.named_parameters();
  const auto twin_params = twin.named_parameters();
  for (const auto& p : named) {
    const at::Tensor& grad = p.value().grad();
    ASSERT_TRUE(grad.defined()) << p.key() << " got no gradient through the Backplane ops";
    const at::Tensor& expected = twin_params[p.key()].grad();
    EXPECT_TRUE(at::allclose(grad, expected, 1e-4, 1e-5))
        << p.key() << ": largest difference " << (grad - expected).abs().max().item<double>();
  }
  optimizer.step();
  const double after = torch::mse_loss(ours.forward(x), target).item<double>();
  EXPECT_LT(after, loss.item<double>()) << "an AdamW step did not lower the loss";
}

INSTANTIATE_TEST_SUITE_P(Backends, TrainingStep, testing::ValuesIn(test_backends()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace backplane
