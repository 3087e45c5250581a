"""argv: PLUGIN_DIR: cpu_stable's kernels on views, broadcasts, Scalars and int[4] boxes
compute what aten does (test_stable_abi.py)."""
import sys

import torch, backplane

backplane.load("cpu_stable", path=sys.argv[1])
a = torch.randn(6, 4)[1:5].t()          # offset and transposed
b = torch.randn(5, 1)[1:]               # broadcast along the last dimension
assert torch.equal(torch.ops.backplane.mul(a, b.t()), a * b.t())
x = torch.randn(3, 8, dtype=torch.bfloat16)[:, ::2]
assert torch.equal(torch.ops.backplane.identity_conv(x), x)
y = torch.randn(4, 6)[:, 1:5]
expected = y * 0.5
torch.ops.backplane.scale_(y, 0.5)
assert torch.equal(y, expected)
# add's alpha, a Scalar, a float or an int as the caller gave it (aten's add fuses the
# multiply-add, this plain loop rounds twice: close, not equal); crop's box, an int[4], on
# a strided view.
c = torch.randn(1000, dtype=torch.float64)
for alpha in (2.5, -1, (1 << 60) + 1):
    torch.testing.assert_close(torch.ops.backplane.add(a, b.t(), alpha=alpha), torch.add(a, b.t(), alpha=alpha))
    torch.testing.assert_close(torch.ops.backplane.add(c, c, alpha=alpha), torch.add(c, c, alpha=alpha))
img = torch.randn(2, 3, 10, 24)[..., ::2]
assert torch.equal(torch.ops.backplane.crop(img, [1, 2, 5, 7]), img[..., 1:6, 2:9])
print("ok")
