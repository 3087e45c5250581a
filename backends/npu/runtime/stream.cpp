// Streams (one worker thread each, tasks run in queue order), events and test holds.
// While a stream captures a graph (graph.cpp), what is queued on it is recorded instead
// of run, and the host waits and queries on it are refused.
#include "internal.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct npuEvent_ {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
  bool timing = false;
};

struct npuHold_ {
  std::mutex mutex;
  std::condition_variable released_cv;
  bool released = false;
};

namespace npu_runtime {
namespace {

std::mutex g_streams_mutex;
std::vector<npuStream_t>& all_streams() {
  static auto* streams = new std::vector<npuStream_t>();  // never destroyed, like the workers
  return *streams;
}
std::vector<npuHold_t>& all_holds() {
  static auto* holds = new std::vector<npuHold_t>();
  return *holds;
}

// At exit, let queued work finish before the process tears down the libraries it
// calls into, releasing test holds so that it can; give up after 30 s rather than
// hang. (Python drains earlier, in backplane_npu's _drain_at_exit: a worker must not
// outlive the interpreter.)
void drain_at_exit() {
  std::vector<npuStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    streams = all_streams();
    for (npuHold_t h : all_holds()) npuTestRelease(h);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (npuStream_t s : streams) {
    std::unique_lock<std::mutex> lock(s->mutex);
    const uint64_t target = s->queued;
    s->done.wait_until(lock, deadline, [&] { return s->finished >= target; });
  }
}

void worker(npuStream_t s) {
  npuSetDevice(s->device);  // runs as its device: its tasks read that timer (npuDeviceGetTimestamp)
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->work.wait(lock, [&] { return !s->queue.empty(); });
      task = std::move(s->queue.front());
      s->queue.pop_front();
    }
    if (task_delay_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(task_delay_ms()));
    task();
    task = nullptr;  // release what the task held before the stream counts as idle
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      s->finished += 1;
    }
    s->done.notify_all();
  }
}

// The event's shared state and its version: the next one to record (bump) or the
// last one recorded (0: never).
std::pair<std::shared_ptr<EventState>, uint64_t> event_version(npuEvent_t event, bool bump) {
  std::shared_ptr<EventState> state = event->state;
  std::lock_guard<std::mutex> lock(state->mutex);
  if (bump) state->pending_capture = nullptr;  // this record, outside any capture, is now the last
  const uint64_t version = bump ? ++state->recorded : state->recorded;
  return {state, version};
}

npuError_t take_error(npuStream_t s) {
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->error.empty() ? npuSuccess : npuErrorLaunchFailure;
}

// A task that owns its data: runs it each time it is run (once, or at every launch of a
// graph that captured it) and releases it when the last copy goes.
struct OwnedTask {
  OwnedTask(npuHostFn_t run_fn, npuHostFn_t release_fn, void* user_data)
      : run(run_fn), release(release_fn), data(user_data) {}
  npuHostFn_t run, release;
  void* data;
  OwnedTask(const OwnedTask&) = delete;
  OwnedTask& operator=(const OwnedTask&) = delete;
  ~OwnedTask() { release(data); }
};

}  // namespace

void enqueue(npuStream_t s, std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->capture) {
      s->capture->nodes.push_back({std::move(task), nullptr});
      return;
    }
    s->queue.push_back(std::move(task));
    s->queued += 1;
  }
  s->work.notify_one();
}

}  // namespace npu_runtime

using namespace npu_runtime;

npuError_t npuStreamCreate(npuStream_t* stream, int device) {
  if (stream == nullptr) return npuErrorInvalidValue;
  if (!valid_device(device)) return npuErrorInvalidDevice;
  auto* s = new npuStream_();
  s->device = device;
  std::thread(worker, s).detach();
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    if (all_streams().empty()) std::atexit(&drain_at_exit);
    all_streams().push_back(s);
  }
  *stream = s;
  return npuSuccess;
}

npuError_t npuStreamGetDevice(npuStream_t stream, int* device) {
  if (stream == nullptr || device == nullptr) return npuErrorInvalidValue;
  *device = stream->device;
  return npuSuccess;
}

