"""Moves the expected outputs of the `backplane run` input file argv[1] onto the npu device,
in place, and prints the device they load back on. A process of its own: a registered
PrivateUse1 device must not leak into the CUDA tests (scripts/test.sh)."""
import sys

import torch

import backplane

backplane.load("npu")
io = torch.load(sys.argv[1], weights_only=True)
for case in io["cases"]:
    case["expected"] = [t.to("npu") for t in case["expected"]]
torch.save(io, sys.argv[1])
print(torch.load(sys.argv[1], weights_only=True, map_location=None)["cases"][0]["expected"][0].device)
