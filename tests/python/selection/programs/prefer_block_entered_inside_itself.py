"""A block entered again inside itself keeps the outer preference (issue 45, item 16).
argv: FIXTURES, for cpu_and_cpu_alt (test_hardening_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

p = backplane.prefer("identity_conv", "cpu_alt")
with p:
    with p:
        assert torch.equal(ident(x), -x)
    assert backplane.preferences() == "identity_conv:cpu_alt", "the outer block's preference stays for its rest"
    assert torch.equal(ident(x), -x)
    with p, p:
        pass
    assert backplane.preferences() == "identity_conv:cpu_alt"
assert backplane.preferences() == "", backplane.preferences()
assert torch.equal(ident(x), x)
