#include "device/launch.h"

#include "device/kernel_timer.h"

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <memory>
#include <mutex>
#include <vector>

namespace backplane::npu {
namespace {

struct Task {
  npuStream_t stream;
  std::string what;
  std::function<void()> fn;
  c10::DeviceIndex device;
  c10::StreamId stream_id;
  uint64_t op;  // the profiled op that queued it (0: none or not profiling)
};

// Tasks that have run, with what they captured. A worker never destroys them: the last
// reference to a tensor that has a Python object calls decref_pyobject, which takes the
// GIL, and the thread holding the GIL may be waiting for this very worker (a copy to
// the host synchronizes with the GIL held; Inductor's first compile does exactly that).
// The threads that queue or wait for work destroy them instead (release_finished_work).
std::mutex g_finished_mutex;
std::vector<std::unique_ptr<Task>>& finished_tasks() {
  static auto* tasks = new std::vector<std::unique_ptr<Task>>();  // never destroyed: workers outlive statics
  return *tasks;
}

// Runs once, or at every replay of a graph that captured it (npu_graph.h); the driver
// calls release_task when it no longer needs the task.
void run_task(void* data) {
  Task* task = static_cast<Task*>(data);
  const KernelTimer* timer = kernel_timer();
  const int64_t start = timer ? timer->now_ns() : 0;
  try {
    task->fn();
  } catch (const c10::Error& e) {
    npuStreamSetError(task->stream, (task->what + ": " + e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    npuStreamSetError(task->stream, (task->what + ": " + e.what()).c_str());
  }
  if (timer) timer->record(task->what, task->device, task->stream_id, task->op, start, timer->now_ns());
}

void release_task(void* data) {
  std::unique_ptr<Task> task(static_cast<Task*>(data));
  std::lock_guard<std::mutex> lock(g_finished_mutex);
  finished_tasks().push_back(std::move(task));
}

thread_local int t_release_deferred = 0;  // ReleaseDeferred scopes open on this thread

}  // namespace

ReleaseDeferred::ReleaseDeferred() { ++t_release_deferred; }
ReleaseDeferred::~ReleaseDeferred() { --t_release_deferred; }

void release_finished_work() {
  if (t_release_deferred > 0) return;
  std::vector<std::unique_ptr<Task>> done;
  {
    std::lock_guard<std::mutex> lock(g_finished_mutex);
    done.swap(finished_tasks());
  }
  // Destroyed here, outside the lock: a tensor's deleter may queue or wait for work and
  // so come back here.
}

void launch_on(const c10::Stream& stream, std::string what, std::function<void()> fn) {
  release_finished_work();
  npuStream_t s = native(stream);
  const KernelTimer* timer = kernel_timer();
  const uint64_t op = timer ? timer->current_op() : 0;
  auto task = std::make_unique<Task>(Task{s, std::move(what), std::move(fn), stream.device_index(), stream.id(), op});
  check(npuLaunchHostTask(s, &run_task, &release_task, task.get()), "queueing work on a stream");
  task.release();  // the driver owns it now
}

void launch(c10::DeviceIndex index, std::string what, std::function<void()> fn) {
  launch_on(current_stream(index), std::move(what), std::move(fn));
}

at::Tensor host_view(const at::Tensor& t) {
  if (!is_npu(t)) return t;
  at::Tensor view = at::from_blob(npuDevicePtrToHost(t.const_data_ptr()), t.sizes(), t.strides(),
                                  at::TensorOptions().dtype(t.scalar_type()).device(at::kCPU));
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

}  // namespace backplane::npu
