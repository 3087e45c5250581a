"""argv: PLUGIN_DIR: cpu_stable beside cpu, chosen by prefer() for mul, eager and compiled
(test_stable_abi.py)."""
import sys

import warnings, torch, backplane

warnings.simplefilter("ignore")
backplane.load("cpu")
backplane.load("cpu_stable", path=sys.argv[1])
(s,) = [s for s in backplane.serving() if s.op == "mul"]
assert s.offered_by == ("cpu", "cpu_stable"), s
with backplane.prefer("mul", "cpu_stable"):
    (s,) = [s for s in backplane.serving() if s.op == "mul"]
    assert s.serving == "cpu_stable", s
    a, b = torch.randn(3, 4), torch.randn(4)
    assert torch.equal(torch.ops.backplane.mul(a, b), a * b)
    f = torch.compile(lambda x, y: torch.ops.backplane.mul(x, y) + 1, fullgraph=True)
    assert torch.equal(f(a, b), a * b + 1)
print("ok")
