"""Run by tests/python/distributed/test_dtensor_sharding.py under torch.distributed.run, 2 processes,
gloo on the CPU: every registry op, on its registry samples, under every placement its
generated rule allows, equals the op on full tensors, with no collective inside the call;
gradients through DTensors equal full-tensor ones; a DTensor program with backplane ops
compiles. Prints one summary line per part; any mismatch raises (a non-zero exit).

    PYTHONPATH=python:. python -m torch.distributed.run --nproc-per-node 2 tests/python/distributed/dtensor_checks.py
"""
from __future__ import annotations

from typing import NoReturn

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.debug import CommDebugMode

import backplane
from backplane.sharding import strategies
from models.distributed import finish

backplane.load("cpu")
DTYPE = torch.float64  # sums over ranks in another order differ only by float64 rounding


def as_dtensor(full: torch.Tensor, placement, mesh, rank: int) -> DTensor:
    """full as a DTensor in `placement`; Partial ones get unequal parts per rank."""
    if isinstance(placement, Partial):
        if placement.reduce_op == "sum":
            local = full * (0.25 if rank == 0 else 0.75)
        else:  # avg: parts that differ, averaging to full
            local = full + (0.5 if rank == 0 else -0.5)
        return DTensor.from_local(local, mesh, [placement], run_check=False)
    return distribute_tensor(full, mesh, [placement])


class _GlobalSpec:
    """What strategies.choices reads of a DTensorSpec: the global shape."""
    def __init__(self, t: torch.Tensor):
        self.shape = t.shape


def global_specs(values: dict, rule) -> dict:
    return {n: _GlobalSpec(v) if n in rule.tensor_args else v for n, v in values.items()}


def op_cases(op, rule, mesh, rank):
    """(choice, sample values, outputs) per sample x allowed placement choice."""
    packet = backplane.torch_op(op.name)
    for index in range(len(op.samples)):
        values = backplane.sample_values(op, index, dtype=DTYPE)
        shapes = [tuple(s) for s in _shapes(packet, values)]
        for outputs, inputs in strategies.choices(rule, global_specs(values, rule), shapes):
            yield index, values, outputs, inputs


def _shapes(packet, values):
    meta = {n: v.to("meta") if isinstance(v, torch.Tensor) else v for n, v in values.items()}
    result = packet(**meta)
    if result is None:
        return []
    return [r.shape for r in (result if isinstance(result, (tuple, list)) else (result,))]


def check_forward(mesh, rank) -> int:
    checked = 0
    for op in backplane.ops():
        rule = backplane.sharding.rules()[f"{op.namespace}::{op.name.rpartition('::')[2]}"]
        if rule.kind == "none":
            continue
        packet = backplane.torch_op(op.name)
        for index, values, outputs, inputs in op_cases(op, rule, mesh, rank):
            expected_args = {n: v.clone() if isinstance(v, torch.Tensor) else v for n, v in values.items()}
            expected = packet(**expected_args)
            dargs = {n: as_dtensor(v, inputs[n], mesh, rank) if n in inputs else v for n, v in values.items()}
            with CommDebugMode() as comms:
                got = packet(**dargs)
            case = f"{rule.op} sample {index} inputs {inputs}"
            if comms.get_total_counts() != 0:
                raise AssertionError(f"{case}: {comms.get_total_counts()} collectives inside the call, expected none: "
                                     f"{comms.get_comm_counts()}")
            if rule.written:
                got, expected = dargs[rule.written], expected_args[rule.written]
                outputs = [inputs[rule.written]]
            got = got if isinstance(got, (tuple, list)) else (got,)
            expected = expected if isinstance(expected, (tuple, list)) else (expected,)
            for g, e, placement in zip(got, expected, outputs):
                if tuple(g.placements) != (placement,):
                    raise AssertionError(f"{case}: output placements {g.placements}, the rule said {placement}")
                torch.testing.assert_close(g.full_tensor(), e, msg=lambda m: f"{case}: {m}")
            checked += 1
    return checked


def check_backward(mesh, rank) -> int:
    """Gradients through DTensors sharded on their first dimension equal full-tensor ones."""
    checked = 0
    for op in backplane.ops():
        rule = backplane.sharding.rules()[f"{op.namespace}::{op.name.rpartition('::')[2]}"]
        if not op.differentiable or rule.kind == "none":
            continue
        packet = backplane.torch_op(op.name)
        values = backplane.sample_values(op, 0, dtype=DTYPE)
        choices = strategies.choices(rule, global_specs(values, rule), [tuple(s) for s in _shapes(packet, values)])
        sharded = [c for c in choices if any(isinstance(p, Shard) for p in c[1].values())]
        for outputs, inputs in sharded[:1] or choices[:1]:
            leaves = {n: values[n].clone().requires_grad_(True) for n in op.differentiable}
            out = packet(**{**values, **leaves})
            weight = torch.randn(out.shape, dtype=DTYPE, generator=torch.Generator().manual_seed(1))
            (out * weight).sum().backward()
            dleaves = {n: as_dtensor(values[n], inputs[n], mesh, rank).detach().requires_grad_(True)
                       for n in op.differentiable}
            dargs = {n: as_dtensor(v, inputs[n], mesh, rank) if n in inputs else v for n, v in values.items()}
            dout = packet(**{**dargs, **dleaves})
            (dout.full_tensor() * weight).sum().backward()
            for n in op.differentiable:
                torch.testing.assert_close(dleaves[n].grad.full_tensor(), leaves[n].grad,
                                           msg=lambda m: f"{rule.op} gradient of {n} with inputs {inputs}: {m}")
            checked += 1
    return checked


def check_compile(mesh, rank) -> str:
    """A DTensor program of backplane ops under torch.compile equals it in eager, with
    the rows sharded throughout (sequence parallelism's pattern)."""
    def block(x, w):
        h = torch.ops.backplane.rms_norm(x, w)
        return torch.ops.backplane.add(x, torch.ops.backplane.silu_mul(h, h))

    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(8, 16, dtype=DTYPE, generator=g), torch.randn(16, dtype=DTYPE, generator=g)
    dx, dw = distribute_tensor(x, mesh, [Shard(0)]), distribute_tensor(w, mesh, [Replicate()])
    compiled = torch.compile(block, backend="inductor", fullgraph=True)
    got = compiled(dx, dw)
    assert tuple(got.placements) == (Shard(0),), got.placements
    torch.testing.assert_close(got.full_tensor(), block(x, w))
    return "inductor"


def main() -> NoReturn:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (dist.get_world_size(),))
    forward = check_forward(mesh, rank)
    backward = check_backward(mesh, rank)
    backend = check_compile(mesh, rank)
    if rank == 0:
        print(f"forward: {forward} op x sample x placement cases equal the full-tensor op, none with a collective")
        print(f"backward: {backward} ops' gradients through DTensors equal the full-tensor ones")
        print(f"compile: a DTensor program of backplane ops under torch.compile ({backend}) equals eager")
    finish(0, torch.device("cpu"))  # not a plain exit: models.distributed.finish says why


if __name__ == "__main__":
    main()
