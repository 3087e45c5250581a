"""argv: ACME_DIR: acme's ops are listed, compute, get Meta kernels and the contract's checks."""
from acme_prelude import acme, backplane, gelu, torch

assert acme.ops == ("acme::fused_gelu", "acme::clamp_", "acme::gelu"), acme.ops
assert acme.registry.endswith("libbackplane_acme.ops.yaml"), acme.registry
info = {op.name: op for op in backplane.ops()}
assert info["acme::fused_gelu"].namespace == "acme" and info["acme::fused_gelu"].backends["acme"]
assert info["add"].namespace == "backplane"
x = torch.randn(4, 33, dtype=torch.float64)
torch.testing.assert_close(torch.ops.acme.fused_gelu(x), torch.nn.functional.gelu(x))
y = x.clone()
torch.ops.acme.clamp_(y, -0.25, 0.25)
torch.testing.assert_close(y, x.clamp(-0.25, 0.25))
# The Meta kernel from the shape rule, and the contract's checks under the op's own name.
assert gelu(torch.empty(3, 7, device="meta")).shape == (3, 7)
try:
    gelu(torch.ones(3, dtype=torch.int32))
    raise SystemExit("an int32 input was accepted")
except TypeError as e:
    assert "acme::fused_gelu: argument 'x' has dtype int32" in str(e), e
