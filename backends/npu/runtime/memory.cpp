// Emulated device memory and pinned host memory.
//
// Device memory is host memory handed out at an address shifted by kDeviceTag: the
// shifted address is not canonical on x86-64 and AArch64, so host code that reads
// a device pointer directly (a CPU kernel handed an npu tensor by mistake) faults
// instead of silently working. Kernels translate with npuDevicePtrToHost.
//
// Each device has a capacity (BACKPLANE_NPU_MEMORY_MB, default 16384 MiB): npuMalloc
// refuses what would take a device past it, as a real device refuses what it lacks, so
// out-of-memory paths can be tested with small sizes. The capacity limits accounting
// only; host memory is taken per allocation.
#include "internal.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace npu_runtime {
namespace {

constexpr uintptr_t kDeviceTag = uintptr_t{1} << 56;
constexpr size_t kAlignment = 64;
constexpr int64_t kDefaultCapacityMiB = 16384;
constexpr int64_t kMaxCapacityMiB = int64_t{1} << 30;  // 1 PiB: far past any host, short of overflow

struct Capacity {
  int64_t bytes = 0;  // per device; 0 when the setting is malformed
  std::string error;  // the malformed setting, or empty
};

const Capacity& capacity() {
  static const Capacity* instance = [] {
    auto* c = new Capacity();  // never destroyed, as memory() below
    const char* text = std::getenv("BACKPLANE_NPU_MEMORY_MB");
    if (text == nullptr || *text == '\0') {
      c->bytes = kDefaultCapacityMiB << 20;
      return c;
    }
    char* end = nullptr;
    errno = 0;
    const long long mib = std::strtoll(text, &end, 10);
    if (errno == 0 && *end == '\0' && mib >= 1 && mib <= kMaxCapacityMiB)
      c->bytes = static_cast<int64_t>(mib) << 20;
    else
      c->error = std::string("BACKPLANE_NPU_MEMORY_MB='") + text + "': expected an integer from 1 to " +
                 std::to_string(kMaxCapacityMiB) + " (MiB of memory per device)";
    return c;
  }();
  return *instance;
}

struct Block {
  size_t bytes;
  int device;  // -1: pinned host memory
};

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Block> blocks;  // by the address handed out
  std::vector<npuMemStats> stats = std::vector<npuMemStats>(std::max(0, device_count()), npuMemStats{0, 0, 0});
};

Memory& memory() {
  static Memory* instance = new Memory();  // never destroyed: tensors may outlive statics
  return *instance;
}

void* host_alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded);
}

// The block holding address p (interior pointers too), or nullptr.
const std::pair<const uintptr_t, Block>* find_block(Memory& m, uintptr_t p) {
  auto it = m.blocks.upper_bound(p);
  if (it == m.blocks.begin()) return nullptr;
  --it;
  return p < it->first + std::max<size_t>(it->second.bytes, 1) ? &*it : nullptr;
}

// Forgets the block handed out at p if it is of the wanted kind (device or pinned
// host memory), updating the statistics. False if p is no such block.
bool forget_block(uintptr_t p, bool device) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.blocks.find(p);
  if (it == m.blocks.end() || (it->second.device >= 0) != device) return false;
  if (device) {
    npuMemStats& s = m.stats[it->second.device];
    s.allocated_bytes -= static_cast<int64_t>(it->second.bytes);
    s.allocations -= 1;
  }
  m.blocks.erase(it);
  return true;
}

}  // namespace

const char* memory_config_error() { return capacity().error.empty() ? nullptr : capacity().error.c_str(); }

}  // namespace npu_runtime

using namespace npu_runtime;

