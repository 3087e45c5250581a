"""`backplane tune` in a distributed job (torch.distributed initialized, more than one rank):
every rank times (so every GPU is as busy as in the job, and in compile mode every rank
applies the same temporary selection files in the same order, as the core's cross-rank
check of apply_selection requires); rank 0's figures decide; every rank writes rank 0's text
to its --out (identical contents, each through a temporary file and a rename, so ranks
sharing a file system replace it with the same file, and ranks that do not each get a
copy), then every rank applies it, where backplane.apply_selection compares the file across
the ranks.

Limits: the other ranks' figures are not used (a faster or slower GPU among them does not
move the decision); the exchanges are collectives of the default group, so every rank must
call tune with the same arguments.
"""
from __future__ import annotations

import contextlib
import os
import sys


def job():
    """torch.distributed where a job of more than one rank is running, else None."""
    dist = sys.modules.get("torch.distributed")  # never imported for this, as selection.py
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist


def rank() -> int:
    dist = job()
    return dist.get_rank() if dist else 0


class RankFailed(RuntimeError):
    """Another rank's tune failed; the message names it and its reason."""


def rank0_text(text: str | None, failure: str | None) -> str:
    """Rank 0's selection text, on every rank: after every rank said whether it got this far
    (`failure`: why not), so that a rank's failure fails every rank, naming it, rather than
    leaving the others waiting in a collective."""
    dist = job()
    if dist is None:
        if failure:
            raise RankFailed(failure)
        return text
    statuses = [None] * dist.get_world_size()
    dist.all_gather_object(statuses, failure)
    failed = {r: why for r, why in enumerate(statuses) if why}
    if failed:
        raise RankFailed("; ".join(f"rank {r}: {why}" for r, why in failed.items()))
    box = [text]
    dist.broadcast_object_list(box, src=0)
    return box[0]


@contextlib.contextmanager
def engine_on_this_ranks_gpu():
    """The benchmark engine's process (a child) on this rank's GPU: CUDA_VISIBLE_DEVICES set
    to the current device's entry for the block, so ranks on one host do not all time GPU 0.
    Outside a job, or without CUDA, nothing changes."""
    dist = job()
    if dist is None:
        yield
        return
    import torch

    if not torch.cuda.is_available():
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = before.split(",") if before else [str(i) for i in range(torch.cuda.device_count())]
    os.environ["CUDA_VISIBLE_DEVICES"] = visible[torch.cuda.current_device()]
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
