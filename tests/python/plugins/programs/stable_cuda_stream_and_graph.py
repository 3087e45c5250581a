"""argv: CUDA_PLUGIN_DIR: cuda_stable's kernels run on the caller's stream and in a CUDA graph
(test_stable_abi.py)."""
import sys

import torch, backplane

backplane.load("cuda_stable", path=sys.argv[1])
a = torch.randn(4096, 513, device="cuda")[:, 1:].t()     # offset and transposed
b = torch.randn(4096, 1, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    slow = a @ a.t()                                      # queued first on the same stream
    out = torch.ops.backplane.mul(a, b.t())
    torch.ops.backplane.scale_(out, 0.5)
side.synchronize()
torch.testing.assert_close(out, a * b.t() * 0.5, rtol=0, atol=0)
static_a, static_b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
graph = torch.cuda.CUDAGraph()
torch.cuda.synchronize()
with torch.cuda.graph(graph):
    static_out = torch.ops.backplane.mul(static_a, static_b)
static_a.copy_(torch.arange(1000.0, device="cuda"))
static_b.fill_(2.0)
graph.replay()
torch.cuda.synchronize()
assert torch.equal(static_out, torch.arange(1000.0, device="cuda") * 2)
print("ok")
