// New npu tensors: the device allocator on the requested device.
#include "device/allocator.h"
#include "device/npu_stream.h"
#include "ops.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

namespace backplane::npu {
namespace {

c10::Device target(std::optional<at::Device> device, std::optional<at::Layout> layout, std::optional<bool> pin) {
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "backplane npu: only strided tensors; got layout ",
              *layout);
  TORCH_CHECK(!pin.value_or(false), "backplane npu: pin_memory applies to CPU tensors, not npu ones");
  return c10::Device(kNpu, index_of(device.value_or(c10::Device(kNpu))));
}

}  // namespace

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                 std::optional<at::Device> device, std::optional<bool> pin_memory,
                 std::optional<at::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(target(device, layout, pin_memory));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout, std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  const c10::DeviceGuard guard(target(device, layout, pin_memory));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

}  // namespace backplane::npu
