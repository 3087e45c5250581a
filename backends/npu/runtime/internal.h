// Shared by the runtime's own files; not part of the driver API.
#pragma once

#include "npu_runtime.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

// What queued tasks share with an event's handle: an event may be destroyed while a
// record or a wait on it is still queued.
struct EventState {
  std::mutex mutex;
  std::condition_variable reached;
  uint64_t recorded = 0, completed = 0;  // versions: scheduled, and run
  Clock::time_point when;
  // The stream whose open capture holds this event's last record (graph.cpp), or null.
  npuStream_t pending_capture = nullptr;
};

// One step of a captured graph: a task, or an event record (record non-null), whose
// version is taken at each launch so that host waits on the event see the launch.
struct CapturedNode {
  std::function<void()> run;
  std::shared_ptr<EventState> record;
};

struct npuGraph_ {
  // Shared with queued launches, so that destroying the graph while one is queued is safe.
  std::shared_ptr<const std::vector<CapturedNode>> nodes;
};

// What a stream capturing a graph holds (npuStreamBeginCapture .. npuStreamEndCapture).
struct Capture {
  std::vector<CapturedNode> nodes;
  std::string invalidated_by;  // the refused call that spoilt the capture, or empty
};

struct npuStream_ {
  int device = 0;
  std::mutex mutex;
  std::condition_variable work;  // a task was queued
  std::condition_variable done;  // a task finished
  std::deque<std::function<void()>> queue;
  uint64_t queued = 0, finished = 0;
  std::string error;  // the first failure since the last synchronize
  std::unique_ptr<Capture> capture;  // under mutex; non-null while capturing
};

namespace npu_runtime {

int device_count();  // from BACKPLANE_NPU_DEVICE_COUNT, read once
bool valid_device(int device);
bool skip_host_waits();
int task_delay_ms();  // BACKPLANE_NPU_TASK_DELAY_MS, read once

// stream.cpp: queues a task on the stream, or records it while the stream captures.
void enqueue(npuStream_t s, std::function<void()> task);
// graph.cpp, for the calls a capture refuses (host waits and queries, holds): marks the
// capture of s spoilt by `call` and returns npuErrorStreamCaptureUnsupported if s
// captures, else npuSuccess.
npuError_t refuse_if_capturing(npuStream_t s, const char* call);
// graph.cpp, for npuEventRecord: records the event into the open capture of s and
// returns true, or returns false (s does not capture).
bool capture_event_record(npuStream_t s, const std::shared_ptr<EventState>& state);
const char* memory_config_error();  // BACKPLANE_NPU_MEMORY_MB malformed: the message, else null (memory.cpp)

}  // namespace npu_runtime
