"""The two ranks of test_npu_distributed.py: `python npu_distributed_ranks.py OUT_DIR`.

Spawns two processes, rank r on npu:r, that meet through a file store in OUT_DIR and call
dist.init_process_group() with no backend named (the plugin's c10d backend, collectives/).
Each runs every check below in order and
writes OUT_DIR/rank<r>.json after each: {check name: "ok" or the failure's traceback}. A
check that fails leaves the others to run. The checks compute the same on both ranks, so a
failure stops both at the same point; where it stops only one, the other's next
collective fails after the group's timeout (60 s), and the reports show how far each got.
"""
import json
import os
import re
import sys
import threading
import traceback
import warnings
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD = 2
STEPS = 3
Op = dist.ReduceOp


def same(got, expected):
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def close(got, expected, what):
    torch.testing.assert_close(got.cpu(), expected.cpu(), rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def raises(call, pattern):
    try:
        call()
    except NotImplementedError as e:
        assert re.search(pattern, str(e)), f"expected a message matching {pattern!r}; got {e}"
        return
    raise AssertionError(f"expected NotImplementedError matching {pattern!r}; nothing was raised")


# --- checks: each takes (rank, device) -------------------------------------------------------
def default_group(rank, dev):
    group = dist.group.WORLD
    for device in ("npu", "cpu"):  # one backend, the plugin's (collectives/), for both
        assert group._get_backend(torch.device(device)).name() == "npu_gloo", device
    assert dist.get_backend() == "npu_gloo"
    assert (group.rank(), group.size()) == (rank, WORLD)


def all_reduce_ops(rank, dev):
    base = torch.arange(12.0).view(3, 4)
    mine, other = base + 10 * rank, base + 10 * (1 - rank)
    expected = {Op.SUM: mine + other, Op.AVG: (mine + other) / 2, Op.MAX: torch.maximum(mine, other),
                Op.MIN: torch.minimum(mine, other), Op.PRODUCT: mine * other}
    for op, want in expected.items():
        x = mine.to(dev)
        dist.all_reduce(x, op=op)
        same(x, want)
    for op in (Op.SUM, Op.MAX):
        x = mine.to(torch.int64).to(dev)
        dist.all_reduce(x, op=op)
        same(x, expected[op].to(torch.int64))


def all_reduce_non_contiguous(rank, dev):
    base = torch.arange(20.0).view(4, 5) + 100 * rank
    x = base.to(dev)
    dist.all_reduce(x[:, ::2], op=Op.SUM)  # a strided view: the other columns stay as they were
    want = base.clone()
    want[:, ::2] = torch.arange(20.0).view(4, 5)[:, ::2] * 2 + 100
    same(x, want)
    t = base.t().to(dev)  # a transposed copy: strides (1, 4)
    dist.all_reduce(t, op=Op.MAX)
    same(t, (torch.arange(20.0).view(4, 5) + 100).t())


def all_reduce_waits_for_queued_work(rank, dev):
    x = torch.ones(64, device=dev)
    hold = torch.npu._hold_stream(rank)
    try:
        torch.ops.backplane.scale_(x, float(rank + 2))  # queued behind the hold
        work = dist.all_reduce(x, async_op=True)  # returns at once; on the stream, it waits for the scaling
        assert not work.is_completed()
    finally:
        hold.release()
    work.wait()
    same(x, torch.full((64,), 5.0))


def collectives_leave_the_issuing_stream_free(rank, dev):
    # The communication stream held on both ranks: the collective cannot finish, and work
    # queued after it on the issuing stream runs all the same (a safety timer releases the
    # hold only if it does not, and the check then fails).
    from backplane_npu._collectives import comm_stream

    with torch.npu.stream(comm_stream()):
        hold = torch.npu._hold_stream(rank)
    late = threading.Event()
    safety = threading.Timer(30, lambda: (late.set(), hold.release()))
    safety.start()
    try:
        y = torch.full((8,), float(rank + 1), device=dev)
        work = dist.all_reduce(y, async_op=True)
        z = torch.ones(4, device=dev)
        torch.ops.backplane.scale_(z, 3.0)
        torch.npu.current_stream(rank).synchronize()
        assert not late.is_set(), "the issuing stream waited for the collective"
        same(z, torch.full((4,), 3.0))
        assert not work.is_completed()
    finally:
        safety.cancel()
        if not late.is_set():
            hold.release()
    work.wait()
    same(y, torch.full((8,), 3.0))


def all_reduce_cpu(rank, dev):
    x = torch.full((2, 3), float(rank + 1))
    dist.all_reduce(x)
    same(x, torch.full((2, 3), 3.0))
    y = torch.arange(6.0).view(2, 3).t().contiguous().t() * (rank + 1)  # non-contiguous, on the CPU
    dist.all_reduce(y, op=Op.AVG)
    same(y, torch.arange(6.0).view(2, 3) * 1.5)


def all_reduce_async(rank, dev):
    x = torch.ones(5, device=dev) * (rank + 1)
    work = dist.all_reduce(x, async_op=True)
    assert work.wait()
    same(x, torch.full((5,), 3.0))
    same(work.get_future().value()[0], torch.full((5,), 3.0))


def all_reduce_coalesced(rank, dev):
    a = torch.full((3,), float(rank + 1), device=dev)
    b = (torch.arange(6.0).view(2, 3) * (rank + 1)).to(dev)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # deprecated, and still the way to reach the group
        dist.all_reduce_coalesced([a, b.t()], op=Op.MAX)  # one of them non-contiguous
    same(a, torch.full((3,), 2.0))
    same(b, torch.arange(6.0).view(2, 3) * 2)


def broadcast(rank, dev):
    x = (torch.arange(7.0) * (rank + 1)).to(dev)
    dist.broadcast(x, src=1)
    same(x, torch.arange(7.0) * 2)


def all_gather_list(rank, dev):
    mine = torch.arange(15.0).view(5, 3) + 100 * rank
    outputs = [torch.zeros(3, 5, device=dev).t() for _ in range(WORLD)]  # (5, 3) views, non-contiguous
    dist.all_gather(outputs, mine.to(dev))
    for r, out in enumerate(outputs):
        same(out, torch.arange(15.0).view(5, 3) + 100 * r)


def all_gather_into_tensor(rank, dev):
    mine = torch.arange(15.0).view(3, 5) + 100 * rank
    out = torch.zeros(WORLD * 3, 5, device=dev)
    dist.all_gather_into_tensor(out, mine.to(dev))
    same(out, torch.cat([torch.arange(15.0).view(3, 5) + 100 * r for r in range(WORLD)]))


def reduce_scatter_tensor(rank, dev):
    full = [torch.arange(30.0).view(6, 5) * (r + 1) for r in range(WORLD)]  # rank r's input
    total = full[0] + full[1]
    for op, want in ((Op.SUM, total), (Op.AVG, total / 2)):
        out = torch.zeros(3, 5, device=dev)
        dist.reduce_scatter_tensor(out, full[rank].to(dev), op=op)
        same(out, want.chunk(WORLD)[rank])


def reduce_scatter_list(rank, dev):
    inputs = [(torch.arange(7.0) + 10 * piece) * (1 if rank == 0 else -1) for piece in range(WORLD)]
    out = torch.zeros(7, device=dev)
    dist.reduce_scatter(out, [t.to(dev) for t in inputs], op=Op.MAX)
    same(out, (torch.arange(7.0) + 10 * rank).abs())


def send_recv(rank, dev):
    if rank == 0:
        dist.send(torch.arange(6.0).to(dev), dst=1)
        back = torch.zeros(3, 2, device=dev).t()  # a (2, 3) view
        dist.recv(back, src=1)
        same(back, torch.arange(6.0).view(2, 3) * -1)
    else:
        got = torch.zeros(6, device=dev)
        dist.recv(got, src=0)
        same(got, torch.arange(6.0))
        dist.send((got * -1).view(2, 3), dst=0)


def barrier(rank, dev):
    dist.barrier()


def refusals(rank, dev):
    x = torch.ones(4, device=dev)
    raises(lambda: dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0)),
           r"^npu_gloo: all_reduce does not support ReduceOp.PREMUL_SUM; supported: SUM, PRODUCT, MIN, MAX, BAND, "
           r"BOR, BXOR, AVG$")
    raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32, device=dev), op=Op.AVG),
           r"^npu_gloo: all_reduce with ReduceOp.AVG needs floating-point tensors; got torch.int32")
    same(x, torch.ones(4))  # refused before anything was written


