// The npu's c10d backend: the one file pair a vendor replaces with their collective
// library (docs/adding-a-device.md, "torch.distributed").
//
// Each collective runs on a communication stream of its own, after the work queued on
// the caller's current stream (an event orders them), and returns at once with a
// StreamWork whose wait() makes the current stream wait for it; so DDP's bucket
// all-reduce runs while the backward goes on. On that stream the collective copies the
// npu tensors to host buffers, runs `host` (a c10d backend over host memory: gloo) there,
// waits for it and copies the results back: a real device's library reads device
// memory instead, and the copies go.
//
// Limits:
// - One npu device per group and process: the group binds to the device of its first
//   collective (the current device for CPU tensors); tensors on another npu device are
//   refused. Its collectives reach `host` in the order they are issued (one stream).
// - The communication stream is one of the device's pool streams (as NCCL's come from
//   CUDA's pool): a user stream from the same pool may share it and then waits behind it.
// - CPU tensors, and every collective of a group made `synchronous`: the host waits.
// - A collective that fails on its stream (a peer gone, the transport's timeout) sets the
//   error on the communication stream and on the stream that issued it: the next
//   synchronize of either raises it; work.wait() raises it if it is known by then.
// - Reduce ops: gloo's SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR; AVG is a SUM divided by
//   the group size (floating point only); PREMUL_SUM is refused. Dense tensors only.
// - send and recv each wait on the stream until the transport has finished them: a
//   pattern where both ranks send before either receives waits for the group's timeout.
#pragma once

#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace backplane::npu::collectives {

class Staging;

class HostStagedBackend final : public c10d::Backend {
 public:
  HostStagedBackend(c10::intrusive_ptr<c10d::Backend> host, std::string name, bool synchronous);

  const std::string getBackendName() const override { return name_; }
  // The communication stream, once the first collective has bound the group to a device.
  std::optional<c10::Stream> comm_stream() const;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Runs body(staging) on the communication stream after the current stream's work;
  // `inputs` are read, `outputs` written (both checked here, on the caller's thread).
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* collective,
                                         const std::vector<at::Tensor>& inputs,
                                         const std::vector<at::Tensor>& outputs,
                                         std::function<void(Staging&)> body);
  // A reduction into `tensors` themselves: run(host, buffers, options) on the stream;
  // AVG's division where `holds_result`.
  template <class Opts, class Run>
  c10::intrusive_ptr<c10d::Work> reduce_in_place(c10d::OpType type, const char* collective,
                                                 const std::vector<at::Tensor>& tensors, const Opts& opts,
                                                 bool holds_result, Run run);
  c10::Stream bind(const char* collective, const std::vector<at::Tensor>& tensors, bool* on_npu);
  // The op gloo runs for `op`, and whether its results are then divided by the size (AVG).
  std::pair<c10d::ReduceOp, bool> host_op(const char* collective, const c10d::ReduceOp& op,
                                          const std::vector<at::Tensor>& tensors) const;

  c10::intrusive_ptr<c10d::Backend> host_;
  std::string name_;
  bool synchronous_;
  mutable std::mutex mutex_;
  std::optional<c10::Stream> comm_;
};

}  // namespace backplane::npu::collectives
