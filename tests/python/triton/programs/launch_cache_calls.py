"""Two rms_norm calls of one shape through the Triton plugin under the interpreter, in the
launch cache's test mode; prints the cache's counters for rms_norm as JSON, or null where the
plugin has no cache (BACKPLANE_TRITON_LAUNCH_CACHE=0 when it loaded)."""
import json
import os
import sys
import warnings
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "backends" / "triton"))

import torch  # noqa: E402

import backplane  # noqa: E402
from backplane import triton_kind  # noqa: E402

backplane.load("cpu")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backplane.load("triton")
triton_kind._native._launch_cache_test_mode(True)
with backplane.prefer("rms_norm", "triton"):
    for _ in range(2):
        torch.ops.backplane.rms_norm(torch.randn(4, 32), torch.randn(32), 1e-6)
print(json.dumps(triton_kind._native.launch_cache_stats().get("backplane::rms_norm@triton")))
