"""The two gloo ranks (CPU) of test_selection_ranks.py and test_selection_file.py:
`python selection_ranks.py RANK STORE MODE FILE0 FILE1`, the ranks meeting through the file
store STORE. Rank r applies FILEr with backplane.load("cpu", selection=...):

    both   every rank, at once
    first  rank 0 alone; rank 1 only after rank 0 is done (it gave up waiting)

Each prints "applied PATH" or "refused MESSAGE" (the ValueError), then ends through
models.distributed.finish (a barrier, then os._exit: gloo's teardown can abort otherwise).
"""
import sys

import torch
import torch.distributed as dist

import backplane
from models.distributed import finish

rank, store_path, mode, files = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:6]
dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
store = dist.distributed_c10d._get_default_store()


def apply() -> None:
    try:
        backplane.load("cpu", selection=files[rank])
        print("applied", backplane.selection_file())
    except ValueError as e:
        print("refused", e)


if mode == "both":
    apply()
elif rank == 0:
    apply()
    store.set("test/rank 0 is done", "yes")
else:
    store.wait(["test/rank 0 is done"])
    apply()
finish(0, torch.device("cpu"))
