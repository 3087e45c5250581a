"""check() runs the named plugin's kernel even when another serves the op.
argv: FIXTURES, for cpu_and_cpu_alt (test_selection.py)."""
from cpu_and_cpu_alt import backplane, ident, torch, x

alt = {r.outcome for r in backplane.check("cpu_alt", ["identity_conv"])}
assert "failed" in alt, alt  # cpu_alt's -x is checked, not cpu's kernel
assert {r.outcome for r in backplane.check("cpu", ["identity_conv"])} <= {"passed", "skipped"}
(missing,) = backplane.check("cpu_alt", ["mul"])
assert (missing.outcome, missing.detail) == ("not implemented", "not implemented on cpu_alt")
assert torch.equal(ident(x), x), "check leaves the preferences as they were"
