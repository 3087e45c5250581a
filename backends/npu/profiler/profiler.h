// Device time for torch.profiler. While a profile that asks for the device's activity
// (ProfilerActivity.PrivateUse1) is recording, each stream worker times the kernels it
// runs; profiler.cpp hands them to Kineto as an IActivityProfiler, so they reach
// torch.profiler as kernels on their device and stream, attributed to the op that
// queued them. A real device replaces the timing (run_task) with its driver's events.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace backplane::npu::profiler {

namespace detail {
extern std::atomic<bool> g_recording;
}

// Whether kernels are being timed. This relaxed load, once where work is queued and
// once where it runs, is all the profiler costs while it is off.
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }

// The profiled op that is running on this thread (Kineto's correlation id; 0 for none):
// work queued now is attributed to it.
uint64_t current_op();

// Nanoseconds since the epoch: the clock of torch.profiler's host events.
int64_t now_ns();

// A kernel has run on a stream worker. Takes a mutex, never the GIL.
void record_kernel(const std::string& name, c10::DeviceIndex device, c10::StreamId stream, uint64_t op,
                   int64_t start_ns, int64_t end_ns);

}  // namespace backplane::npu::profiler
