"""HostStagedProcessGroup: a c10d process group for a device with no collective library.

Each collective copies the device's tensors to host buffers, runs on the host with a
c10d backend that reads host memory (gloo), and copies the results back. CPU tensors that
are contiguous go to that backend as they are. The device needs nothing but copies to and
from the host.

It is returned by the creator registered for the device (registration.py); c10d then
uses it in place of its composite group, so it serves CPU tensors too.

Limits:
- Synchronous: a collective finishes before the call returns, and async_op=True gets
  finished work; nothing overlaps with compute.
- Copies run on each tensor's current stream, and the host waits for them, as for any
  copy to or from the host: work already queued on that stream comes first.
- Reduce ops: SUM, PRODUCT, MIN, MAX and the bitwise ops (integers) are gloo's; AVG is a
  SUM divided by the group size (floating point only); PREMUL_SUM is refused.
- Dense (strided) tensors only. The collectives not in SUPPORTED raise NotImplementedError.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as c10d
from torch.futures import Future

# Named as torch.distributed's functions, which messages name too.
SUPPORTED = ("all_reduce", "all_reduce_coalesced", "broadcast", "all_gather", "all_gather_into_tensor",
             "reduce_scatter", "reduce_scatter_tensor", "barrier", "send", "recv")
# The group's methods for the others (older torch's names beside newer ones), each with
# the torch.distributed function that calls it.
REFUSED = {"reduce": "reduce", "gather": "gather", "scatter": "scatter", "alltoall": "all_to_all",
           "all_to_all_single": "all_to_all_single", "alltoall_base": "all_to_all_single",
           "allgather_coalesced": "all_gather_coalesced", "allreduce_sparse": "all_reduce (sparse)",
           "recv_anysource": "recv (from any source)", "monitored_barrier": "monitored_barrier",
           "gather_into_tensor": "gather_single", "gather_single": "gather_single"}

_Op = dist.ReduceOp.RedOpType
_HOST_OPS = (_Op.SUM, _Op.PRODUCT, _Op.MIN, _Op.MAX, _Op.BAND, _Op.BOR, _Op.BXOR)


class _Staging:
    """Host tensors standing in for a collective's tensors: `read` for inputs, `write` for
    outputs, `update` for tensors that are both; copy_back() writes the results home."""

    def __init__(self, backend: str, collective: str):
        self._where = f"{backend}: {collective}"
        self._home: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _usable_as_is(self, t: torch.Tensor) -> bool:
        if t.layout != torch.strided:
            raise NotImplementedError(f"{self._where} takes dense (strided) tensors; got one with layout {t.layout}")
        return t.device.type == "cpu" and t.is_contiguous()

    def read(self, t: torch.Tensor) -> torch.Tensor:
        return t if self._usable_as_is(t) else t.to("cpu", memory_format=torch.contiguous_format)

    def write(self, t: torch.Tensor) -> torch.Tensor:
        if self._usable_as_is(t):
            return t
        host = torch.empty(t.shape, dtype=t.dtype)
        self._home.append((t, host))
        return host

    def update(self, t: torch.Tensor) -> torch.Tensor:
        if self._usable_as_is(t):
            return t
        host = t.to("cpu", memory_format=torch.contiguous_format)
        self._home.append((t, host))
        return host

    def copy_back(self) -> None:
        for t, host in self._home:
            t.copy_(host)


def _pairs(collective: str, outputs, inputs):
    if len(outputs) != len(inputs):
        raise ValueError(f"{collective}: expected as many outputs as inputs; got {len(outputs)} and {len(inputs)}")
    return zip(outputs, inputs)


def _with_op(options_type, op):
    options = options_type()
    options.reduceOp = op
    return options


def _finished(result) -> c10d.Work:
    future = Future()
    future.set_result(result)
    return c10d._create_work_from_future(future)


class HostStagedProcessGroup(dist.ProcessGroup):
    """A process group whose collectives run on `host`, a c10d backend over host memory
    (a ProcessGroupGloo of the same store, rank and size), for tensors of any device that
    copies to and from the host. `backend_name` is what the group reports as its backend."""

    def __init__(self, host, rank: int, world_size: int, backend_name: str):
        super().__init__(rank, world_size)
        self._host = host
        self._backend_name = backend_name
        self._group_name = ""
        self._group_desc = ""

    # c10d's ProcessGroup keeps its name and description in its per-device backends,
    # which this group has none of; c10d sets and reads them through these names.
    def getBackendName(self) -> str:  # noqa: N802
        return self._backend_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    @property
    def group_name(self) -> str:
        # Where c10d's trampoline does not forward setGroupName to Python (older torch),
        # the name c10d registered the group under.
        return self._group_name or dist.distributed_c10d._world.pg_names.get(self, "")

    @property
    def group_desc(self) -> str:
        return self._group_desc

    def __repr__(self) -> str:
        return f"HostStagedProcessGroup({self._backend_name!r}, rank={self.rank()}, size={self.size()})"

    # --- helpers ------------------------------------------------------------------
    def _staging(self, collective: str) -> _Staging:
        return _Staging(self._backend_name, collective)

    def _host_op(self, collective: str, op, tensors) -> tuple[object, bool]:
        """The op gloo runs, and whether results are then divided by the group size (AVG)."""
        kind = op.op if isinstance(op, dist.ReduceOp) else op
        if kind in _HOST_OPS:
            return kind, False
        if kind == _Op.AVG:
            for t in tensors:
                if not (t.is_floating_point() or t.is_complex()):
                    raise NotImplementedError(
                        f"{self._backend_name}: {collective} with ReduceOp.AVG needs floating-point tensors; got "
                        f"{t.dtype} (AVG runs as SUM, then a division by the group size)")
            return _Op.SUM, True
        raise NotImplementedError(
            f"{self._backend_name}: {collective} does not support ReduceOp.{kind.name}; supported: "
            + ", ".join(k.name for k in (*_HOST_OPS, _Op.AVG)))

    def _average(self, divide: bool, tensors) -> None:
        if divide:
            for t in tensors:
                t.div_(self.size())

    @staticmethod
    def _wait(work) -> None:
        if work is not None:
            work.wait()

    # --- collectives ----------------------------------------------------------------
    def _reduce_in_place(self, collective: str, tensors, op, run):
        """A reduction into `tensors` themselves: run(host tensors, host op) starts it on the host."""
        op, divide = self._host_op(collective, op, tensors)
        staging = self._staging(collective)
        host = [staging.update(t) for t in tensors]
        self._wait(run(host, op))
        self._average(divide, host)
        staging.copy_back()
        return _finished(tensors)

    def allreduce(self, tensors, opts=c10d.AllreduceOptions()):
        return self._reduce_in_place("all_reduce", tensors, opts.reduceOp, lambda host, op: self._host.allreduce(
            host, _with_op(c10d.AllreduceOptions, op)))

    def allreduce_coalesced(self, tensors, opts=c10d.AllreduceCoalescedOptions()):
        return self._reduce_in_place("all_reduce_coalesced", tensors, opts.reduceOp,
                                     lambda host, op: self._host.allreduce_coalesced(
                                         host, _with_op(c10d.AllreduceCoalescedOptions, op)))

    def broadcast(self, tensors, opts=c10d.BroadcastOptions()):
        staging = self._staging("broadcast")
        host = [staging.update(t) for t in tensors]
        host_opts = c10d.BroadcastOptions()
        host_opts.rootRank, host_opts.rootTensor = opts.rootRank, opts.rootTensor
        self._wait(self._host.broadcast(host, host_opts))
        staging.copy_back()
        return _finished(tensors)

    def allgather(self, output_lists, inputs, opts=c10d.AllgatherOptions()):
        staging = self._staging("all_gather")
        host_inputs = [staging.read(t) for t in inputs]
        host_outputs = [[staging.write(t) for t in outputs] for outputs in output_lists]
        self._wait(self._host.allgather(host_outputs, host_inputs, c10d.AllgatherOptions()))
        staging.copy_back()
        return _finished(output_lists)

    def all_gather_single(self, output, input, opts=c10d.AllgatherOptions()):  # noqa: A002 (c10d's names)
        staging = self._staging("all_gather_into_tensor")
        host_input = staging.read(input)
        host_output = staging.write(output)
        self._wait(self._host._allgather_base(host_output, host_input, c10d.AllgatherOptions()))
        staging.copy_back()
        return _finished([output])

    def all_gather_single_coalesced(self, outputs, inputs, opts=c10d.AllgatherOptions()):
        for output, input in _pairs("all_gather_into_tensor_coalesced", outputs, inputs):  # noqa: A001
            self.all_gather_single(output, input, opts)
        return _finished(outputs)

    def reduce_scatter(self, outputs, input_lists, opts=c10d.ReduceScatterOptions()):
        op, divide = self._host_op("reduce_scatter", opts.reduceOp, outputs)
        staging = self._staging("reduce_scatter")
        host_inputs = [[staging.read(t) for t in inputs] for inputs in input_lists]
        host_outputs = [staging.write(t) for t in outputs]
        self._wait(self._host.reduce_scatter(host_outputs, host_inputs, _with_op(c10d.ReduceScatterOptions, op)))
        self._average(divide, host_outputs)
        staging.copy_back()
        return _finished(outputs)

    def reduce_scatter_single(self, output, input, opts=c10d.ReduceScatterOptions()):  # noqa: A002
        op, divide = self._host_op("reduce_scatter_tensor", opts.reduceOp, [output])
        staging = self._staging("reduce_scatter_tensor")
        host_input = staging.read(input)
        host_output = staging.write(output)
        self._wait(self._host._reduce_scatter_base(host_output, host_input, _with_op(c10d.ReduceScatterOptions, op)))
        self._average(divide, [host_output])
        staging.copy_back()
        return _finished([output])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=c10d.ReduceScatterOptions()):
        for output, input in _pairs("reduce_scatter_tensor_coalesced", outputs, inputs):  # noqa: A001
            self.reduce_scatter_single(output, input, opts)
        return _finished(outputs)

    def barrier(self, opts=c10d.BarrierOptions()):
        self._wait(self._host.barrier(c10d.BarrierOptions()))
        return _finished([])

    def send(self, tensors, dst: int, tag: int):
        staging = self._staging("send")
        self._wait(self._host.send([staging.read(t) for t in tensors], dst, tag))
        return _finished(tensors)

    def recv(self, tensors, src: int, tag: int):
        staging = self._staging("recv")
        self._wait(self._host.recv([staging.write(t) for t in tensors], src, tag))
        staging.copy_back()
        return _finished(tensors)

    # Older torch calls these by their earlier names.
    _allgather_base = all_gather_single
    allgather_into_tensor_coalesced = all_gather_single_coalesced
    _reduce_scatter_base = reduce_scatter_single
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced


def _refusal(collective: str):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(
            f"{self.getBackendName()}: {collective} is not supported by this host-staged process group; "
            f"supported: {', '.join(SUPPORTED)}")

    return refuse


# Defined, so that c10d calls them here (and fails with the message above) rather than
# looking for a per-device backend this group does not have.
for _method, _collective in REFUSED.items():
    setattr(HostStagedProcessGroup, _method, _refusal(_collective))
