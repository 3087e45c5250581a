"""A plain prefer() call inside a block outlives it; a block object applies again.
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

with backplane.prefer("identity_conv", "cpu"):
    backplane.prefer("identity_conv", "cpu_alt")  # newer, for good
    assert torch.equal(ident(x), -x)
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
p = backplane.prefer("identity_conv", "cpu")
with p:
    assert torch.equal(ident(x), x)
assert torch.equal(ident(x), -x), "a block withdraws the object's preference"
with p:  # entered again: applies again
    assert torch.equal(ident(x), x)
assert backplane.preferences() == "identity_conv:cpu_alt"
