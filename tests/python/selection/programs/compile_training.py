"""A training step under torch.compile with rms_norm and its backward op traced (inductor):
neither op is called in the generated code, and the output and gradients equal eager's."""
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
chosen = {r["op"]: r["choice"] for r in backplane.compile.resolutions()}
assert chosen == {"rms_norm": "inductor", "rms_norm_backward": "inductor"}, chosen
print("ok")
