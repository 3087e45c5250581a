"""The npu device in torch.distributed: loading the plugin registers a c10d backend for it
(collectives/, python/backplane_npu/_collectives.py), so dist.init_process_group() with no
backend named serves npu tensors. A group of one process here (Backplane's own suite also
runs two; test_collectives.py has the streams).
`backplane new-backend NAME --dispatch-key PrivateUse1` copies this file with the device
renamed."""
import pytest
import torch
import torch.distributed as dist

import backplane

backplane.load("npu")
pytestmark = [pytest.mark.skipif(not dist.is_available(), reason="this torch has no torch.distributed"),
              pytest.mark.filterwarnings("ignore:backplane npu:UserWarning"),
              # torch 2.14 renames all_gather_into_tensor and reduce_scatter_tensor; older torch has only these
              pytest.mark.filterwarnings("ignore:`torch.distributed.:FutureWarning")]


def test_a_group_with_no_backend_named_serves_the_device():
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.group.WORLD._get_backend(torch.device("npu")).name() == "npu_gloo"
        assert dist.group.WORLD._get_backend(torch.device("cpu")).name() == "npu_gloo"  # CPU tensors too
        x = torch.arange(12.0, device="cpu").view(3, 4).to("npu")
        gathered = torch.zeros(3, 4, device="npu")
        dist.all_gather_into_tensor(gathered, x)  # a group of one: the input, copied into the output
        torch.testing.assert_close(gathered.cpu(), torch.arange(12.0).view(3, 4), rtol=0, atol=0)
        reduced = torch.zeros(3, 2, device="npu").t()  # a (2, 3) view
        dist.reduce_scatter_tensor(reduced, x[:2, :3].contiguous(), op=dist.ReduceOp.AVG)
        torch.testing.assert_close(reduced.cpu(), torch.arange(12.0).view(3, 4)[:2, :3], rtol=0, atol=0)
    finally:
        dist.destroy_process_group()


def test_get_backend_names_the_group_backend():
    # c10d records a group made with no backend named as "undefined" (a backend to be
    # chosen per device later); the device's group is its backend from the start.
    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert dist.get_backend() == "npu_gloo"
        assert dist.get_backend(dist.new_group()) == "npu_gloo"  # new_group takes the default group's
    finally:
        dist.destroy_process_group()


def test_dtensor_shard_placements():
    # distribute_tensor(..., [Shard(d)]) scatters rank 0's tensor; Shard(0) -> Shard(1)
    # runs all_to_all.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
    try:
        mesh = init_device_mesh("npu", (1,))
        x = torch.arange(12.0).view(3, 4)
        sharded = distribute_tensor(x.to("npu"), mesh, [Shard(0)])
        torch.testing.assert_close(sharded.to_local().cpu(), x, rtol=0, atol=0)
        moved = sharded.redistribute(mesh, [Shard(1)])
        torch.testing.assert_close(moved.full_tensor().cpu(), x, rtol=0, atol=0)
    finally:
        dist.destroy_process_group()
