#include "collectives/process_group.h"

#include "collectives/stream_work.h"
#include "device/launch.h"
#include "device/npu_stream.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <memory>
#include <numeric>
#include <utility>

namespace backplane::npu::collectives {

// Host buffers standing in for a collective's tensors, on the communication stream's
// worker: `read` for inputs, `write` for outputs, `update` for both; copy_back() writes
// the results home. CPU tensors are copied too: gloo's threads then only ever hold
// buffers made here, never a tensor with a Python object, whose last reference dropped
// on their thread would need the GIL.
class Staging {
 public:
  at::Tensor read(const at::Tensor& t) { return host_view(t).clone(at::MemoryFormat::Contiguous); }
  at::Tensor write(const at::Tensor& t) {
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).memory_format(at::MemoryFormat::Contiguous));
    home_.emplace_back(t, host);
    return host;
  }
  at::Tensor update(const at::Tensor& t) {
    at::Tensor host = host_view(t).clone(at::MemoryFormat::Contiguous);
    home_.emplace_back(t, host);
    return host;
  }
  std::vector<at::Tensor> read(const std::vector<at::Tensor>& ts) { return each(ts, &Staging::read); }
  std::vector<at::Tensor> write(const std::vector<at::Tensor>& ts) { return each(ts, &Staging::write); }
  std::vector<at::Tensor> update(const std::vector<at::Tensor>& ts) { return each(ts, &Staging::update); }
  // A list per rank (gather's outputs, scatter's inputs).
  using Lists = std::vector<std::vector<at::Tensor>>;
  Lists read(const Lists& lists) { return each(lists, &Staging::read); }
  Lists write(const Lists& lists) { return each(lists, &Staging::write); }
  void copy_back() {
    for (auto& [home, host] : home_) host_view(home).copy_(host);
  }

 private:
  template <class T>
  std::vector<T> each(const std::vector<T>& items, T (Staging::*f)(const T&)) {
    std::vector<T> out;
    out.reserve(items.size());
    for (const auto& item : items) out.push_back((this->*f)(item));
    return out;
  }
  std::vector<std::pair<at::Tensor, at::Tensor>> home_;
};