npuError_t npuLaunchHostFunc(npuStream_t stream, npuHostFn_t fn, void* user_data) {
  if (stream == nullptr || fn == nullptr) return npuErrorInvalidValue;
  enqueue(stream, [fn, user_data] { fn(user_data); });
  return npuSuccess;
}

npuError_t npuLaunchHostTask(npuStream_t stream, npuHostFn_t run, npuHostFn_t release, void* user_data) {
  if (stream == nullptr || run == nullptr || release == nullptr) return npuErrorInvalidValue;
  auto task = std::make_shared<OwnedTask>(run, release, user_data);
  enqueue(stream, [task] { task->run(task->data); });
  return npuSuccess;
}

npuError_t npuStreamSynchronize(npuStream_t stream) {
  if (stream == nullptr) return npuErrorInvalidValue;
  if (refuse_if_capturing(stream, "npuStreamSynchronize") != npuSuccess) return npuErrorStreamCaptureUnsupported;
  if (!skip_host_waits()) {
    std::unique_lock<std::mutex> lock(stream->mutex);
    const uint64_t target = stream->queued;
    stream->done.wait(lock, [&] { return stream->finished >= target; });
  }
  return take_error(stream);
}

npuError_t npuStreamQuery(npuStream_t stream) {
  if (stream == nullptr) return npuErrorInvalidValue;
  if (refuse_if_capturing(stream, "npuStreamQuery") != npuSuccess) return npuErrorStreamCaptureUnsupported;
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (!stream->error.empty()) return npuErrorLaunchFailure;
  return stream->finished == stream->queued ? npuSuccess : npuErrorNotReady;
}

void npuStreamSetError(npuStream_t stream, const char* message) {
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->error.empty()) stream->error = message != nullptr && *message ? message : "unknown failure";
}

npuError_t npuStreamGetError(npuStream_t stream, char* message, size_t size) {
  if (stream == nullptr || (message == nullptr && size > 0)) return npuErrorInvalidValue;
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (size > 0) {
    const size_t n = std::min(size - 1, stream->error.size());
    std::memcpy(message, stream->error.data(), n);
    message[n] = '\0';
  }
  stream->error.clear();
  return npuSuccess;
}

npuError_t npuDeviceSynchronize(int device) {
  if (!valid_device(device)) return npuErrorInvalidDevice;
  std::vector<npuStream_t> streams;
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    streams = all_streams();
  }
  for (npuStream_t s : streams)
    if (s->device == device && refuse_if_capturing(s, "npuDeviceSynchronize") != npuSuccess)
      return npuErrorStreamCaptureUnsupported;
  npuError_t result = npuSuccess;
  for (npuStream_t s : streams)
    if (s->device == device && npuStreamSynchronize(s) != npuSuccess) result = npuErrorLaunchFailure;
  return result;
}

npuError_t npuEventCreate(npuEvent_t* event, unsigned flags) {
  if (event == nullptr) return npuErrorInvalidValue;
  *event = new npuEvent_();
  (*event)->timing = (flags & npuEventEnableTiming) != 0;
  return npuSuccess;
}

npuError_t npuEventDestroy(npuEvent_t event) {
  delete event;
  return npuSuccess;
}

npuError_t npuEventRecord(npuEvent_t event, npuStream_t stream) {
  if (event == nullptr || stream == nullptr) return npuErrorInvalidValue;
  if (capture_event_record(stream, event->state)) return npuSuccess;
  // Named copies rather than a structured binding in the capture list (clang 14, which the
  // sanitizer builds use, does not capture bindings).
  auto recorded = event_version(event, /*bump=*/true);
  enqueue(stream, [state = recorded.first, version = recorded.second] {
    {
      std::lock_guard<std::mutex> lock(state->mutex);
      state->completed = std::max(state->completed, version);
      state->when = Clock::now();
    }
    state->reached.notify_all();
  });
  return npuSuccess;
}

