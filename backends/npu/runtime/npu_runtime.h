// The emulated NPU driver: the one layer a vendor replaces with its real driver.
// A C-style API in the manner of CUDA's runtime (status codes, opaque handles), so
// everything above it (allocator, guard, hooks, aten ops, kernels) keeps working
// when these functions call real hardware instead.
//
// What it emulates, in host memory and host threads:
// - devices: BACKPLANE_NPU_DEVICE_COUNT of them (default 2), a current device per thread;
// - device memory: addresses the host cannot dereference (see npuDevicePtrToHost), fresh
//   allocations filled with 0xFF so reads of unwritten memory show, statistics per device,
//   a capacity per device of BACKPLANE_NPU_MEMORY_MB MiB (default 16384);
// - streams: one worker thread each, running queued tasks in order; synchronize waits;
// - events: record on a stream, make a stream wait, query, synchronize, elapsed time.
// BACKPLANE_NPU_TASK_DELAY_MS=n sleeps n ms before every task, so races show.
#pragma once

#include <cstddef>
#include <cstdint>

typedef enum {
  npuSuccess = 0,
  npuErrorInvalidDevice,
  npuErrorInvalidValue,
  npuErrorMemoryAllocation,
  npuErrorNotReady,
  npuErrorLaunchFailure,
  npuErrorStreamCaptureUnsupported,  // a host wait or query refused while a stream captures
  npuErrorStreamCaptureInvalidated,  // npuStreamEndCapture: a refused call spoilt the capture
  npuErrorStreamCaptureUnmatched,    // begin on a capturing stream, or end on one that is not
} npuError_t;

typedef struct npuStream_* npuStream_t;
typedef struct npuEvent_* npuEvent_t;
typedef void (*npuHostFn_t)(void* user_data);

const char* npuGetErrorString(npuError_t error);

// --- devices --------------------------------------------------------------------
// npuErrorInvalidValue (and 0 devices) when BACKPLANE_NPU_DEVICE_COUNT is malformed.
npuError_t npuGetDeviceCount(int* count);
// The driver's settings (BACKPLANE_NPU_DEVICE_COUNT, BACKPLANE_NPU_TASK_DELAY_MS,
// BACKPLANE_NPU_MEMORY_MB): a
// message naming a malformed one, or null.
const char* npuGetConfigError();
npuError_t npuGetDevice(int* device);  // this thread's current device (default 0)
npuError_t npuSetDevice(int device);
npuError_t npuDeviceSynchronize(int device);  // every stream of the device

// --- memory -----------------------------------------------------------------------
typedef enum { npuMemoryTypeUnregistered = 0, npuMemoryTypeHost, npuMemoryTypeDevice } npuMemoryType;
typedef struct {
  npuMemoryType type;
  int device;  // for device memory
} npuPointerAttributes;
typedef struct {
  int64_t allocated_bytes;  // now
  int64_t peak_bytes;       // since start or the last npuMemResetPeak
  int64_t allocations;      // live allocations
} npuMemStats;

// 0 bytes: *ptr = nullptr. npuErrorMemoryAllocation past the device's capacity.
npuError_t npuMalloc(void** ptr, size_t bytes, int device);
npuError_t npuFree(void* ptr);
npuError_t npuMallocHost(void** ptr, size_t bytes);  // pinned host memory
npuError_t npuFreeHost(void* ptr);
npuError_t npuPointerGetAttributes(npuPointerAttributes* attributes, const void* ptr);  // interior pointers too
npuError_t npuMemGetStats(int device, npuMemStats* stats);
npuError_t npuMemResetPeak(int device);
// The device's capacity (BACKPLANE_NPU_MEMORY_MB MiB; a malformed value gives capacity 0
// and a message from npuGetConfigError) and what npuMalloc has not handed out of it.
npuError_t npuMemGetInfo(int device, size_t* free_bytes, size_t* total_bytes);
// Where emulated device memory lives in this process. Only the emulation has this:
// kernels here are host code, and they reach device memory through it. A real
// driver has no such function; its kernels run on the device.
void* npuDevicePtrToHost(const void* device_ptr);