namespace {

using Op = c10d::ReduceOp;
constexpr Op::RedOpType kHostOps[] = {Op::SUM, Op::PRODUCT, Op::MIN, Op::MAX, Op::BAND, Op::BOR, Op::BXOR};

const char* op_name(Op::RedOpType op) {
  switch (op) {
    case Op::SUM: return "SUM";
    case Op::AVG: return "AVG";
    case Op::PRODUCT: return "PRODUCT";
    case Op::MIN: return "MIN";
    case Op::MAX: return "MAX";
    case Op::BAND: return "BAND";
    case Op::BOR: return "BOR";
    case Op::BXOR: return "BXOR";
    case Op::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

std::string dtype_name(at::ScalarType t) { return std::string("torch.") + std::string(c10::getDtypeNames(t).first); }

void finish(const c10::intrusive_ptr<c10d::Work>& work) {
  if (work) work->wait();
}

void divide(bool average, const std::vector<at::Tensor>& tensors, int size) {
  if (!average) return;
  for (const auto& t : tensors) t.div_(size);
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

}  // namespace

HostStagedBackend::HostStagedBackend(c10::intrusive_ptr<c10d::Backend> host, std::string name, bool synchronous)
    : c10d::Backend(host->getRank(), host->getSize()), host_(std::move(host)), name_(std::move(name)),
      synchronous_(synchronous) {}

std::optional<c10::Stream> HostStagedBackend::comm_stream() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comm_;
}

c10::Stream HostStagedBackend::bind(const char* collective, const std::vector<at::Tensor>& tensors, bool* on_npu) {
  std::optional<c10::Device> device;
  bool cpu = false;
  for (const auto& t : tensors) {
    TORCH_CHECK(t.layout() == at::kStrided, name_, ": ", collective, " takes dense (strided) tensors; got one with layout ",
                t.layout());
    if (t.device().is_cpu()) {
      cpu = true;
    } else {
      TORCH_CHECK(is_npu(t), name_, ": ", collective, " takes npu or CPU tensors; got one on ", t.device());
      TORCH_CHECK(!device || *device == t.device(), name_, ": ", collective,
                  " takes the tensors of one device; got tensors on ", *device, " and ", t.device());
      device = t.device();
    }
  }
  TORCH_CHECK(!(cpu && device), name_, ": ", collective, " takes npu tensors or CPU tensors; got both (", *device,
              " and cpu)");
  *on_npu = device.has_value();
  const c10::DeviceIndex index = device ? device->index() : current_device();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!comm_) comm_ = pool_stream(index);
  TORCH_CHECK(!device || comm_->device_index() == index, name_, ": ", collective, " got tensors on ", *device,
              "; this group runs on npu:", int(comm_->device_index()),
              " (the device of its first collective): one npu device per group and process");
  return *comm_;
}

std::pair<c10d::ReduceOp, bool> HostStagedBackend::host_op(const char* collective, const c10d::ReduceOp& op,
                                                           const std::vector<at::Tensor>& tensors) const {
  for (Op::RedOpType supported : kHostOps)
    if (op.op_ == supported) return {op, false};
  if (op.op_ == Op::AVG) {
    for (const auto& t : tensors)
      TORCH_CHECK_NOT_IMPLEMENTED(t.is_floating_point() || t.is_complex(), name_, ": ", collective,
                                  " with ReduceOp.AVG needs floating-point tensors; got ", dtype_name(t.scalar_type()),
                                  " (AVG runs as SUM, then a division by the group size)");
    return {Op(Op::SUM), true};
  }
  std::string supported;
  for (Op::RedOpType k : kHostOps) supported += std::string(op_name(k)) + ", ";
  TORCH_CHECK_NOT_IMPLEMENTED(false, name_, ": ", collective, " does not support ReduceOp.", op_name(op.op_),
                              "; supported: ", supported, "AVG");
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::enqueue(c10d::OpType type, const char* collective,
                                                          const std::vector<at::Tensor>& inputs,
                                                          const std::vector<at::Tensor>& outputs,
                                                          std::function<void(Staging&)> body) {
  std::vector<at::Tensor> all(inputs);
  all.insert(all.end(), outputs.begin(), outputs.end());
  bool on_npu = false;
  const c10::Stream comm = bind(collective, all, &on_npu);
  npuStream_t issuing = nullptr;
  if (on_npu) {  // the collective starts after the work queued so far on the current stream
    const c10::Stream current = current_stream(comm.device_index());
    issuing = native(current);
    npuEvent_t ready = nullptr;
    check(npuEventCreate(&ready, npuEventDefault), "creating an event");
    check(npuEventRecord(ready, issuing), "recording an event");
    check(npuStreamWaitEvent(native(comm), ready), "making the communication stream wait");
    npuEventDestroy(ready);  // safe while the wait refers to it
  }
  auto status = std::make_shared<CollectiveStatus>();
  std::string what = name_ + ": " + collective;
  // The tensors ride in the task, so their memory stays allocated until it has run;
  // launch releases them on a thread that queues or waits, never on the worker.
  launch_on(comm, what, [body = std::move(body), status, issuing, what, keep = std::move(all)]() {
    try {
      Staging staging;
      body(staging);
      staging.copy_back();
    } catch (const std::exception& e) {
      const std::string message = what + " failed: " + (dynamic_cast<const c10::Error*>(&e)
                                                            ? static_cast<const c10::Error&>(e).what_without_backtrace()
                                                            : e.what());
      status->fail(message);
      if (issuing != nullptr) npuStreamSetError(issuing, message.c_str());
      throw;  // and the communication stream's error, set by launch
    }
  });
  npuEvent_t done = nullptr;
  check(npuEventCreate(&done, npuEventDefault), "creating an event");
  check(npuEventRecord(done, native(comm)), "recording an event");
  const bool host_wait = !on_npu || synchronous_;
  if (host_wait) {
    // A failure is reported through `status` below; the stream's copy of it stays for
    // its next synchronize, as for any failed task.
    npuEventSynchronize(done);
    release_finished_work();
    TORCH_CHECK(!status->failed(), status->message());
  }
  return c10::make_intrusive<StreamWork>(type, outputs, status, done, comm, host_wait);
}

// --- the collectives ----------------------------------------------------------------------
c10::intrusive_ptr<c10d::Work> HostStagedBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  return enqueue(c10d::OpType::BROADCAST, "broadcast", {}, tensors, [host = host_, tensors, opts](Staging& s) {
    auto buffers = s.update(tensors);
    finish(host->broadcast(buffers, opts));
  });
}

template <class Opts, class Run>
c10::intrusive_ptr<c10d::Work> HostStagedBackend::reduce_in_place(c10d::OpType type, const char* collective,
                                                                  const std::vector<at::Tensor>& tensors,
                                                                  const Opts& opts, bool holds_result, Run run) {
  auto [op, average] = host_op(collective, opts.reduceOp, tensors);
  Opts host_opts = opts;
  host_opts.reduceOp = op;
  return enqueue(type, collective, {}, tensors,
                 [host = host_, tensors, host_opts, run, average = average && holds_result, size = getSize()](
                     Staging& s) {
                   auto buffers = s.update(tensors);
                   finish(run(*host, buffers, host_opts));
                   divide(average, buffers, size);
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  return reduce_in_place(c10d::OpType::ALLREDUCE, "all_reduce", tensors, opts, true,
                         [](c10d::Backend& host, std::vector<at::Tensor>& buffers, const auto& o) {
                           return host.allreduce(buffers, o);
                         });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return reduce_in_place(c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced", tensors, opts, true,
                         [](c10d::Backend& host, std::vector<at::Tensor>& buffers, const auto& o) {
                           return host.allreduce_coalesced(buffers, o);
                         });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  // Only the root's buffer holds the result; elsewhere it is left as gloo leaves it.
  return reduce_in_place(c10d::OpType::REDUCE, "reduce", tensors, opts, opts.rootRank == getRank(),
                         [](c10d::Backend& host, std::vector<at::Tensor>& buffers, const auto& o) {
                           return host.reduce(buffers, o);
                         });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  return enqueue(c10d::OpType::ALLGATHER, "all_gather", inputs, flat(outputs),
                 [host = host_, outputs, inputs, opts](Staging& s) {
                   auto in = s.read(inputs);
                   auto out = s.write(outputs);
                   finish(host->allgather(out, in, opts));
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(output.numel() == input.numel() * getSize(), name_,
              ": all_gather_into_tensor expected an output of ", input.numel() * getSize(),
              " elements (the input's ", input.numel(), " times the group size ", getSize(), "); got ", output.numel());
  return enqueue(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {input}, {output},
                 [host = host_, output, input, opts](Staging& s) {
                   at::Tensor in = s.read(input), out = s.write(output);
                   finish(host->_allgather_base(out, in, opts));
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), name_, ": all_gather_into_tensor_coalesced expected as many outputs as "
              "inputs; got ", outputs.size(), " and ", inputs.size());
  return enqueue(c10d::OpType::COALESCED  /* its own OpType is torch >= 2.12 */, "all_gather_into_tensor_coalesced", inputs, outputs,
                 [host = host_, outputs, inputs, opts](Staging& s) {
                   for (size_t i = 0; i < inputs.size(); ++i) {
                     at::Tensor in = s.read(inputs[i]), out = s.write(outputs[i]);
                     finish(host->_allgather_base(out, in, opts));
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  return enqueue(c10d::OpType::GATHER, "gather", inputs, flat(outputs),
                 [host = host_, outputs, inputs, opts](Staging& s) {
                   auto in = s.read(inputs);
                   auto out = s.write(outputs);
                   finish(host->gather(out, in, opts));
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  return enqueue(c10d::OpType::SCATTER, "scatter", flat(inputs), outputs,
                 [host = host_, outputs, inputs, opts](Staging& s) {
                   auto out = s.write(outputs);
                   auto in = s.read(inputs);
                   finish(host->scatter(out, in, opts));
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  auto [op, average] = host_op("reduce_scatter", opts.reduceOp, outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = op;
  return enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", flat(inputs), outputs,
                 [host = host_, outputs, inputs, host_opts, average = average, size = getSize()](Staging& s) {
                   auto out = s.write(outputs);
                   auto in = s.read(inputs);
                   finish(host->reduce_scatter(out, in, host_opts));
                   divide(average, out, size);
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * getSize(), name_,
              ": reduce_scatter_tensor expected an input of ", output.numel() * getSize(),
              " elements (the output's ", output.numel(), " times the group size ", getSize(), "); got ", input.numel());
  auto [op, average] = host_op("reduce_scatter_tensor", opts.reduceOp, {output});
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = op;
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {input}, {output},
                 [host = host_, output, input, host_opts, average = average, size = getSize()](Staging& s) {
                   at::Tensor in = s.read(input), out = s.write(output);
                   finish(host->_reduce_scatter_base(out, in, host_opts));
                   divide(average, {out}, size);
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), name_, ": reduce_scatter_tensor_coalesced expected as many outputs as "
              "inputs; got ", outputs.size(), " and ", inputs.size());
  auto [op, average] = host_op("reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
  c10d::ReduceScatterOptions host_opts = opts;
  host_opts.reduceOp = op;
  return enqueue(c10d::OpType::COALESCED  /* its own OpType is torch >= 2.12 */, "reduce_scatter_tensor_coalesced", inputs, outputs,
                 [host = host_, outputs, inputs, host_opts, average = average, size = getSize()](Staging& s) {
                   for (size_t i = 0; i < inputs.size(); ++i) {
                     at::Tensor in = s.read(inputs[i]), out = s.write(outputs[i]);
                     finish(host->_reduce_scatter_base(out, in, host_opts));
                     divide(average, {out}, size);
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_splits,
                                                                std::vector<int64_t>& input_splits,
                                                                const c10d::AllToAllOptions& opts) {
  // Checked here, where a mistake raises at the call; gloo would find it on the stream.
  const auto check_splits = [&](const char* which, const at::Tensor& t, const std::vector<int64_t>& splits) {
    if (splits.empty()) {
      TORCH_CHECK(t.dim() > 0 && t.size(0) % getSize() == 0, name_, ": all_to_all_single with no ", which,
                  "_split_sizes expected the ", which, "'s first dimension to divide by the group size ", getSize(),
                  "; got shape ", t.sizes());
      return;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == getSize(), name_, ": all_to_all_single expected ", getSize(), " ",
                which, "_split_sizes (one per rank); got ", splits.size());
    const int64_t total = std::accumulate(splits.begin(), splits.end(), int64_t{0});
    TORCH_CHECK(t.dim() > 0 && total == t.size(0), name_, ": all_to_all_single expected ", which,
                "_split_sizes to add up to the ", which, "'s first dimension ", (t.dim() > 0 ? t.size(0) : 0),
                "; they add up to ", total);
  };
  check_splits("output", output, output_splits);
  check_splits("input", input, input_splits);
  return enqueue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {input}, {output},
                 [host = host_, output, input, output_splits, input_splits, opts](Staging& s) mutable {
                   at::Tensor in = s.read(input), out = s.write(output);
                   finish(host->alltoall_base(out, in, output_splits, input_splits, opts));
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(), name_,
              ": all_to_all expected one input and one output per rank (", getSize(), "); got ", inputs.size(),
              " inputs and ", outputs.size(), " outputs");
  // One flat buffer a side: every tensor in the first input's dtype (Python's dist.all_to_all
  // refuses mixed dtypes before this; a C++ caller reaches it).
  const auto check_dtypes = [&](const std::vector<at::Tensor>& tensors, const char* got) {
    for (const auto& t : tensors) {
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), name_, ": all_to_all expected every tensor in ",
                  inputs[0].scalar_type(), "; got ", got, t.scalar_type());
    }
  };
  check_dtypes(inputs, "");
  check_dtypes(outputs, "an output in ");
  // Through gloo's all_to_all_single on flat buffers: its list form is torch >= 2.12 (and
  // takes equal sizes only), alltoall_base with splits is on every release we support.
  return enqueue(c10d::OpType::ALLTOALL, "all_to_all", inputs, outputs,
                 [host = host_, outputs, inputs, opts](Staging& s) {
                   auto in = s.read(inputs);
                   auto out = s.write(outputs);
                   std::vector<at::Tensor> flat;
                   std::vector<int64_t> input_splits, output_splits;
                   for (const auto& t : in) {
                     flat.push_back(t.reshape({-1}));
                     input_splits.push_back(t.numel());
                   }
                   for (const auto& t : out) output_splits.push_back(t.numel());
                   at::Tensor send = at::cat(flat);
                   at::Tensor receive = at::empty(
                       {std::accumulate(output_splits.begin(), output_splits.end(), int64_t{0})}, send.options());
                   // gloo takes the split vectors by reference and may move them: read out's own sizes after.
                   finish(host->alltoall_base(receive, send, output_splits, input_splits, opts));
                   int64_t offset = 0;
                   for (auto& t : out) {
                     t.copy_(receive.narrow(0, offset, t.numel()).reshape(t.sizes()));
                     offset += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return enqueue(c10d::OpType::SEND, "send", tensors, {}, [host = host_, tensors, dst, tag](Staging& s) {
    auto buffers = s.read(tensors);
    finish(host->send(buffers, dst, tag));
  });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return enqueue(c10d::OpType::RECV, "recv", {}, tensors, [host = host_, tensors, src, tag](Staging& s) {
    auto buffers = s.write(tensors);
    finish(host->recv(buffers, src, tag));
  });
}

c10::intrusive_ptr<c10d::Work> HostStagedBackend::barrier(const c10d::BarrierOptions& /*opts*/) {
  // On the communication stream, so that it comes after the collectives issued before it;
  // the host waits (no tensors: enqueue treats it as CPU work).
  return enqueue(c10d::OpType::BARRIER, "barrier", {}, {},
                 [host = host_](Staging&) { finish(host->barrier(c10d::BarrierOptions())); });
}

}  // namespace backplane::npu::collectives
