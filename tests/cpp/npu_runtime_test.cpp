// The emulated npu driver on its own (no torch): ordering, synchronization, events,
// memory statistics and errors. Orderings are forced with holds, never with timing.
#include "runtime/npu_runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace {

void run(void* data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(data));
  (*fn)();
}

void launch(npuStream_t s, std::function<void()> fn) {
  ASSERT_EQ(npuLaunchHostFunc(s, &run, new std::function<void()>(std::move(fn))), npuSuccess);
}

npuStream_t new_stream(int device = 0) {
  npuStream_t s = nullptr;
  EXPECT_EQ(npuStreamCreate(&s, device), npuSuccess);
  return s;
}

TEST(NpuRuntime, DevicesDefaultToTwoAndRefuseOthers) {
  int count = 0;
  ASSERT_EQ(npuGetDeviceCount(&count), npuSuccess);
  if (std::getenv("BACKPLANE_NPU_DEVICE_COUNT") == nullptr) EXPECT_EQ(count, 2);
  EXPECT_EQ(npuSetDevice(count), npuErrorInvalidDevice);
  EXPECT_EQ(npuSetDevice(-1), npuErrorInvalidDevice);
  ASSERT_EQ(npuSetDevice(count - 1), npuSuccess);
  int current = -1;
  npuGetDevice(&current);
  EXPECT_EQ(current, count - 1);
  npuSetDevice(0);
  EXPECT_EQ(npuStreamCreate(nullptr, 0), npuErrorInvalidValue);
  npuStream_t s = nullptr;
  EXPECT_EQ(npuStreamCreate(&s, count), npuErrorInvalidDevice);
}

TEST(NpuRuntime, TasksRunInQueueOrder) {
  npuStream_t s = new_stream();
  npuHold_t hold = nullptr;
  ASSERT_EQ(npuTestHoldStream(s, &hold), npuSuccess);
  std::vector<int> order;  // only the worker touches it until synchronize returns
  for (int i = 0; i < 100; ++i) launch(s, [&order, i] { order.push_back(i); });
  EXPECT_EQ(npuStreamQuery(s), npuErrorNotReady);
  EXPECT_TRUE(order.empty());
  npuTestRelease(hold);
  ASSERT_EQ(npuStreamSynchronize(s), npuSuccess);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(npuStreamQuery(s), npuSuccess);
}

TEST(NpuRuntime, SkippedHostWaitReturnsBeforeTheWorkRan) {
  npuStream_t s = new_stream();
  npuHold_t hold = nullptr;
  npuTestHoldStream(s, &hold);
  std::atomic<int> value{0};
  launch(s, [&] { value = 7; });
  npuTestSetSkipHostWaits(true);
  EXPECT_EQ(npuStreamSynchronize(s), npuSuccess);
  EXPECT_EQ(value.load(), 0);  // what a caller that "synchronized" would now read
  npuTestSetSkipHostWaits(false);
  npuTestRelease(hold);
  ASSERT_EQ(npuStreamSynchronize(s), npuSuccess);
  EXPECT_EQ(value.load(), 7);
}

TEST(NpuRuntime, EventOrdersTwoStreams) {
  npuStream_t producer = new_stream(), consumer = new_stream(1);
  npuEvent_t ready = nullptr;
  ASSERT_EQ(npuEventCreate(&ready, npuEventDefault), npuSuccess);
  EXPECT_EQ(npuEventQuery(ready), npuSuccess);  // never recorded
  npuHold_t hold = nullptr;
  npuTestHoldStream(producer, &hold);
  int x = 0, seen = -1;
  launch(producer, [&] { x = 1; });
  ASSERT_EQ(npuEventRecord(ready, producer), npuSuccess);
  ASSERT_EQ(npuStreamWaitEvent(consumer, ready), npuSuccess);
  launch(consumer, [&] { seen = x; });
  EXPECT_EQ(npuEventQuery(ready), npuErrorNotReady);
  EXPECT_EQ(npuStreamQuery(consumer), npuErrorNotReady);  // blocked behind the producer
  npuTestRelease(hold);
  ASSERT_EQ(npuStreamSynchronize(consumer), npuSuccess);
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(npuEventSynchronize(ready), npuSuccess);
  EXPECT_EQ(npuEventQuery(ready), npuSuccess);
  npuEventDestroy(ready);
}

TEST(NpuRuntime, EventDestroyedWhileQueuedIsSafe) {
  npuStream_t s = new_stream();
  npuHold_t hold = nullptr;
  npuTestHoldStream(s, &hold);
  npuEvent_t e = nullptr;
  npuEventCreate(&e, npuEventDefault);
  npuEventRecord(e, s);
  npuStreamWaitEvent(s, e);
  npuEventDestroy(e);
  npuTestRelease(hold);
  EXPECT_EQ(npuStreamSynchronize(s), npuSuccess);
}

