"""Runs the benchmark engine (backplane_bench, Google Benchmark) and returns its JSON."""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from .._native import lib_dir
from .results import load


def engine() -> Path:
    """backplane_bench beside the `backplane` command of this build or install."""
    path = lib_dir().parent / "bin" / "backplane_bench"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: the benchmark engine is built with BACKPLANE_BUILD_BENCH=ON (needs Google "
            "Benchmark; `make build` and the wheel do it)"
        )
    return path


def _csv(value) -> str:
    return value if isinstance(value, str) else ",".join(value)


def run(backends="cpu", ops=(), dtypes=("float32", "bfloat16"), shapes=(), repetitions=1, json_path=None,
        quiet=False, extra=(), cuda_graph=False, backward=False, cold_l2=False) -> dict:
    """Runs the engine and returns its Google Benchmark JSON (also written to json_path).
    shapes: preset names, or "all" (default: each op's first); each repetition of a row
    samples until its spread is on target (bench/adaptive_stop.h).
    cuda_graph: cuda rows timed as CUDA graph replays (the kernels without the host's launches).
    backward: forward+backward of each op with a `backward:` (the context's "pass" says so).
    cold_l2: cuda rows sampled one call at a time after an L2 flush (the context's "cache" says so)."""
    if json_path:
        out = Path(json_path)
    else:
        fd, name = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        out = Path(name)
    args = [str(engine()), f"--backends={_csv(backends)}", f"--dtypes={_csv(dtypes)}",
            f"--benchmark_repetitions={repetitions}", f"--benchmark_out={out}", "--benchmark_out_format=json"]
    if ops:
        args.append(f"--ops={_csv(ops)}")
    if shapes:
        args.append(f"--shapes={_csv(shapes)}")
    if cuda_graph:
        args.append("--cuda-graph")
    if backward:
        args.append("--backward")
    if cold_l2:
        args.append("--cold-l2")
    args += list(extra)
    try:
        done = subprocess.run(args, stdout=subprocess.DEVNULL if quiet else None, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} exited with {done.returncode}")
        return load(out)
    finally:
        if not json_path:
            os.unlink(out)
