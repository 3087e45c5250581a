"""models.train_ddp: the decoder LM under DDP (NCCL, one process per GPU) gives the
gradients of a one-GPU run of the same global batch. Needs two CUDA devices."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices (DDP with NCCL, one process per GPU)")
def test_ddp_on_two_gpus_matches_one_gpu():
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'python'}:{REPO}", "NCCL_NVLS_ENABLE": "0",
           "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    env.pop("BACKPLANE_BACKENDS", None)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m",
                        "models.train_ddp", "--steps", "10"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "every parameter's gradient matched the one-GPU run" in r.stdout, r.stdout
