// The npu's random number generators: a default one per device, each with a state of
// its own, apart from the CPU's default generator and from the other devices'.
//
// The state is a CPU generator (mt19937) that the npu generator owns, because random
// ops run on the host through the CPU fallback: the fallback hands that inner generator
// to the CPU kernel (aten/fallback.cpp). So an npu generator seeded with s draws what
// the CPU generator seeded with s draws. A device with its own RNG replaces this file
// with a generator whose state its kernels read (CUDA's: a Philox seed and offset).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <optional>
#include <string>

namespace backplane::npu {

struct NpuGeneratorImpl final : c10::GeneratorImpl {
  explicit NpuGeneratorImpl(c10::DeviceIndex index, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  // An mt19937 state has no offset: 0 is read, and only 0 is accepted (what pickling
  // and copy.deepcopy of a torch.Generator write back); any other is refused, naming it.
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;  // a CPU generator's state
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The CPU generator holding the state: what a CPU kernel is given to draw for this
  // generator. Kernels lock its mutex, so the methods above lock it too.
  const at::Generator& host() const { return host_; }

 private:
  NpuGeneratorImpl* clone_impl() const override;
  std::mutex& host_mutex() const { return host_.unsafeGetGeneratorImpl()->mutex_; }

  at::Generator host_;
};

// index < 0: the current device. Refused for an index out of range.
const at::Generator& default_generator(c10::DeviceIndex index);
at::Generator new_generator(c10::DeviceIndex index);

// The CPU generator a CPU kernel runs with for an op on an npu `device`, given the
// op's Generator? argument: an npu generator's own, or for none the default generator
// of `device`. Any other generator (a CPU one) is refused with a message naming `op`.
at::Generator host_generator(const std::optional<at::Generator>& generator, c10::Device device,
                             const std::string& op);

}  // namespace backplane::npu
