"""Compiled code calls the plugin chosen now.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

f = torch.compile(lambda t: ident(t) * 2, fullgraph=True)
assert torch.equal(f(x), 2 * x)
with backplane.prefer("identity_conv", "cpu_alt"):
    assert torch.equal(f(x), -2 * x), "compiled code must call the plugin chosen now"
assert torch.equal(f(x), 2 * x)
