"""argv: ACME_DIR: acme::gelu's str argument `approximate` from its samples, bench preset and
`errors:` case; the contract refuses a bad string on the CPU and under Meta."""
from acme_prelude import backplane, torch

import torch.nn.functional as F
op = {o.name: o for o in backplane.ops()}["acme::gelu"]
assert [s["args"].get("approximate") for s in op.samples] == [None, "tanh", "tanh"], op.samples
assert op.bench == ({"name": "1M_tanh", "args": {"x": [1048576], "approximate": "tanh"}},), op.bench
values = backplane.sample_values(op, 1, dtype=torch.float64)
assert values["approximate"] == "tanh", values
args, kwargs = backplane.sample_call(op, 1, dtype=torch.float64)
assert kwargs == {"approximate": "tanh"}, kwargs  # keyword-only, as the schema says
y = torch.ops.acme.gelu(*args, **kwargs)
torch.testing.assert_close(y, F.gelu(values["x"], approximate="tanh"), rtol=0, atol=0)
assert not torch.equal(y, F.gelu(values["x"]))
for device in ("cpu", "meta"):
    try:
        torch.ops.acme.gelu(torch.ones(3, device=device), approximate="Tanh")
        raise SystemExit(f"approximate='Tanh' was accepted on {device}")
    except ValueError as e:
        assert str(e).startswith("acme::gelu: argument 'approximate' is 'Tanh'; expected one of: 'none', 'tanh'"), e
results = [r for r in backplane.check("acme") if r.op == "acme::gelu"]
assert not [r for r in results if r.outcome != "passed"], [r for r in results if r.outcome != "passed"][:3]
cases = {r.case for r in results}
assert {"tanh/contiguous", "tanh/transposed", "tanh_three_d/permuted", "error/bad_approximate"} <= cases, cases