# --- every collective against gloo on the CPU: the same call, CPU tensors, a gloo group -------------
def _inputs(rank):
    g = torch.Generator().manual_seed(10 + rank)
    return torch.randn(6, 5, generator=g), torch.randint(-50, 50, (6, 5), generator=g)


def _collectives(rank):
    """(name, run(group, device) -> tensors to compare): each collective as a rank calls it."""
    x, ints = _inputs(rank)
    root = 1

    def fresh(t, device):
        return t.clone().to(device)

    def all_reduce(op, t):
        def run(group, device):
            y = fresh(t, device)
            dist.all_reduce(y, op=op, group=group)
            return [y]
        return run

    def reduce(op):
        def run(group, device):
            y = fresh(x, device)
            dist.reduce(y, dst=root, op=op, group=group)
            return [y] if rank == root else []  # elsewhere, what the buffer holds is unspecified
        return run

    def broadcast(group, device):
        y = fresh(x, device)
        dist.broadcast(y, src=root, group=group)
        return [y]

    def all_gather(group, device):
        out = [torch.empty(6, 5, device=device) for _ in range(WORLD)]
        dist.all_gather(out, fresh(x, device), group=group)
        return out

    def all_gather_into_tensor(group, device):
        out = torch.empty(WORLD * 6, 5, device=device)
        dist.all_gather_into_tensor(out, fresh(x, device), group=group)
        return [out]

    def gather(group, device):
        out = [torch.empty(6, 5, device=device) for _ in range(WORLD)] if rank == root else None
        dist.gather(fresh(x, device), out, dst=root, group=group)
        return out or []

    def scatter(group, device):
        pieces = [fresh(x, device) + 100 * r for r in range(WORLD)] if rank == root else None
        out = torch.empty(6, 5, device=device)
        dist.scatter(out, pieces, src=root, group=group)
        return [out]

    def reduce_scatter(op):
        def run(group, device):
            out = torch.empty(3, 5, device=device)
            dist.reduce_scatter(out, [fresh(p, device) for p in x.chunk(WORLD)], op=op, group=group)
            return [out]
        return run

    def reduce_scatter_tensor(op):
        def run(group, device):
            out = torch.empty(3, 5, device=device)
            dist.reduce_scatter_tensor(out, fresh(x, device), op=op, group=group)
            return [out]
        return run

    def all_to_all_single_uneven(group, device):
        splits = [[1, 5], [4, 2]]  # rank r sends splits[r][d] rows to rank d
        send, receive = splits[rank], [splits[src][rank] for src in range(WORLD)]
        out = torch.empty(sum(receive), 5, device=device)
        dist.all_to_all_single(out, fresh(x, device), receive, send, group=group)
        return [out]

    def all_to_all_single_even(group, device):
        out = torch.empty(6, 5, device=device)
        dist.all_to_all_single(out, fresh(x, device), group=group)
        return [out]

    def all_to_all(group, device):
        chunks = [fresh(p, device) for p in x.chunk(WORLD)]
        if device.type == "cpu":  # gloo: its list all_to_all is torch >= 2.12; all_to_all_single means the same
            out = torch.empty(3 * WORLD, 5)
            dist.all_to_all_single(out, torch.cat(chunks), group=group)
            return list(out.chunk(WORLD))
        out = [torch.empty(3, 5, device=device) for _ in range(WORLD)]
        dist.all_to_all(out, chunks, group=group)
        return out

    return [("all_reduce SUM", all_reduce(Op.SUM, x)), ("all_reduce AVG", all_reduce(Op.AVG, x)),
            ("all_reduce MAX int", all_reduce(Op.MAX, ints)), ("all_reduce BXOR int", all_reduce(Op.BXOR, ints)),
            ("reduce SUM", reduce(Op.SUM)), ("reduce AVG", reduce(Op.AVG)), ("reduce MIN", reduce(Op.MIN)),
            ("broadcast", broadcast), ("all_gather", all_gather), ("all_gather_into_tensor", all_gather_into_tensor),
            ("gather", gather), ("scatter", scatter), ("reduce_scatter SUM", reduce_scatter(Op.SUM)),
            ("reduce_scatter_tensor SUM", reduce_scatter_tensor(Op.SUM)),
            ("reduce_scatter_tensor AVG", reduce_scatter_tensor(Op.AVG)),
            ("all_to_all_single uneven", all_to_all_single_uneven), ("all_to_all_single", all_to_all_single_even),
            ("all_to_all", all_to_all)]


