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

// Tells the compiler a vector's registers may have changed, at no instruction cost, so
// what it computed from the vector before (its elements widened to float) cannot be
// reused after and is computed again instead of being kept live. For a kernel that reads
// a row's vectors into registers, reduces, then reads them again: across the barrier the
// packed vectors stay live, not twice as many floats. (softmax_backward's bfloat16 rows of
// 4 vectors a thread in 1024-thread blocks spilled 56 bytes a thread without it.) Where
// nothing spilled (float16 there) it changed nothing measurable: use it where ptxas -v
// reports spills.
template <typename T>
__device__ __forceinline__ void keep_packed(Vec16<T>& vector) {
  auto* words = reinterpret_cast<std::uint32_t*>(&vector);
#pragma unroll
  for (int i = 0; i < kVectorBytes / 4; ++i) asm volatile("" : "+r"(words[i]));
}

inline std::uintptr_t misalignment(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes; }

inline bool is_vector_aligned(const void* p) { return misalignment(p) == 0; }

}  // namespace backplane::cuda
