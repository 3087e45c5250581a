"""argv: ACME_DIR ALT_DIR: acme_alt, implementing acme's fused_gelu, loaded after acme: both
serve the op, the core chooses per op, and acme_alt passes the conformance suite."""
import sys

from acme_prelude import backplane, gelu, torch

import warnings
alt = sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b = backplane.load("acme_alt", path=alt)[0]
assert b.ops == ("acme::fused_gelu",) and not b.registry, b
assert any("acme::fused_gelu on CPU is offered by 'acme', 'acme_alt'" in str(w.message) for w in caught), caught
with backplane.prefer("acme::fused_gelu", "acme_alt"):
    served = {(s.op, s.dispatch_key): s.serving for s in backplane.serving()}
    assert served[("acme::fused_gelu", "CPU")] == "acme_alt", served
    x = torch.randn(33, dtype=torch.float64)
    torch.testing.assert_close(gelu(x), torch.nn.functional.gelu(x))
results = [r for r in backplane.check("acme_alt") if r.op == "acme::fused_gelu"]
assert results and all(r.outcome in ("passed", "skipped") for r in results), results[:3]