npuError_t npuStreamWaitEvent(npuStream_t stream, npuEvent_t event) {
  if (event == nullptr || stream == nullptr) return npuErrorInvalidValue;
  {
    // An event recorded in an open capture: a wait on the capturing stream itself is
    // already in order (one stream per capture); another stream cannot wait for work
    // that has not been launched, so that wait is refused and spoils the capture.
    npuStream_t capturing = nullptr;
    {
      std::lock_guard<std::mutex> lock(event->state->mutex);
      capturing = event->state->pending_capture;
    }
    if (capturing == stream) return npuSuccess;
    if (capturing != nullptr) {
      refuse_if_capturing(capturing, "npuStreamWaitEvent on another stream for an event recorded in the capture");
      return npuErrorStreamCaptureUnsupported;
    }
  }
  auto recorded = event_version(event, /*bump=*/false);
  if (recorded.second == 0) return npuSuccess;  // never recorded: nothing to wait for
  enqueue(stream, [state = recorded.first, version = recorded.second] {
    std::unique_lock<std::mutex> lock(state->mutex);
    state->reached.wait(lock, [&] { return state->completed >= version; });
  });
  return npuSuccess;
}

// The host cannot wait for or ask about a record that an open capture holds: it has
// not been launched. Refused, spoiling that capture.
static npuError_t refuse_if_pending_capture(npuEvent_t event, const char* call) {
  npuStream_t capturing = nullptr;
  {
    std::lock_guard<std::mutex> lock(event->state->mutex);
    capturing = event->state->pending_capture;
  }
  if (capturing == nullptr) return npuSuccess;
  refuse_if_capturing(capturing, call);
  return npuErrorStreamCaptureUnsupported;
}

npuError_t npuEventQuery(npuEvent_t event) {
  if (event == nullptr) return npuErrorInvalidValue;
  if (refuse_if_pending_capture(event, "npuEventQuery") != npuSuccess) return npuErrorStreamCaptureUnsupported;
  std::lock_guard<std::mutex> lock(event->state->mutex);
  return event->state->completed >= event->state->recorded ? npuSuccess : npuErrorNotReady;
}

npuError_t npuEventSynchronize(npuEvent_t event) {
  if (event == nullptr) return npuErrorInvalidValue;
  if (refuse_if_pending_capture(event, "npuEventSynchronize") != npuSuccess) return npuErrorStreamCaptureUnsupported;
  if (skip_host_waits()) return npuSuccess;
  EventState& s = *event->state;
  std::unique_lock<std::mutex> lock(s.mutex);
  const uint64_t target = s.recorded;
  s.reached.wait(lock, [&] { return s.completed >= target; });
  return npuSuccess;
}

npuError_t npuEventElapsedTime(float* ms, npuEvent_t start, npuEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return npuErrorInvalidValue;
  if (!start->timing || !end->timing) return npuErrorInvalidValue;
  std::scoped_lock lock(start->state->mutex, end->state->mutex);
  for (const EventState* s : {start->state.get(), end->state.get()}) {
    if (s->recorded == 0) return npuErrorInvalidValue;
    if (s->completed < s->recorded) return npuErrorNotReady;
  }
  *ms = std::chrono::duration<float, std::milli>(end->state->when - start->state->when).count();
  return npuSuccess;
}

npuError_t npuTestHoldStream(npuStream_t stream, npuHold_t* hold) {
  if (stream == nullptr || hold == nullptr) return npuErrorInvalidValue;
  if (refuse_if_capturing(stream, "npuTestHoldStream") != npuSuccess) return npuErrorStreamCaptureUnsupported;
  // Never freed (a few bytes per test), so releasing late or twice is harmless.
  npuHold_t h = new npuHold_();
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    all_holds().push_back(h);
  }
  enqueue(stream, [h] {
    std::unique_lock<std::mutex> lock(h->mutex);
    h->released_cv.wait(lock, [&] { return h->released; });
  });
  *hold = h;
  return npuSuccess;
}

npuError_t npuTestRelease(npuHold_t hold) {
  if (hold == nullptr) return npuErrorInvalidValue;
  {
    std::lock_guard<std::mutex> lock(hold->mutex);
    hold->released = true;
  }
  hold->released_cv.notify_all();
  return npuSuccess;
}
