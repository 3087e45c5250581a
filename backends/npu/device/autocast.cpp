// torch.autocast on the device: PyTorch's CUDA casting policy for aten ops, on
// AutocastPrivateUse1. PyTorch registers its autocast lists for CPU, CUDA, XPU and MPS
// only; for PrivateUse1 it registers neither the lists nor the fallthrough every other
// op needs, so without this file any op under torch.autocast("npu") fails ("Could not
// run 'aten::...' ... from the 'Autocastnpu' backend"). The lists are ATen's own
// (AT_FORALL_* in ATen/autocast_mode.h, which XPU's registration uses too), so they
// follow the torch this plugin is built against, with one change PyTorch's reference
// device (OpenReg) makes: dot runs in float32 (CUDA's lists promote it, so two float16
// vectors give a float16 sum of products). Backplane's ops get their Autocast kernels
// from the core, by each op's `autocast:` rule.
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string_view>

namespace backplane::npu {
namespace {

// As on CUDA: binary_cross_entropy after a sigmoid is unsafe in lower precision.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

// Ops outside the lists run as called. Registered only where torch has none of its own
// (a duplicate backend fallback is an error at load), in case a later torch adds it.
const std::unique_ptr<torch::Library> fallthrough = [] {
  constexpr auto key = c10::DispatchKey::AutocastPrivateUse1;
  if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(key)) return std::unique_ptr<torch::Library>();
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "_", key, __FILE__, __LINE__);
  library->fallback(torch::CppFunction::makeFallthrough());
  return library;
}();

}  // namespace

namespace autocast_lists {

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures as ATen's own code does,
// inside namespace at (Tensor, Scalar, DimnameList in torch 2.11, ...).
using namespace at;  // NOLINT(google-build-using-namespace)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define BACKPLANE_AUTOCAST_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define BACKPLANE_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define BACKPLANE_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
// Every promote op but dot, which is registered as fp32 below (a second registration of
// one op would override the first with only a warning).
#define BACKPLANE_AUTOCAST_PROMOTE(op)                 \
  if (std::string_view(#op) != "dot") {                \
    KERNEL_PRIVATEUSEONE(op, promote)                  \
  }
  AT_FORALL_LOWER_PRECISION_FP(BACKPLANE_AUTOCAST_LOWER)
  AT_FORALL_FP32(BACKPLANE_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(BACKPLANE_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(BACKPLANE_AUTOCAST_PROMOTE)
#undef BACKPLANE_AUTOCAST_LOWER
#undef BACKPLANE_AUTOCAST_FP32
#undef BACKPLANE_AUTOCAST_FP32_SET_OPT_DTYPE
#undef BACKPLANE_AUTOCAST_PROMOTE
  KERNEL_PRIVATEUSEONE(dot, fp32)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace autocast_lists
}  // namespace backplane::npu