TEST(NpuRuntime, ElapsedTimeNeedsTimingAndCompletion) {
  npuStream_t s = new_stream();
  npuEvent_t start = nullptr, end = nullptr, plain = nullptr;
  npuEventCreate(&start, npuEventEnableTiming);
  npuEventCreate(&end, npuEventEnableTiming);
  npuEventCreate(&plain, npuEventDefault);
  float ms = -1;
  EXPECT_EQ(npuEventElapsedTime(&ms, start, end), npuErrorInvalidValue);  // not recorded
  npuHold_t hold = nullptr;
  npuEventRecord(start, s);
  npuTestHoldStream(s, &hold);
  npuEventRecord(end, s);
  EXPECT_EQ(npuEventElapsedTime(&ms, start, end), npuErrorNotReady);
  npuTestRelease(hold);
  npuEventRecord(plain, s);
  ASSERT_EQ(npuStreamSynchronize(s), npuSuccess);
  ASSERT_EQ(npuEventElapsedTime(&ms, start, end), npuSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(npuEventElapsedTime(&ms, start, plain), npuErrorInvalidValue);  // no timing
}

TEST(NpuRuntime, MemoryStatsAndFreshBytes) {
  npuMemStats before{};
  ASSERT_EQ(npuMemGetStats(1, &before), npuSuccess);
  void* p = nullptr;
  ASSERT_EQ(npuMalloc(&p, 1000, 1), npuSuccess);
  npuMemStats during{};
  npuMemGetStats(1, &during);
  EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + 1000);
  EXPECT_EQ(during.allocations, before.allocations + 1);
  EXPECT_GE(during.peak_bytes, during.allocated_bytes);
  // Fresh device memory reads as 0xFF, so a kernel reading unwritten memory shows.
  const auto* bytes = static_cast<const unsigned char*>(npuDevicePtrToHost(p));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(bytes[i], 0xFF) << "byte " << i;
  npuPointerAttributes attributes{};
  npuPointerGetAttributes(&attributes, static_cast<char*>(p) + 999);
  EXPECT_EQ(attributes.type, npuMemoryTypeDevice);
  EXPECT_EQ(attributes.device, 1);
  ASSERT_EQ(npuFree(p), npuSuccess);
  npuMemStats after{};
  npuMemGetStats(1, &after);
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_bytes, during.peak_bytes);
  npuMemResetPeak(1);
  npuMemGetStats(1, &after);
  EXPECT_EQ(after.peak_bytes, after.allocated_bytes);
  EXPECT_EQ(npuMemGetStats(9, &after), npuErrorInvalidDevice);
  EXPECT_EQ(npuFree(reinterpret_cast<void*>(0x1234)), npuErrorInvalidValue);
}

TEST(NpuRuntime, PinnedHostMemoryIsKnown) {
  void* host = nullptr;
  ASSERT_EQ(npuMallocHost(&host, 64), npuSuccess);
  npuPointerAttributes attributes{};
  npuPointerGetAttributes(&attributes, host);
  EXPECT_EQ(attributes.type, npuMemoryTypeHost);
  int local = 0;
  npuPointerGetAttributes(&attributes, &local);
  EXPECT_EQ(attributes.type, npuMemoryTypeUnregistered);
  EXPECT_EQ(npuFree(host), npuErrorInvalidValue);  // not device memory
  EXPECT_EQ(npuFreeHost(host), npuSuccess);
}

TEST(NpuRuntime, TaskFailureIsReportedAtSynchronizeOnce) {
  npuStream_t s = new_stream();
  launch(s, [s] { npuStreamSetError(s, "kernel exploded"); });
  EXPECT_EQ(npuStreamSynchronize(s), npuErrorLaunchFailure);
  char message[64];
  ASSERT_EQ(npuStreamGetError(s, message, sizeof message), npuSuccess);
  EXPECT_STREQ(message, "kernel exploded");
  EXPECT_EQ(npuStreamSynchronize(s), npuSuccess);
  EXPECT_STREQ(npuGetErrorString(npuErrorLaunchFailure), "a task queued on the stream failed");
}

TEST(NpuRuntime, DeviceSynchronizeWaitsForEveryStream) {
  npuStream_t a = new_stream(1), b = new_stream(1);
  std::atomic<int> done{0};
  for (npuStream_t s : {a, b})
    for (int i = 0; i < 10; ++i) launch(s, [&] { done += 1; });
  ASSERT_EQ(npuDeviceSynchronize(1), npuSuccess);
  EXPECT_EQ(done.load(), 20);
  EXPECT_EQ(npuDeviceSynchronize(5), npuErrorInvalidDevice);
}

}  // namespace
