"""argv: PLUGIN_DIR: a copy of tests/fixtures/triton_own_ops whose fragment, manifest and
package were edited by the test to add tlx::scale_sub (no build step anywhere). A fresh
process loads it and finds the new op defined, served, listed and conformant. The op has one
dtype: its suite has no mixed-dtype case (no call of two supported dtypes exists)."""
import sys

import torch
import backplane

(plugin,) = backplane.load("fixture_tlx", path=sys.argv[1])
assert sorted(plugin.ops) == ["tlx::scale_add", "tlx::scale_sub"], plugin.ops
listed = {op.name: op for op in backplane.ops()}
assert listed["tlx::scale_sub"].backends["fixture_tlx"] == ("float32",), listed["tlx::scale_sub"]
x, y = torch.randn(3, 7), torch.randn(7)
torch.testing.assert_close(torch.ops.tlx.scale_sub(x, y, 0.5), x - 0.5 * y, rtol=0, atol=0)
results = backplane.check("fixture_tlx", ["tlx::scale_sub"])
assert results and all(r.outcome in ("passed", "skipped") for r in results), [r for r in results if r.outcome == "failed"]
assert any(r.case.startswith("gradient/") and r.outcome == "passed" for r in results), results
cases = {r.case for r in results}
assert "error/bad_dtype" in cases and "error/mixed_dtypes" not in cases, sorted(cases)
print("ok")
