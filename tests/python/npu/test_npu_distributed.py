"""The npu device in torch.distributed: the plugin registers its c10d backend (collectives/)
for npu when it loads (backplane_npu/_collectives.py), so dist.init_process_group() with no
backend named serves npu tensors. In two processes, npu:0 and npu:1: every collective
gives what gloo gives on the CPU (ReduceOps, odd shapes, views, uneven all_to_all), runs on
a stream of its own that leaves the issuing stream free, refusals name the reason, DTensor
Shard placements work, and the TP decoder, DDP and FSDP2 (fully_shard) train as one process
does on the global batch.

The two ranks run once for the file (npu_distributed_ranks.py); each test reads its
check from their reports."""
import json
import subprocess
from pathlib import Path

import pytest
import torch.distributed as dist

from conftest import run_python
from npu_common import QUIET_FALLBACK
from npu_distributed_ranks import CHECKS

from backplane.distributed import register_device_collectives

pytestmark = QUIET_FALLBACK
RANKS = Path(__file__).with_name("npu_distributed_ranks.py")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("npu_ranks")
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    try:
        run = run_python(RANKS, out, env=env, timeout=180)
        log = f"exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"
    except subprocess.TimeoutExpired as e:  # the checks reported before it count; the others fail
        log = f"timed out after {e.timeout} s\n{e.stdout}\n{e.stderr}"
    reports = [out / f"rank{r}.json" for r in range(2)]
    return [json.loads(r.read_text()) if r.exists() else {} for r in reports], log


@pytest.mark.parametrize("check", [c.__name__ for c in CHECKS])
def test_two_ranks(reports, check):
    found, log = reports
    for rank, report in enumerate(found):
        assert check in report, f"rank {rank} did not report {check!r}; the ranks' log:\n{log}"
        assert report[check] == "ok", f"rank {rank}, {check}:\n{report[check]}"


def test_loading_npu_registers_its_backend():
    assert dist.Backend.default_device_backend_map["npu"] == "npu_gloo"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"  # left as it was
    assert set(dist.Backend.backend_capability["npu_gloo"]) == {"npu", "cpu"}
    register_device_collectives("npu", "npu_gloo")  # again: nothing changes


def test_a_device_with_another_default_backend_is_refused():
    with pytest.raises(RuntimeError, match=r"^backplane.distributed: c10d already has backend 'npu_gloo' as the "
                                           r"default for device 'npu'; expected none, to register 'other'$"):
        register_device_collectives("npu", "other")
    assert "OTHER" not in dist.Backend._plugins
