"""prefer() switches at once and, as a context manager, restores the earlier preference.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

backplane.prefer("identity_conv", "cpu_alt")
assert torch.equal(ident(x), -x)
with backplane.prefer("identity_conv", "cpu"):
    assert torch.equal(ident(x), x)
assert torch.equal(ident(x), -x), "the context manager restores the earlier preference"
backplane.prefer("identity_conv")  # cleared: the default rule again
assert torch.equal(ident(x), x)
assert backplane.preferences() == ""
