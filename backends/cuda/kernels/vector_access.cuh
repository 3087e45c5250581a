// 16-byte vectors: the widest access one thread can make (LDG.128 / STG.128), so a
// warp moves 512 contiguous bytes per instruction. A pointer qualifies only when its
// address (storage offset included, as data_ptr() gives it) is a multiple of 16.
#pragma once

#include <cstdint>

namespace backplane::cuda {

constexpr int kVectorBytes = 16;

// Elements per 16-byte vector: 4 float, 2 double, 8 half or bfloat16.
template <typename T>
constexpr int kVectorWidth = kVectorBytes / static_cast<int>(sizeof(T));

// alignas makes the compiler emit one 16-byte load or store for the whole vector.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vector {
  T v[N];
};

template <typename T>
using Vec16 = Vector<T, kVectorWidth<T>>;

inline std::uintptr_t misalignment(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes; }

inline bool is_vector_aligned(const void* p) { return misalignment(p) == 0; }

}  // namespace backplane::cuda
