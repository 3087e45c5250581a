"""models.train_tp and models.train_fsdp2 in two processes (torch.distributed.run): the
tensor-parallel decoder, whose norms and residual adds reach Backplane's ops as DTensors
(through the sharding rules `import backplane` registers), equals one device, forward and
training steps, on the CPU (gloo: CI runs it) and on two GPUs (NCCL); FSDP2 training equals
one GPU. The DDP check is tests/python/distributed/test_ddp.py."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]
TWO_GPUS = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                              reason="needs two CUDA devices (NCCL, one process per GPU)")


def torchrun(module, *args, timeout, ranks=2, check=True):
    """Runs `module` in `ranks` processes; returns rank 0's output, failing with every rank's on
    error (check=False: returns the finished process instead). --standalone takes a free port:
    tests on other pytest-xdist workers run beside it."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'python'}:{REPO}", "NCCL_NVLS_ENABLE": "0",
           "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    env.pop("BACKPLANE_BACKENDS", None)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                        "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if not check:
        return r
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    return r.stdout


def test_tensor_parallel_on_cpu_matches_one_process():
    out = torchrun("models.train_tp", "--device", "cpu", "--steps", "1", timeout=120)
    # Two blocks: 5 norms and 4 residual adds, each called with DTensors (sharded over the sequence).
    assert "backplane ops on DTensors {'add': 4, 'rms_norm': 5}" in out, out
    assert "backplane ops on DTensors {'rms_norm_backward': 5}" in out, out
    assert "TP check passed: 2 ranks (CPU), backplane ops" in out, out


def test_tensor_parallel_refuses_a_single_rank():
    r = torchrun("models.train_tp", "--device", "cpu", timeout=120, ranks=1, check=False)
    assert r.returncode != 0
    assert "models.train_tp: expected two or more ranks (torchrun --nproc-per-node 2 or more), found 1" in r.stderr, \
        r.stderr[-3000:]


@TWO_GPUS
def test_tensor_parallel_on_two_gpus_matches_one_gpu():
    out = torchrun("models.train_tp", "--device", "cuda", "--steps", "2", timeout=600)
    assert "TP check passed: 2 ranks" in out and "backplane ops" in out, out


@TWO_GPUS
def test_fsdp2_on_two_gpus_matches_one_gpu():
    out = torchrun("models.train_fsdp2", "--device", "cuda", "--steps", "5", timeout=600)
    assert "matched the one-GPU run after every step" in out, out
