// The launch cache of the bridge's kernels (python_kernels.cpp): the kernel launches one call
// of a Triton launcher made, recorded by the plugin's launch.grid_call
// (backends/triton/backplane_triton/launch_record.py), kept under a key of what those launches
// depend on, and replayed from C++ for later calls of an identical key: no GIL, no Python.
//
// The key: each output's and argument's kind; for a tensor its dtype, device, sizes, strides,
// data pointer modulo 16 (Triton specializes pointers on 16-byte alignment) and aliasing (the
// first earlier tensor sharing its storage and the distance between their data pointers); the
// values of int, bool and int-list arguments. Floats are not in it (Triton passes them as
// values and specializes nothing on them): a replay passes each call's own. A call holding any
// other kind of value (a string, a tensor list, a complex) has no key and stays on Python.
//
// Bounded: the least recently used key goes past `capacity`. A key whose recording was refused
// twice (see launch_record.py: a launcher that needs temporaries, say) is kept as Python-only,
// so its calls stop paying for recording.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace backplane::python_kernels {

// One runtime parameter of a kernel, in Triton's order, and where its value comes from.
struct LaunchParam {
  enum Kind : uint8_t { kPointer, kInt, kFloat, kConstFloat, kNull };
  Kind kind = kNull;
  uint8_t bytes = 8;   // the parameter's width: 1, 2, 4 or 8
  uint32_t source = 0;  // kPointer, kFloat: index into the call's outputs then arguments
  int64_t value = 0;    // kPointer: byte offset; kInt: the value; kConstFloat: the bits at `bytes`
};

struct KernelLaunch {
  uint64_t function = 0;  // a CUfunction of the device the key names
  uint32_t grid[3] = {1, 1, 1};
  uint32_t threads = 0;
  uint32_t shared = 0;
  std::vector<LaunchParam> params;
};

struct LaunchPlan {
  std::vector<KernelLaunch> launches;
};

// Parameters one launch may have: more are refused when a plan is read (launch_plan_python.cpp).
constexpr size_t kMaxLaunchParams = 96;

struct LaunchKey {
  std::vector<int64_t> words;
  size_t hash = 0;
  bool operator==(const LaunchKey& other) const { return words == other.words; }
};

// The key of a call (outputs, then arguments), or nullopt where it has none (see the top; also
// a tensor on another device type than `device_type`, or not strided).
std::optional<LaunchKey> launch_key(const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args,
                                    c10::DeviceType device_type);

// Why `plan` cannot be replayed for calls like this one (a pointer whose source is no tensor, a
// float whose source is no float argument), or "": checked once, when it is stored (every call
// of its key has the same kinds of values).
std::string plan_mismatch(const LaunchPlan& plan, const std::vector<at::Tensor>& outs,
                          c10::ArrayRef<c10::IValue> args);

// Where a launch goes: the device's driver, or a test's recorder. `slots` holds the packed
// parameters (8 bytes each), `params` points into it; returns "" or the error.
using LaunchFunction = std::string (*)(const KernelLaunch& launch, void** params, const uint64_t* slots, void* stream,
                                       c10::DeviceIndex device);

// Launches `plan` with this call's pointers and floats on `stream`; "" or the first error.
std::string replay(const LaunchPlan& plan, const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args,
                   void* stream, c10::DeviceIndex device, LaunchFunction launch);

struct LaunchCacheStats {
  int64_t hits = 0, recorded = 0, stored = 0, refused = 0, python_only = 0, entries = 0;
  std::string last_refusal;
};

class LaunchCache {
 public:
  explicit LaunchCache(size_t capacity) : capacity_(capacity) {}

  struct Found {
    std::shared_ptr<const LaunchPlan> plan;  // set: replay it
    bool python_only = false;                // no plan, and no more recording for this key
  };
  Found find(const LaunchKey& key);
  void store(const LaunchKey& key, std::shared_ptr<const LaunchPlan> plan);
  // A recording that gave no plan; `counts`: toward making the key Python-only.
  void refuse(const LaunchKey& key, const std::string& why, bool counts);
  LaunchCacheStats stats() const;
  void clear();

 private:
  struct Entry {
    std::shared_ptr<const LaunchPlan> plan;
    int refusals = 0;
  };
  struct KeyHash {
    size_t operator()(const LaunchKey& key) const { return key.hash; }
  };
  using Order = std::list<std::pair<LaunchKey, Entry>>;
  Entry& entry(const LaunchKey& key);  // found or inserted (at the front), with the lock held

  mutable std::mutex mutex_;
  size_t capacity_;
  Order order_;  // most recently used first
  std::unordered_map<LaunchKey, Order::iterator, KeyHash> index_;
  LaunchCacheStats stats_;
};

}  // namespace backplane::python_kernels
