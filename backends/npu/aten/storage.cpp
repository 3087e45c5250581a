// resize_ and set_ on npu tensors. ATen's CPU versions would memcpy device memory
// on the host; here the old bytes move in stream order.
#include "storage.h"

#include "device/launch.h"
#include "ops.h"

#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>
#include <memory>

namespace backplane::npu {

namespace {

// Queued kernels find a tensor's memory through its storage when they run (host_view),
// so work queued before a resize must run first, or it would read the new allocation:
// FSDP2 frees a layer's unsharded parameters (storage resize_(0)) as soon as the layer
// has queued its kernels. A real device's kernels take their addresses at launch and
// need no wait. Waits for every stream of the device; raises a failure of queued work.
void wait_for_queued_work(c10::DeviceIndex index) {
  for (c10::StreamId id = 0; id <= kPoolSize; ++id)
    synchronize(c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, index), id));
}

}  // namespace

void resize_bytes(c10::StorageImpl* storage, size_t bytes) {
  TORCH_CHECK(storage->resizable(), "backplane npu: trying to resize storage that is not resizable");
  const c10::DeviceIndex index = storage->device().index();
  const c10::DeviceGuard guard(c10::Device(kNpu, index));
  wait_for_queued_work(index);
  c10::DataPtr fresh = storage->allocator()->allocate(bytes);
  const size_t keep = std::min(bytes, storage->nbytes());
  // The old memory must outlive the queued copy: the task owns it.
  auto old = std::make_shared<c10::DataPtr>(storage->set_data_ptr(std::move(fresh)));
  storage->set_nbytes(bytes);
  if (keep > 0) {
    void* dst = storage->mutable_data();
    launch(index, "resizing npu storage",
           [old, dst, keep] { std::memcpy(npuDevicePtrToHost(dst), npuDevicePtrToHost(old->get()), keep); });
  }
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  const int64_t needed =
      (impl->storage_offset() + static_cast<int64_t>(impl->numel())) * static_cast<int64_t>(self.itemsize());
  if (impl->numel() > 0 && static_cast<int64_t>(impl->storage().nbytes()) < needed)
    resize_bytes(impl->storage().unsafeGetStorageImpl(), static_cast<size_t>(needed));
  if (format && *format != at::MemoryFormat::Preserve) impl->empty_tensor_restride(*format);
  return self;
}

at::Tensor& set_storage_(at::Tensor& self, at::Storage source, int64_t storage_offset, at::IntArrayRef size,
                         at::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_storage_offset(storage_offset);
  if (stride.data() != nullptr)
    impl->set_sizes_and_strides(size, stride);
  else
    impl->set_sizes_contiguous(size);
  int64_t needed = 0;
  if (impl->numel() > 0) {
    needed = storage_offset + 1;
    for (int64_t d = 0; d < self.dim(); ++d) needed += (impl->size(d) - 1) * impl->stride(d);
    needed *= static_cast<int64_t>(self.itemsize());
  }
  if (static_cast<int64_t>(impl->storage().nbytes()) < needed)
    resize_bytes(impl->storage().unsafeGetStorageImpl(), static_cast<size_t>(needed));
  return self;
}

}  // namespace backplane::npu
