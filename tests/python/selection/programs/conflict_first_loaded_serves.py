"""Both plugins offer identity_conv: the conflict is announced, the first loaded serves; prints ok.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import backplane, caught, ident, torch, x

assert any("identity_conv on CPU is offered by 'cpu', 'cpu_alt'" in str(w.message) for w in caught), caught
assert torch.equal(ident(x), x)
(s,) = [s for s in backplane.serving() if s.op == "identity_conv"]
assert (s.serving, s.why, s.offered_by) == ("cpu", "loaded first", ("cpu", "cpu_alt")), s
print("ok")
