// Device time for torch.profiler. While a profile that asks for the device's activity
// (ProfilerActivity.PrivateUse1) is recording, the profiler is the device's kernel timer
// (device/kernel_timer.h) and each stream worker times the kernels it runs; profiler.cpp hands them to Kineto as an IActivityProfiler, so they reach
// torch.profiler as kernels on their device and stream, attributed to the op that
// queued them. Kernels are stamped on the device's own clock and mapped to host time
// when recorded (profiler.cpp). A real device replaces the timing (run_task) with its
// driver's records of the kernels it ran.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <string>

namespace backplane::npu::profiler {

// The profiled op that is running on this thread (Kineto's correlation id; 0 for none):
// work queued now is attributed to it.
uint64_t current_op();

// Nanoseconds since the epoch: the clock of torch.profiler's host events.
int64_t host_now_ns();

// The device's own clock (npuDeviceGetTimestamp) of the calling thread's current device:
// on a stream worker, which runs as its stream's device, the time the device stamps a
// kernel with. It is not host time; record_kernel maps it. Called by the worker around
// each kernel it times (device/launch.cpp).
int64_t now_ns();

// A kernel has run on a stream worker, from start_ns to end_ns on the clock of `device`
// (now_ns). Takes a mutex, never the GIL.
void record_kernel(const std::string& name, c10::DeviceIndex device, c10::StreamId stream, uint64_t op,
                   int64_t start_ns, int64_t end_ns);

}  // namespace backplane::npu::profiler