npuError_t npuMalloc(void** ptr, size_t bytes, int device) {
  if (ptr == nullptr) return npuErrorInvalidValue;
  if (!valid_device(device)) return npuErrorInvalidDevice;
  *ptr = nullptr;
  if (bytes == 0) return npuSuccess;
  Memory& m = memory();
  {
    // Checked again below: this early refusal keeps a request past the capacity from
    // taking host memory at all (a 1 PiB request must fail, not swap).
    std::lock_guard<std::mutex> lock(m.mutex);
    if (bytes > static_cast<uint64_t>(capacity().bytes - m.stats[device].allocated_bytes)) return npuErrorMemoryAllocation;
  }
  void* host = host_alloc(bytes);
  if (host == nullptr) return npuErrorMemoryAllocation;
  std::memset(host, 0xFF, bytes);  // unwritten memory reads as NaN, never as a plausible 0
  const uintptr_t address = reinterpret_cast<uintptr_t>(host) + kDeviceTag;
  std::lock_guard<std::mutex> lock(m.mutex);
  npuMemStats& s = m.stats[device];
  if (bytes > static_cast<uint64_t>(capacity().bytes - s.allocated_bytes)) {  // another thread took it meanwhile
    std::free(host);
    return npuErrorMemoryAllocation;
  }
  m.blocks[address] = Block{bytes, device};
  s.allocated_bytes += static_cast<int64_t>(bytes);
  s.peak_bytes = std::max(s.peak_bytes, s.allocated_bytes);
  s.allocations += 1;
  *ptr = reinterpret_cast<void*>(address);
  return npuSuccess;
}

npuError_t npuFree(void* ptr) {
  if (ptr == nullptr) return npuSuccess;
  if (!forget_block(reinterpret_cast<uintptr_t>(ptr), /*device=*/true)) return npuErrorInvalidValue;
  std::free(npuDevicePtrToHost(ptr));
  return npuSuccess;
}

npuError_t npuMallocHost(void** ptr, size_t bytes) {
  if (ptr == nullptr) return npuErrorInvalidValue;
  *ptr = nullptr;
  if (bytes == 0) return npuSuccess;
  void* host = host_alloc(bytes);
  if (host == nullptr) return npuErrorMemoryAllocation;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.blocks[reinterpret_cast<uintptr_t>(host)] = Block{bytes, -1};
  *ptr = host;
  return npuSuccess;
}

npuError_t npuFreeHost(void* ptr) {
  if (ptr == nullptr) return npuSuccess;
  if (!forget_block(reinterpret_cast<uintptr_t>(ptr), /*device=*/false)) return npuErrorInvalidValue;
  std::free(ptr);
  return npuSuccess;
}

npuError_t npuPointerGetAttributes(npuPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return npuErrorInvalidValue;
  *attributes = npuPointerAttributes{npuMemoryTypeUnregistered, -1};
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto* block = find_block(m, reinterpret_cast<uintptr_t>(ptr));
  if (block != nullptr)
    *attributes = block->second.device < 0 ? npuPointerAttributes{npuMemoryTypeHost, -1}
                                            : npuPointerAttributes{npuMemoryTypeDevice, block->second.device};
  return npuSuccess;
}

npuError_t npuMemGetStats(int device, npuMemStats* stats) {
  if (stats == nullptr) return npuErrorInvalidValue;
  if (!valid_device(device)) return npuErrorInvalidDevice;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *stats = m.stats[device];
  return npuSuccess;
}

npuError_t npuMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr) return npuErrorInvalidValue;
  if (!valid_device(device)) return npuErrorInvalidDevice;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  *total_bytes = static_cast<size_t>(capacity().bytes);
  *free_bytes = static_cast<size_t>(capacity().bytes - m.stats[device].allocated_bytes);
  return npuSuccess;
}

npuError_t npuMemResetPeak(int device) {
  if (!valid_device(device)) return npuErrorInvalidDevice;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.stats[device].peak_bytes = m.stats[device].allocated_bytes;
  return npuSuccess;
}

void* npuDevicePtrToHost(const void* device_ptr) {
  if (device_ptr == nullptr) return nullptr;
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(device_ptr) - kDeviceTag);
}
