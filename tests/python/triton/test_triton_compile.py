"""Every kernel variant the Triton plugin's launchers choose, and every candidate its tuner
may time, compiles for sm_90 (Hopper: the H200 it is measured on), on a machine without a
GPU: programs/compile_for_sm90.py, in a fresh process without the interpreter. The dense
elementwise paths and the register row kernels must load and store 16-byte vectors.

About 45 s with a cold Triton cache on 2 cores, a few seconds once ~/.triton/cache holds
the kernels. What it cannot check: register spills and occupancy (known only when a
driver loads the binary), and speed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton", reason="the Triton plugin needs the triton package (CUDA builds of torch ship it)")

PROGRAM = Path(__file__).parent / "programs" / "compile_for_sm90.py"
KERNELS = {f"elementwise.{k}" for k in ("_dense_kernel", "_strided_kernel")} | {
    f"{op}.{k}" for op in ("rms_norm", "rms_norm_backward", "softmax", "softmax_backward")
    for k in ("_register_rows_kernel", "_looped_rows_kernel")} | {
    "rms_norm_backward._column_sums_kernel", "rotary._rotary_kernel"}


def test_every_kernel_compiles_for_sm90_with_vector_accesses():
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton has no ptxas for the CUDA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(PROGRAM)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    launches = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert {launch["kernel"] for launch in launches} == KERNELS
    vectorized = [launch for launch in launches if launch["kernel"] == "elementwise._dense_kernel" or (
        launch["kernel"].endswith("_register_rows_kernel") and launch["constants"]["ROW_DIMS"] == "1")]
    assert vectorized
    for launch in vectorized:
        assert launch["vector_loads"] and launch["vector_stores"], launch
