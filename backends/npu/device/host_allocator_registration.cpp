// The pinned host caching allocator (host_caching_allocator.h), registered as PyTorch's
// host allocator for PrivateUse1: at::getHostAllocator(PrivateUse1), which
// torch.accelerator.empty_host_cache() (and so torch.accelerator.Graph's __enter__) calls
// through. Without a registration torch dereferences no allocator and the process dies.
//
// torch's HostAllocator interface (torch >= 2.8) wants event recording and statistics:
// record_event has nothing to do here (queued work holds the tensors it uses until it has
// run, see host_caching_allocator.h), and the cache keeps only current counts, so the
// statistics calls raise rather than return numbers it does not have.
#include "device/host_caching_allocator.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 8
#include <ATen/core/CachingHostAllocator.h>

namespace backplane::npu {
namespace {

struct RegisteredHostAllocator final : at::HostAllocator {
  c10::DataPtr allocate(size_t bytes) override { return host_caching_allocator()->allocate(bytes); }
  c10::DeleterFnPtr raw_deleter() const override { return host_caching_allocator()->raw_deleter(); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    host_caching_allocator()->copy_data(dest, src, count);
  }
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }
  void empty_cache() override { empty_host_cache(); }
  at::HostStats get_stats() override {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "backplane npu: the pinned host cache keeps current counts only, not torch's "
                                       "HostStats (peaks, totals, timings); read backplane_npu.host_memory_stats()");
  }
  void reset_accumulated_stats() override {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "backplane npu: the pinned host cache keeps no accumulated statistics to reset");
  }
  void reset_peak_stats() override {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "backplane npu: the pinned host cache keeps no peak statistics to reset");
  }
};

RegisteredHostAllocator g_registered_host_allocator;

}  // namespace
}  // namespace backplane::npu

REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &backplane::npu::g_registered_host_allocator)
#endif
