// The launch cache's key, replay and store (triton_launch_cache.h).
#include "triton_launch_cache.h"

#include <ATen/core/Tensor.h>

#include <cstring>

namespace backplane::python_kernels {
namespace {

enum Tag : int64_t { kTensor = 1, kUndefinedTensor, kDouble, kInt, kBool, kNone, kIntList };

size_t hash_words(const std::vector<int64_t>& words) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (const int64_t w : words) {
    h ^= static_cast<uint64_t>(w);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h ^ (h >> 29));
}

// The tensor of source k: the outputs, then the arguments.
const at::Tensor& source_tensor(const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args, size_t k) {
  return k < outs.size() ? outs[k] : args[k - outs.size()].toTensor();
}

}  // namespace

std::optional<LaunchKey> launch_key(const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args,
                                    c10::DeviceType device_type) {
  LaunchKey key;
  key.words.reserve(16 * (outs.size() + args.size()));
  std::vector<std::pair<const c10::StorageImpl*, intptr_t>> storages;  // of the tensors so far
  auto add_tensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      key.words.push_back(kUndefinedTensor);
      return true;
    }
    if (t.layout() != c10::kStrided || t.device().type() != device_type) return false;
    const auto address = reinterpret_cast<intptr_t>(t.data_ptr());
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    int64_t alias = -1, distance = 0;
    for (size_t j = 0; j < storages.size(); ++j)
      if (storages[j].first == storage) {
        alias = static_cast<int64_t>(j);
        distance = address - storages[j].second;
        break;
      }
    storages.emplace_back(storage, address);
    key.words.insert(key.words.end(), {kTensor, static_cast<int64_t>(t.scalar_type()), t.device().index(), t.dim(),
                                       static_cast<int64_t>(address % 16), alias, distance});
    key.words.insert(key.words.end(), t.sizes().begin(), t.sizes().end());
    key.words.insert(key.words.end(), t.strides().begin(), t.strides().end());
    return true;
  };
  for (const auto& out : outs)
    if (!add_tensor(out)) return std::nullopt;
  for (const auto& a : args) {
    if (a.isTensor()) {
      if (!add_tensor(a.toTensor())) return std::nullopt;
    } else if (a.isDouble()) {
      key.words.push_back(kDouble);
    } else if (a.isInt()) {
      key.words.insert(key.words.end(), {kInt, a.toInt()});
    } else if (a.isBool()) {
      key.words.insert(key.words.end(), {kBool, a.toBool()});
    } else if (a.isNone()) {
      key.words.push_back(kNone);
    } else if (a.isIntList()) {
      const auto list = a.toIntVector();
      key.words.insert(key.words.end(), {kIntList, static_cast<int64_t>(list.size())});
      key.words.insert(key.words.end(), list.begin(), list.end());
    } else {
      return std::nullopt;
    }
  }
  key.hash = hash_words(key.words);
  return key;
}

std::string plan_mismatch(const LaunchPlan& plan, const std::vector<at::Tensor>& outs,
                          c10::ArrayRef<c10::IValue> args) {
  const size_t sources = outs.size() + args.size();
  for (const auto& l : plan.launches)
    for (const auto& p : l.params) {
      if (p.kind != LaunchParam::kPointer && p.kind != LaunchParam::kFloat) continue;
      if (p.source >= sources) return "a parameter's source " + std::to_string(p.source) + " is past the call's values";
      const bool tensor = p.source < outs.size() || args[p.source - outs.size()].isTensor();
      if (p.kind == LaunchParam::kPointer && !tensor)
        return "a pointer parameter's source " + std::to_string(p.source) + " is not a tensor";
      if (p.kind == LaunchParam::kFloat && (p.source < outs.size() || !args[p.source - outs.size()].isDouble()))
        return "a float parameter's source " + std::to_string(p.source) + " is not a float argument";
    }
  return "";
}

std::string replay(const LaunchPlan& plan, const std::vector<at::Tensor>& outs, c10::ArrayRef<c10::IValue> args,
                   void* stream, c10::DeviceIndex device, LaunchFunction launch) {
  uint64_t slots[kMaxLaunchParams];
  void* params[kMaxLaunchParams];
  for (const auto& l : plan.launches) {
    for (size_t i = 0; i < l.params.size(); ++i) {
      const LaunchParam& p = l.params[i];
      slots[i] = 0;
      switch (p.kind) {
        case LaunchParam::kPointer:
          slots[i] = reinterpret_cast<uint64_t>(source_tensor(outs, args, p.source).data_ptr()) +
                     static_cast<uint64_t>(p.value);
          break;
        case LaunchParam::kInt:  // little-endian: the low `bytes` bytes come first
        case LaunchParam::kConstFloat:
          std::memcpy(&slots[i], &p.value, p.bytes);
          break;
        case LaunchParam::kFloat: {
          const double d = args[p.source - outs.size()].toDouble();
          if (p.bytes == 4) {
            const float f = static_cast<float>(d);
            std::memcpy(&slots[i], &f, 4);
          } else {
            std::memcpy(&slots[i], &d, 8);
          }
          break;
        }
        case LaunchParam::kNull:
          break;
      }
      params[i] = &slots[i];
    }
    std::string error = launch(l, params, slots, stream, device);
    if (!error.empty()) return error;
  }
  return "";
}

LaunchCache::Entry& LaunchCache::entry(const LaunchKey& key) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }
  order_.emplace_front(key, Entry{});
  index_.emplace(key, order_.begin());
  while (order_.size() > capacity_) {
    index_.erase(order_.back().first);
    order_.pop_back();
  }
  return order_.front().second;
}

LaunchCache::Found LaunchCache::find(const LaunchKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.recorded;
    return {};
  }
  order_.splice(order_.begin(), order_, it->second);
  const Entry& e = it->second->second;
  if (e.plan) {
    ++stats_.hits;
    return {e.plan, false};
  }
  const bool python_only = e.refusals >= 2;
  ++(python_only ? stats_.python_only : stats_.recorded);
  return {nullptr, python_only};
}

void LaunchCache::store(const LaunchKey& key, std::shared_ptr<const LaunchPlan> plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  entry(key).plan = std::move(plan);
  ++stats_.stored;
}

void LaunchCache::refuse(const LaunchKey& key, const std::string& why, bool counts) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.refused;
  stats_.last_refusal = why;
  if (counts) ++entry(key).refusals;
}

LaunchCacheStats LaunchCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LaunchCacheStats s = stats_;
  s.entries = static_cast<int64_t>(order_.size());
  return s;
}

void LaunchCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  order_.clear();
  index_.clear();
  stats_ = {};
}

}  // namespace backplane::python_kernels
