#include "launch.h"

#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <memory>

namespace backplane::npu {
namespace {

struct Task {
  npuStream_t stream;
  std::string what;
  std::function<void()> fn;
};

void run_task(void* data) {
  std::unique_ptr<Task> task(static_cast<Task*>(data));
  try {
    task->fn();
  } catch (const c10::Error& e) {
    npuStreamSetError(task->stream, (task->what + ": " + e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    npuStreamSetError(task->stream, (task->what + ": " + e.what()).c_str());
  }
}

}  // namespace

void launch_on(const c10::Stream& stream, std::string what, std::function<void()> fn) {
  npuStream_t s = native(stream);
  auto task = std::make_unique<Task>(Task{s, std::move(what), std::move(fn)});
  check(npuLaunchHostFunc(s, &run_task, task.get()), "queueing work on a stream");
  task.release();  // run_task owns it now
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
