// StreamWork: c10d's Work for a collective queued on a communication stream. Waiting on
// it makes the caller's current stream wait for the collective (an event), not the host,
// as CUDA's NCCL work does; its Future is completed at once with events on that stream,
// so DDP's future.wait() and then() callbacks run on the calling thread, never on the
// stream's worker (which must never need the GIL).
#pragma once

#include "device/npu_stream.h"

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace backplane::npu::collectives {

// How a queued collective ended: set by the worker that ran it, read by the caller.
class CollectiveStatus {
 public:
  void fail(std::string message);
  bool failed() const;
  std::string message() const;  // empty while it has not failed

 private:
  mutable std::mutex mutex_;
  std::string message_;
};

class StreamWork final : public c10d::Work {
 public:
  // `done` (owned) is recorded on `comm` after the collective; `host_waited` when the
  // host already waited for it (CPU tensors, or a group made synchronous), so wait()
  // only reports the outcome.
  StreamWork(c10d::OpType type, std::vector<at::Tensor> outputs, std::shared_ptr<CollectiveStatus> status,
             npuEvent_t done, const c10::Stream& comm, bool host_waited);
  ~StreamWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // The current stream of the device waits for the collective; the host does not. Raises
  // at once if the collective has failed already (later failures reach the streams: see
  // process_group.h). The timeout is the transport's (gloo's), not this wait's.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void throw_if_failed() const;

  std::vector<at::Tensor> outputs_;
  std::shared_ptr<CollectiveStatus> status_;
  npuEvent_t done_;
  c10::Stream comm_;
  bool host_waited_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace backplane::npu::collectives
