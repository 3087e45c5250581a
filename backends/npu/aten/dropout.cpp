// native_dropout, which dropout (and so nn.Dropout) calls on the npu under autograd,
// takes no Generator argument: through the CPU fallback its CPU kernel would draw
// from the CPU's generator. Here it is ATen's CPU algorithm over npu ops, so its mask
// comes from bernoulli_ with the device's default generator (aten/fallback.cpp), and
// a seed gives the mask the CPU gives for the same seed.
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ones_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace backplane::npu {
namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) return {input.clone(), at::empty_like(input)};
  if (train.has_value() && !*train) return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  const double keep = 1.0 - p;
  const double scale = keep == 0 ? 0.0 : 1.0 / keep;  // p == 1: zeros, not NaN
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
  mask.bernoulli_(keep);
  return {input.mul(mask).mul_(scale), mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_dropout", &native_dropout); }

}  // namespace backplane::npu
