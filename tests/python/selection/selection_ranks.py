"""The two gloo ranks (CPU) of test_selection_ranks.py and test_selection_file.py:
`python selection_ranks.py RANK STORE MODE FILE0 FILE1`, the ranks meeting through the file
store STORE, or the TCP store STORE names (tcp://host:port, hosted by rank 0). Rank r applies
FILEr with backplane.load("cpu", selection=...):

    both    every rank, at once
    first   rank 0 alone; rank 1 only after rank 0 is done (it gave up waiting)
    leaves  rank 1 at once, rank 0 a second later; each exits at once after (os._exit, no
            barrier), rank 0 taking its TCP store with it

Each prints "applied PATH" or "refused MESSAGE" (the ValueError), then ends through
models.distributed.finish (a barrier, then os._exit: gloo's teardown can abort otherwise).
"""
import os
import sys
import time

import torch
import torch.distributed as dist

import backplane
from models.distributed import finish

rank, store_path, mode, files = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:6]
init = store_path if store_path.startswith("tcp://") else f"file://{store_path}"
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
store = dist.distributed_c10d._get_default_store()


def apply() -> None:
    try:
        backplane.load("cpu", selection=files[rank])
        print("applied", backplane.selection_file())
    except ValueError as e:
        print("refused", e)


if mode == "leaves":  # no barrier after: rank 0 is gone
    time.sleep(1 if rank == 0 else 0)  # rank 1 is polling by then, with pauses up to 0.25 s
    apply()
    sys.stdout.flush()
    os._exit(0)
elif mode == "both":
    apply()
elif rank == 0:
    apply()
    store.set("test/rank 0 is done", "yes")
else:
    store.wait(["test/rank 0 is done"])
    apply()
finish(0, torch.device("cpu"))
