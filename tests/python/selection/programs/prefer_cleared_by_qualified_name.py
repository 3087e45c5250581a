"""prefer() and its clearing take the op's qualified name too.
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

backplane.prefer("identity_conv", "cpu_alt")
backplane.prefer("backplane::identity_conv", None)
assert backplane.preferences() == "", backplane.preferences()
assert torch.equal(ident(x), x)
backplane.prefer("backplane::identity_conv", "cpu_alt")
assert backplane.preferences() == "identity_conv:cpu_alt", backplane.preferences()
backplane.prefer("backplane::identity_conv")
assert backplane.preferences() == ""
