"""torch's own loader on the package in argv[1], without Backplane's guard: prints whether
a contiguous input gives the right numbers, then whether a channels_last one gives the same
(tests/python/aoti/test_load_package.py expects "True False")."""
import sys

import torch

raw = torch._inductor.aoti_load_package(sys.argv[1])
x, y = torch.randn(4, 3, 4, 5), torch.randn(4, 5)
right = raw(x, y)
print(torch.equal(right, x * 2 + y[:, None, None, :]), torch.equal(raw(x.contiguous(memory_format=torch.channels_last), y), right))
