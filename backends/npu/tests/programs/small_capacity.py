"""Run by test_memory.py with BACKPLANE_NPU_MEMORY_MB=64: a device of 64 MiB. Prints, one
per line: the retry count after a cached segment had to be returned to fit a request, then
the out-of-memory message, then the statistics it should name (allocated, reserved, free)."""
import torch

import backplane

backplane.load("npu")
MiB = 1 << 20
cached = torch.empty(40 * MiB, dtype=torch.uint8, device="npu")
del cached  # its 40 MiB segment stays reserved, unused
kept = torch.empty(50 * MiB, dtype=torch.uint8, device="npu")  # fits only once the 40 MiB go back
print(torch.npu.memory_stats()["num_alloc_retries"])
try:
    torch.empty(20 * MiB, dtype=torch.uint8, device="npu")
except torch.OutOfMemoryError as e:
    print(str(e).splitlines()[0])
print(torch.npu.memory_allocated(), torch.npu.memory_reserved(), torch.npu.mem_get_info()[0])