def against_gloo(rank, dev):
    gloo = dist.new_group(backend="gloo")
    for name, run in _collectives(rank):
        expected = run(gloo, torch.device("cpu"))
        got = run(None, dev)
        assert len(got) == len(expected), name
        for i, (g, e) in enumerate(zip(got, expected)):
            torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0, msg=lambda m, name=name, i=i: f"{name}[{i}]: {m}")
    dist.destroy_process_group(gloo)


def dtensor_shard(rank, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("npu", (WORLD,))
    full = torch.arange(24.0).view(4, 6)
    sharded = distribute_tensor(full.to(dev) if rank == 0 else torch.zeros(4, 6, device=dev), mesh, [Shard(0)])
    same(sharded.to_local(), full.chunk(WORLD)[rank])  # rank 0's tensor, scattered
    columns = sharded.redistribute(mesh, [Shard(1)])  # all_to_all
    same(columns.to_local(), full.chunk(WORLD, dim=1)[rank])
    same(columns.redistribute(mesh, [Replicate()]).to_local(), full)


def tp_decoder(rank, dev):
    # models.train_tp's check on npu: the tensor-parallel decoder, forward and two AdamW
    # steps, equals one device (logits, losses, every gradient gathered whole).
    from torch.distributed.device_mesh import init_device_mesh

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout: models/
    from models.train_tp import CHECK_SHAPE, check

    check(CHECK_SHAPE, 2, 2, True, dev, init_device_mesh("npu", (WORLD,)), lambda line: None)


# --- training: one process on the global batch is the reference ---------------------------------
def _model(dev):
    torch.manual_seed(0)
    # 5 outputs: FSDP2 shards the last layer's rows unevenly (3 and 2).
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 5)).to(dev)


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 8, generator=g), torch.randn(8, 5, generator=g)) for _ in range(STEPS)]


