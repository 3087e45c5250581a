// The npu generators (generator.h) and the C functions torch.npu's RNG calls
// (python/backplane_npu/_random.py).
#include "device/generator.h"

#include "device/c_api.h"
#include "device/npu_stream.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace backplane::npu {

NpuGeneratorImpl::NpuGeneratorImpl(c10::DeviceIndex index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kNpu, index), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::detail::createCPUGenerator(seed)) {}

void NpuGeneratorImpl::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(host_mutex());
  host_.set_current_seed(seed);
}

uint64_t NpuGeneratorImpl::current_seed() const {
  std::lock_guard<std::mutex> lock(host_mutex());
  return host_.current_seed();
}

uint64_t NpuGeneratorImpl::seed() {
  std::lock_guard<std::mutex> lock(host_mutex());
  return host_.unsafeGetGeneratorImpl()->seed();
}

void NpuGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset == 0, "backplane npu: an npu generator does not support set_offset other than 0 (its state "
              "is an mt19937 state, as the CPU generator's, which has no offset); expected 0, got ", offset);
}

uint64_t NpuGeneratorImpl::get_offset() const { return 0; }

void NpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  std::lock_guard<std::mutex> lock(host_mutex());
  host_.unsafeGetGeneratorImpl()->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> NpuGeneratorImpl::get_state() const {
  std::lock_guard<std::mutex> lock(host_mutex());
  return host_.unsafeGetGeneratorImpl()->get_state();
}

NpuGeneratorImpl* NpuGeneratorImpl::clone_impl() const {
  auto* copy = new NpuGeneratorImpl(device_.index());
  std::lock_guard<std::mutex> lock(host_mutex());
  copy->host_ = host_.clone();
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  // Never destroyed: kernels may still draw from them while the process exits.
  static auto* generators = new std::vector<at::Generator>(device_count());
  static std::mutex mutex;
  const c10::DeviceIndex i = index < 0 ? current_device() : index;
  check_index(i);
  std::lock_guard<std::mutex> lock(mutex);
  at::Generator& generator = (*generators)[i];
  if (!generator.defined()) generator = at::make_generator<NpuGeneratorImpl>(i);
  return generator;
}

at::Generator new_generator(c10::DeviceIndex index) {
  const c10::DeviceIndex i = index < 0 ? current_device() : index;
  check_index(i);
  return at::make_generator<NpuGeneratorImpl>(i);
}

at::Generator host_generator(const std::optional<at::Generator>& generator, c10::Device device,
                             const std::string& op) {
  if (!generator.has_value() || !generator->defined())
    return default_generator(index_of(device)).get<NpuGeneratorImpl>()->host();
  auto* npu = dynamic_cast<NpuGeneratorImpl*>(generator->unsafeGetGeneratorImpl());
  TORCH_CHECK(npu != nullptr, "backplane npu: ", op, " on ", device, " got a generator on ", generator->device(),
              "; expected an npu generator (torch.Generator(device=\"npu\")) or none (the device's default)");
  return npu->host();
}

}  // namespace backplane::npu

// --- C functions for torch.npu (ctypes) ---------------------------------------------
// As in c_api.cpp: 0 on success, else 1 with a message in `message` (size bytes); no
// exception leaves a C function (c_api.h). A device of -1 is the current device.
namespace {
using backplane::npu::guarded;

// The default generator of `device` (checked: c_api.h).
at::Generator default_of(int device) { return backplane::npu::default_generator(backplane::npu::device_index(device)); }

// fn(the default generator of `device`) with the generator's lock held, guarded.
template <typename Fn>
int with_default_locked(int device, char* message, size_t size, Fn&& fn) {
  return guarded(message, size, [&] {
    at::Generator generator = default_of(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    fn(generator);
  });
}

size_t state_bytes() {
  static const size_t bytes = at::detail::createCPUGenerator().get_state().numel();
  return bytes;
}

}  // namespace

BACKPLANE_NPU_C_API int backplane_npu_manual_seed(int device, uint64_t seed, char* message, size_t size) {
  return with_default_locked(device, message, size, [&](at::Generator& g) { g.set_current_seed(seed); });
}

// Seeds the generator from a non-deterministic source; *seed receives the seed.
BACKPLANE_NPU_C_API int backplane_npu_seed(int device, uint64_t* seed, char* message, size_t size) {
  return with_default_locked(device, message, size, [&](at::Generator& g) { *seed = g.seed(); });
}

BACKPLANE_NPU_C_API int backplane_npu_initial_seed(int device, uint64_t* seed, char* message, size_t size) {
  return guarded(message, size, [&] { *seed = default_of(device).current_seed(); });
}

// The bytes of a state (the same for every device): what backplane_npu_get_rng_state writes.
BACKPLANE_NPU_C_API size_t backplane_npu_rng_state_size() {
  size_t bytes = 0;
  char ignored[1];
  guarded(ignored, sizeof ignored, [&] { bytes = state_bytes(); });
  return bytes;
}

// Writes the state (backplane_npu_rng_state_size() bytes) to `out`, which holds `capacity`.
BACKPLANE_NPU_C_API int backplane_npu_get_rng_state(int device, uint8_t* out, size_t capacity, char* message,
                                                    size_t size) {
  return guarded(message, size, [&] {
    at::Generator generator = default_of(device);
    at::Tensor state;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      state = generator.get_state();
    }
    TORCH_CHECK(static_cast<size_t>(state.numel()) <= capacity, "backplane npu: an RNG state has ", state.numel(),
                " bytes; the buffer holds ", capacity);
    std::memcpy(out, state.data_ptr(), state.numel());
  });
}

// Sets the state from `bytes` bytes at `data`; the CPU generator's own check refuses a
// state of the wrong size, with its message.
BACKPLANE_NPU_C_API int backplane_npu_set_rng_state(int device, const uint8_t* data, size_t bytes, char* message,
                                                    size_t size) {
  return with_default_locked(device, message, size, [&](at::Generator& g) {
    g.set_state(at::from_blob(const_cast<uint8_t*>(data), {static_cast<int64_t>(bytes)},
                              at::TensorOptions().dtype(at::kByte)));
  });
}

// The default generator's offset: 0 is read, and only 0 is accepted (NpuGeneratorImpl).
BACKPLANE_NPU_C_API int backplane_npu_set_offset(int device, uint64_t offset, char* message, size_t size) {
  return with_default_locked(device, message, size, [&](at::Generator& g) { g.set_offset(offset); });
}

BACKPLANE_NPU_C_API int backplane_npu_get_offset(int device, uint64_t* offset, char* message, size_t size) {
  return guarded(message, size, [&] { *offset = default_of(device).get_offset(); });
}
