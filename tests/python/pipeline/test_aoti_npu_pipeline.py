"""The pipeline on the npu device (Backplane's emulated PrivateUse1 device): the decoder
block from eager through torch.compile, torch.export, an AOTInductor package loaded in
Python (under the input layout guard: contiguous, channels_last, sliced, transposed and
offset inputs) and run from C++ (`backplane run --backends cpu,npu`), each step checked
against the model's reference. ONNX applies to cpu only and is skipped.

The pipeline runs in a child process: the npu device registers PrivateUse1 for the
whole process, which the other tests in this worker must not see."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

from models import pipeline  # noqa: E402

LIB_DIR = Path(os.environ.get("BACKPLANE_LIB_DIR", REPO / "build" / "lib"))
needs_npu = pytest.mark.skipif(not (LIB_DIR / "libbackplane_npu.so").is_file(), reason="the npu plugin is not built")


def test_onnx_is_the_one_step_that_does_not_apply_on_npu():
    run = pipeline.Run("decoder_block", "npu", "float32")
    assert [s for s in pipeline.STEPS if pipeline.not_applicable(s, run)] == ["onnx"]
    assert not [s for s in pipeline.STEPS if pipeline.not_applicable(s, pipeline.Run("decoder_block", "cpu"))]


@pytest.mark.slow
@needs_npu
def test_every_step_that_applies_runs_on_npu(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-W", "ignore", "-m", "models.pipeline", "all", "decoder_block", "--device",
                             "npu", "--out", str(tmp_path)], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=900)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    for line in ("decoder_block eager on npu: matches", "decoder_block torch.compile(fullgraph=True) on npu: matches",
                 "decoder_block torch.export on npu: matches",
                 "decoder_block-npu-float32.pt2 loaded in Python: matches the reference at batch sizes [2, 3, 7, 1024], "
                 "inputs contiguous, channels_last, sliced, transposed and offset",
                 "for npu in", "== onnx: skipped on npu float32"):
        assert line in out, out[-3000:]
    assert out.count("matches within tolerance") == 3, out[-3000:]  # backplane run, one line per saved case
