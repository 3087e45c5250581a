"""argv: PACKAGE: runs a package with no plugin loaded (BACKPLANE_BACKENDS=none)."""
import sys

import torch

import backplane

assert not [b for b in backplane.backends() if b.status == "loaded"]
x = torch.randn(4, 25)
out = backplane.load_package(sys.argv[1])(x)
assert torch.equal(out, 2 * x)
print("ok")
