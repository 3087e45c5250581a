"""argv: FIXTURES: cpu_stable_v1, built on the frozen version-1 header, loads and serves mul
(test_stable_abi.py)."""
import sys

import torch, backplane

(b,) = backplane.load("cpu_stable_v1", path=sys.argv[1])
assert (b.status, b.torch_abi, b.ops) == ("loaded", "stable", ("mul",)), b
a, c = torch.randn(5, 7), torch.randn(5, 7)
assert torch.equal(torch.ops.backplane.mul(a, c), a * c)
try:
    torch.ops.backplane.mul(a.bfloat16(), c.bfloat16())
    raise SystemExit("a dtype the kernel refuses was computed")
except RuntimeError as e:
    assert "backplane::mul: cpu_stable_v1 computes float32 tensors of out's sizes, contiguous, only" in str(e), e
print("ok")
