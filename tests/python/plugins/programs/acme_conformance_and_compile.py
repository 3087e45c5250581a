"""argv: ACME_DIR: acme's ops through the conformance suite, opcheck, gradcheck and
torch.compile; clamp_'s missing backward is an error naming it."""
from acme_prelude import backplane, gelu, torch

results = backplane.check("acme")
assert {r.op for r in results} >= {"acme::fused_gelu", "acme::clamp_"}
mine = [r for r in results if r.op.startswith("acme::")]
assert mine and all(r.outcome in ("passed", "skipped") for r in mine), [r for r in mine if r.outcome == "failed"][:3]
x = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
torch.library.opcheck(gelu.default, (torch.randn(4, 33),))
torch.library.opcheck(torch.ops.acme.clamp_.default, (torch.randn(4, 33), -0.5, 0.5))
assert torch.autograd.gradcheck(gelu, (x,))
compiled = torch.compile(lambda t: gelu(t) * 2, backend="aot_eager", fullgraph=True)
torch.testing.assert_close(compiled(x.detach()), torch.nn.functional.gelu(x.detach()) * 2)
# clamp_ has no backward: asking for one is an error naming the op, never a silent None.
w = torch.randn(3, requires_grad=True)
c = w.clone()
torch.ops.acme.clamp_(c, 0.0, 1.0)
try:
    c.sum().backward()
    raise SystemExit("backward through clamp_ was accepted")
except RuntimeError as e:
    assert "acme::clamp_" in str(e), e
