"""argv: ACME_DIR: acme's ops get DTensor sharding rules at load, from the fragment: fused_gelu
pointwise (and not linear), clamp_ keeping the tensor it writes."""
from acme_prelude import backplane, gelu, torch

rules = backplane.sharding.rules()
assert rules["acme::fused_gelu"].kind == "pointwise" and rules["acme::fused_gelu"].linear == (), rules["acme::fused_gelu"]
assert (rules["acme::clamp_"].kind, rules["acme::clamp_"].written) == ("pointwise", "x"), rules["acme::clamp_"]
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (1,))
x = torch.randn(6, 5, dtype=torch.float64)
y = gelu(distribute_tensor(x, mesh, [Shard(1)]))
assert y.placements == (Shard(1),), y.placements
torch.testing.assert_close(y.full_tensor(), torch.nn.functional.gelu(x))
dist.destroy_process_group()
