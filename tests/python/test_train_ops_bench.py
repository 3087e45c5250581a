"""bench/train_ops_bench.py: forward+backward workloads come from the registry (ops with a
`backward:`, their `bench:` presets, `baseline:` and `reference:`), with the bytes each
pass must move. One tiny run on the CPU: this tests the command, not the speed."""
import json
import subprocess
import sys
from pathlib import Path

import backplane

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import train_ops_bench  # noqa: E402


def test_each_op_with_a_backward_gets_its_largest_contiguous_preset():
    for op in backplane.ops():
        chosen = train_ops_bench.chosen_presets(op, "")
        contiguous = [p for p in op.bench if not p.get("layout")]
        assert len(chosen) == (1 if contiguous else 0), op.name
        assert all(not p.get("layout") for p in train_ops_bench.chosen_presets(op, "all"))
    rms_norm = next(op for op in backplane.ops() if op.name == "rms_norm")
    assert [p["name"] for p in train_ops_bench.chosen_presets(rms_norm, "")] == ["prefill_8192x4096"]
    assert [p["name"] for p in train_ops_bench.chosen_presets(rms_norm, "decode_1x4096,nosuch")] == ["decode_1x4096"]


def test_a_run_times_the_op_beside_its_baseline_reference_and_compile(tmp_path):
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_bench.py"), "--device", "cpu", "--dtypes",
                           "float32", "--ops", "rms_norm", "--shapes", "decode_1x4096", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["backplane", "baseline", "reference", "torch.compile"]
    # x and the weight are 4096 float32 each: the forward reads both and writes y; the
    # backward reads grad, x and the weight and writes dx and dweight.
    for r in rows:
        assert abs(r["gbps"] * r["us"] * 1e3 - 8 * 4096 * 4) < 1e-3 * 8 * 4096 * 4, r
