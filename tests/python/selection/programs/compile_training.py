"""A training step under torch.compile with rms_norm and its backward op traced (inductor):
neither op is called in the generated code, the output and gradients equal eager's, and the
backward takes the forward's 1/rms of each row (saved, as PyTorch's own RMSNorm compiles)
rather than computing it again: the two references meet in the joint graph
(graph_pass.py's joint stage)."""
import re

from compile_selection import backplane, calls_plugin, code_of, torch

rms = torch.ops.backplane.rms_norm
x = torch.randn(6, 33, dtype=torch.float32, requires_grad=True)
w = torch.randn(33, dtype=torch.float32, requires_grad=True)


def step(x, w):
    y = rms(torch.relu(x) + 0.5, w, 1e-6)
    (y * 3).sum().backward()
    return y


eager = step(x, w)
grads = x.grad.clone(), w.grad.clone()
x.grad = w.grad = None
compiled, code = code_of(torch.compile(step), x, w)
torch.testing.assert_close(compiled, eager)
torch.testing.assert_close((x.grad, w.grad), grads)
assert not calls_plugin(code, "rms_norm") and not calls_plugin(code, "rms_norm_backward"), code
# Each graph's wrapper unpacks its inputs: the forward's (x, w), the backward's with what the
# forward saved. A backward that recomputes 1/rms gets no rsqrt.
inputs = re.findall(r"^ +(\w+(?:, \w+)*) = args$", code, re.M)
assert len(inputs) == 2 and "rsqrt" in inputs[1].split(", "), inputs
chosen = {r["op"]: r["choice"] for r in backplane.compile.resolutions()}
assert chosen == {"rms_norm": "inductor", "rms_norm_backward": "inductor"}, chosen
print("ok")