def _train_reference(dev):
    """The one-process run: every step on the whole batch. Returns (model, losses, first gradients)."""
    model = _model(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, first_grads = [], None
    for x, y in _batches():
        loss = torch.nn.functional.mse_loss(model(x.to(dev)), y.to(dev))
        opt.zero_grad()
        loss.backward()
        if first_grads is None:
            first_grads = [p.grad.cpu().clone() for p in model.parameters()]
        opt.step()
        losses.append(loss.item())
    return model, losses, first_grads


def ddp(rank, dev):
    from torch.nn.parallel import DistributedDataParallel

    reference, _, reference_grads = _train_reference(dev)
    model = DistributedDataParallel(_model(dev), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (x, y) in enumerate(_batches()):
        loss = torch.nn.functional.mse_loss(model(x.chunk(WORLD)[rank].to(dev)), y.chunk(WORLD)[rank].to(dev))
        opt.zero_grad()
        loss.backward()
        if step == 0:
            for i, (p, want) in enumerate(zip(model.parameters(), reference_grads)):
                close(p.grad, want, f"DDP gradient {i} at step 0")
        opt.step()
    for i, (p, want) in enumerate(zip(model.module.parameters(), reference.parameters())):
        close(p, want, f"DDP parameter {i} after {STEPS} steps")


def fsdp2(rank, dev):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    reference, reference_losses, _ = _train_reference(dev)
    mesh = init_device_mesh("npu", (WORLD,))
    model = _model(dev)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step, (x, y) in enumerate(_batches()):
        loss = torch.nn.functional.mse_loss(model(x.chunk(WORLD)[rank].to(dev)), y.chunk(WORLD)[rank].to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=Op.AVG)  # equal halves: the mean of the halves' losses is the batch's
        close(mean, torch.tensor(reference_losses[step]), f"FSDP2 loss at step {step}")
    for i, (p, want) in enumerate(zip(model.parameters(), reference.parameters())):
        # Sharded on dim 0, as torch.chunk splits it; only the local shard is compared, so
        # that no DTensor collective is needed.
        close(p.to_local(), want.detach().chunk(WORLD)[rank], f"FSDP2 parameter {i} (rank {rank}'s shard)")


CHECKS = [default_group, all_reduce_ops, all_reduce_non_contiguous, all_reduce_waits_for_queued_work,
          collectives_leave_the_issuing_stream_free, all_reduce_cpu, all_reduce_async, all_reduce_coalesced, broadcast,
          all_gather_list, all_gather_into_tensor, reduce_scatter_tensor, reduce_scatter_list, send_recv, barrier,
          refusals, against_gloo, dtensor_shard, tp_decoder, ddp, fsdp2]


def rank_main(rank, out_dir):
    warnings.filterwarnings("ignore", message="backplane npu: .* has no npu kernel")  # the CPU fallback's notes
    warnings.filterwarnings("ignore", message="`torch.distributed.* is deprecated", category=FutureWarning)
    import backplane

    backplane.load("npu")
    torch.npu.set_device(rank)
    dist.init_process_group(init_method=f"file://{out_dir}/store", rank=rank, world_size=WORLD,
                            timeout=timedelta(seconds=60))
    report = {}
    for check in CHECKS:
        try:
            check(rank, torch.device("npu", rank))
            report[check.__name__] = "ok"
        except Exception:  # noqa: BLE001 (reported to the test, which fails on it)
            report[check.__name__] = traceback.format_exc()
        Path(out_dir, f"rank{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(rank_main, args=(os.path.abspath(sys.argv[1]),), nprocs=WORLD)
