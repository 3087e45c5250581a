// Copies into, out of and between npu devices, in stream order. aten's copy_
// re-dispatches here (_copy_from) whenever one side is npu.
//
// - cpu -> npu: queued on the destination's current stream; the host waits for it
//   unless non_blocking and the source is pinned (then the caller keeps the source
//   alive and unchanged until the stream passes the copy, as with CUDA).
// - npu -> cpu: queued on the source's current stream; the host waits unless
//   non_blocking and the destination is pinned.
// - npu:i -> npu:i: queued on the current stream; never waits.
// - npu:i -> npu:j: the destination's stream first waits for the source's current
//   stream, runs the copy, and the source's stream then waits for the copy, so later
//   writes to the source cannot overtake it.
// dtype conversion, broadcasting and strides are the CPU copy's (host_view).
#include "device/launch.h"
#include "ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/Event.h>

namespace backplane::npu {
namespace {

bool is_pinned(const at::Tensor& t) {
  return t.is_cpu() && at::detail::getPrivateUse1Hooks().isPinnedPtr(t.storage().data());
}

void copy_kernel(const at::Tensor& src, const at::Tensor& dst) { host_view(dst).copy_(host_view(src)); }

void copy_between_devices(const at::Tensor& src, const at::Tensor& dst) {
  const c10::Stream src_stream = current_stream(src.device().index());
  const c10::Stream dst_stream = current_stream(dst.device().index());
  c10::Event src_ready(kNpu), copied(kNpu);
  src_ready.record(src_stream);
  src_ready.block(dst_stream);
  launch_on(dst_stream, "copy npu to npu", [src, dst] { copy_kernel(src, dst); });
  copied.record(dst_stream);
  copied.block(src_stream);
}

}  // namespace

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK((is_npu(src) || src.is_cpu()) && (is_npu(dst) || dst.is_cpu()),
              "backplane npu: copies go between npu and cpu tensors; got ", src.device(), " to ", dst.device());
  if (dst.numel() == 0) return dst;
  if (is_npu(src) && is_npu(dst)) {
    if (src.device() == dst.device())
      launch(dst.device().index(), "copy on npu", [src, dst] { copy_kernel(src, dst); });
    else
      copy_between_devices(src, dst);
    return dst;
  }
  const at::Tensor& device_side = is_npu(dst) ? dst : src;
  const at::Tensor& host_side = is_npu(dst) ? src : dst;
  const c10::Stream stream = current_stream(device_side.device().index());
  launch_on(stream, is_npu(dst) ? "copy cpu to npu" : "copy npu to cpu", [src, dst] { copy_kernel(src, dst); });
  if (!(non_blocking && is_pinned(host_side))) synchronize(stream);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(dst.defined(), "backplane npu: copy destination is undefined");
  if (dst.sizes() != src.sizes()) {
    if (is_npu(dst))
      resize_(dst, src.sizes(), std::nullopt);
    else
      dst.resize_(src.sizes());
  }
  return copy_from(src, dst, /*non_blocking=*/false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "backplane npu: a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  copy_from(self.reshape({}), host, /*non_blocking=*/false);
  return host.item();
}

}  // namespace backplane::npu