// --- streams ----------------------------------------------------------------------
npuError_t npuStreamCreate(npuStream_t* stream, int device);  // never destroyed (see README)
npuError_t npuStreamGetDevice(npuStream_t stream, int* device);
// Queues fn(user_data) on the stream; it runs on the stream's worker after every
// task queued before it. fn must not throw; report failures with npuStreamSetError.
npuError_t npuLaunchHostFunc(npuStream_t stream, npuHostFn_t fn, void* user_data);
npuError_t npuStreamSynchronize(npuStream_t stream);  // npuErrorLaunchFailure if a task failed
npuError_t npuStreamQuery(npuStream_t stream);        // npuSuccess when idle, else npuErrorNotReady
// A task's failure, kept until the next synchronize or query returns it (sticky, as
// in CUDA). npuStreamGetError copies the message (empty if none) and clears it.
void npuStreamSetError(npuStream_t stream, const char* message);
npuError_t npuStreamGetError(npuStream_t stream, char* message, size_t size);

// --- events -----------------------------------------------------------------------
enum { npuEventDefault = 0, npuEventEnableTiming = 1 };
npuError_t npuEventCreate(npuEvent_t* event, unsigned flags);
npuError_t npuEventDestroy(npuEvent_t event);  // safe while queued work still refers to it
npuError_t npuEventRecord(npuEvent_t event, npuStream_t stream);
npuError_t npuStreamWaitEvent(npuStream_t stream, npuEvent_t event);  // the last record at call time
npuError_t npuEventQuery(npuEvent_t event);  // npuSuccess when the last record has run (or none)
npuError_t npuEventSynchronize(npuEvent_t event);
npuError_t npuEventElapsedTime(float* ms, npuEvent_t start, npuEvent_t end);

// --- graphs -----------------------------------------------------------------------
// As CUDA's stream capture: between npuStreamBeginCapture and npuStreamEndCapture, what
// is queued on the stream (host functions, tasks, event records and waits) is recorded
// into a graph instead of run; npuGraphLaunch queues the whole recording as one task.
// Limits: one stream per capture (no fork/join across streams); work queued on other
// streams meanwhile runs as usual. While a stream captures, these are refused with
// npuErrorStreamCaptureUnsupported and spoil the capture (npuStreamEndCapture then
// returns npuErrorStreamCaptureInvalidated): npuStreamSynchronize, npuStreamQuery and
// npuTestHoldStream on it, npuDeviceSynchronize of its device, npuEventQuery and
// npuEventSynchronize of an event recorded in the capture, and npuStreamWaitEvent of
// another stream on such an event. Memory is not the driver's business: addresses the
// recorded tasks use stay valid only as long as their owners keep them (launch.h).
typedef struct npuGraph_* npuGraph_t;
// A task that owns user_data: run(user_data) runs it (once; or, if captured, at every
// launch of the graph), and release(user_data) once when it is no longer needed (after
// its run, on the stream's worker; or when its graph and the launches queued of it are
// gone). Neither may throw. npuLaunchHostFunc's fn, if captured, runs at every launch
// too, with user_data the caller keeps alive.
npuError_t npuLaunchHostTask(npuStream_t stream, npuHostFn_t run, npuHostFn_t release, void* user_data);
npuError_t npuStreamBeginCapture(npuStream_t stream);
npuError_t npuStreamEndCapture(npuStream_t stream, npuGraph_t* graph);  // *graph null on failure
npuError_t npuStreamIsCapturing(npuStream_t stream, int* capturing);
npuError_t npuGraphLaunch(npuGraph_t graph, npuStream_t stream);  // refused onto a capturing stream
npuError_t npuGraphGetNodeCount(npuGraph_t graph, size_t* count);
npuError_t npuGraphDestroy(npuGraph_t graph);  // safe while launches of it are queued

// --- clock ------------------------------------------------------------------------
// Each device's own timer, in nanoseconds: what the device stamps its work with. It has
// no fixed relation to any host clock (the emulation: nanoseconds since the driver
// started, plus the device index in seconds, so no two devices and no host clock
// agree). A stream's worker runs as its device (its current device is the stream's), so
// work that reads the current device's timer on a worker stamps device time. A profiler
// samples this beside the host's clock to map device time to host time, as Kineto does
// with CUPTI's GPU timestamps.
npuError_t npuDeviceGetTimestamp(int device, int64_t* ns);

// --- test switches (emulation only) -------------------------------------------------
// Host-side waits (stream, event and device synchronize) return at once: lets a test
// show that a missing wait gives a wrong result.
void npuTestSetSkipHostWaits(bool skip);
// Holds a stream: tasks queued after this wait until npuTestRelease, so a test can
// order work across streams deterministically, with no timing.
typedef struct npuHold_* npuHold_t;
npuError_t npuTestHoldStream(npuStream_t stream, npuHold_t* hold);
npuError_t npuTestRelease(npuHold_t hold);
