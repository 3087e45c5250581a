#include "collectives/stream_work.h"

#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>

namespace backplane::npu::collectives {

void CollectiveStatus::fail(std::string message) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (message_.empty()) message_ = message.empty() ? "unknown failure" : std::move(message);
}

bool CollectiveStatus::failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !message_.empty();
}

std::string CollectiveStatus::message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return message_;
}

StreamWork::StreamWork(c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveStatus> status,
                       npuEvent_t done, const c10::Stream& comm, bool host_waited)
    : c10d::Work(-1, type),
      outputs_(std::move(outputs)),
      status_(std::move(status)),
      done_(done),
      comm_(comm),
      host_waited_(host_waited) {
  std::vector<c10::Device> devices;
  if (!host_waited_) devices.push_back(comm_.device());
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors(), devices);
  // Completed now, with its events recorded on the communication stream (the current
  // stream inside this guard): whoever waits on the future waits on the device.
  c10::OptionalStreamGuard guard;
  if (!host_waited_) guard.reset_stream(comm_);
  future_->markCompleted(c10::IValue(outputs_));
}

StreamWork::~StreamWork() { npuEventDestroy(done_); }

bool StreamWork::isCompleted() { return host_waited_ || npuEventQuery(done_) == npuSuccess; }

bool StreamWork::isSuccess() const { return !status_->failed(); }

std::exception_ptr StreamWork::exception() const {
  if (!status_->failed()) return nullptr;
  return std::make_exception_ptr(std::runtime_error(status_->message()));
}

void StreamWork::throw_if_failed() const { TORCH_CHECK(!status_->failed(), status_->message()); }

bool StreamWork::wait(std::chrono::milliseconds /*timeout*/) {
  throw_if_failed();
  if (!host_waited_) {
    const c10::Stream current = current_stream(comm_.device_index());
    check(npuStreamWaitEvent(native(current), done_), "making the current stream wait for a collective");
  }
  return true;
}

void StreamWork::synchronize() { wait(); }

std::vector<at::Tensor> StreamWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> StreamWork::getFuture() { return future_; }

}  // namespace backplane::npu::collectives
