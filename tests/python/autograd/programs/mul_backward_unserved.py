"""Backward through mul with the cpu_stable plugin (from the folder argv[1]) alone, which
serves mul but not mul_backward: the gradients must still be right, and the one warning
saying so is printed."""
import sys
import warnings

import torch

import backplane

backplane.load("cpu_stable", path=sys.argv[1])
assert [s.serving for s in backplane.serving() if s.op == "mul"] == ["cpu_stable"]
a = torch.randn(4, 5, requires_grad=True)
b = torch.randn(4, 5, requires_grad=True)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(3):
        a.grad = b.grad = None
        torch.ops.backplane.mul(a, b).sum().backward()
        torch.testing.assert_close(a.grad, b.detach())
        torch.testing.assert_close(b.grad, a.detach())
said = [str(w.message) for w in seen if "mul_backward" in str(w.message)]
assert len(said) == 1, said
print(said[0])
