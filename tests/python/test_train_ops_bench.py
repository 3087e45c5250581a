"""bench/train_ops_bench.py: forward+backward workloads come from the registry (ops with a
`backward:`, their `bench:` presets, `baseline:` and `reference:`), with the bytes each
pass must move. One tiny run on the CPU: this tests the command, not the speed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import backplane

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import train_ops_bench  # noqa: E402


def test_each_op_with_a_backward_gets_its_largest_contiguous_preset():
    for op in backplane.ops():
        chosen = train_ops_bench.chosen_presets(op, "")
        contiguous = [p for p in op.bench if not p.get("layout")]
        assert len(chosen) == (1 if contiguous else 0), op.name
        assert all(not p.get("layout") for p in chosen)
        assert train_ops_bench.chosen_presets(op, "all") == list(op.bench)
    by_name = {op.name: op for op in backplane.ops()}
    assert [p["name"] for p in train_ops_bench.chosen_presets(by_name["rms_norm"], "")] == ["prefill_8192x4096"]
    assert [p["name"] for p in train_ops_bench.chosen_presets(by_name["rms_norm"], "decode_1x4096")] == ["decode_1x4096"]
    every_add = [p["name"] for p in train_ops_bench.chosen_presets(by_name["add"], "all")]
    assert "1M_elements" in every_add and "1M_broadcast_row" in every_add
    assert "1M_transposed" in every_add and "64M_sliced" in every_add  # presets in a layout too


def test_a_preset_layout_gives_the_conformance_suites_views_and_their_gradient():
    add = next(o for o in backplane.ops() if o.name == "add")
    g = torch.Generator().manual_seed(0)
    expected_strides = {"transposed": (1, 2), "strided": (6, 2), "offset": (3, 1), "expanded": (0, 1)}
    for layout, strides in expected_strides.items():
        values = train_ops_bench.inputs_for(add, {"args": {"a": [2, 3], "b": [2, 3]}, "layout": layout}, "cpu",
                                            torch.float32, g)
        a, b = values["a"], values["b"]
        assert a.shape == (2, 3) and a.stride() == strides and b.stride() == strides, layout
        assert a.storage_offset() == (5 if layout == "offset" else 0), layout
        assert a.requires_grad and not a.is_leaf, layout  # a view of the leaf that gets the gradient
        (grad_a,) = torch.autograd.grad(torch.ops.backplane.add(a, b).sum(), a)
        assert torch.equal(grad_a, torch.ones(2, 3)), layout
    permuted = train_ops_bench.inputs_for(add, {"args": {"a": [2, 3, 4], "b": [2, 3, 4]}, "layout": "permuted"},
                                          "cpu", torch.float32, g)
    assert permuted["a"].shape == (2, 3, 4) and permuted["a"].stride() == (1, 2, 6) == permuted["b"].stride()
    refusals = {"transposed": "transposed layout does not fit 1 dimensions",
                "permuted": "permuted layout does not fit 1 dimensions",
                "diagonal": "unknown layout 'diagonal'; known: transposed, strided, offset, expanded, permuted"}
    for layout, message in refusals.items():
        with pytest.raises(ValueError) as refused:
            train_ops_bench.laid_out([4], layout, g, "cpu", torch.float32, False)
        assert str(refused.value) == message


def _pass_bytes(name, sizes, layout=None):
    op = next(o for o in backplane.ops() if o.name == name)
    values = train_ops_bench.inputs_for(op, {"args": sizes, "layout": layout}, "cpu", torch.float32,
                                        torch.Generator().manual_seed(0))
    args, kwargs = train_ops_bench.call_args(backplane.torch_op(name).default._schema, values)
    output = backplane.torch_op(name)(*args, **kwargs)
    return train_ops_bench.pass_bytes(op, values, output)


def test_bytes_are_what_each_pass_must_move():
    N, W = 4 * 6 * 4, 6 * 4  # bytes of a [4, 6] and a [6] float32 tensor
    # forward: reads x and weight, writes y; backward: reads grad, x and weight, writes dx and dweight
    assert _pass_bytes("rms_norm", {"x": [4, 6], "weight": [6]}) == (2 * N + W, 3 * N + 2 * W)
    # backward: reads grad and the output, writes dx
    assert _pass_bytes("softmax", {"x": [4, 6]}) == (2 * N, 3 * N)
    # backward: reads grad and both caches, writes dx; the caches get no gradient
    X, C = 4 * 6 * 4 * 4, 6 * 2 * 4  # x [4, 6, 4], cos and sin [6, 2]
    assert _pass_bytes("rotary", {"x": [4, 6, 4], "cos": [6, 2], "sin": [6, 2]}) == (2 * X + 2 * C, 2 * X + 2 * C)
    # add: a's gradient is grad itself (nothing moves); b's is grad * alpha
    assert _pass_bytes("add", {"a": [4, 6], "b": [4, 6]}) == (3 * N, 2 * N)
    # ... and with b broadcast, grad * alpha is summed to b's size
    assert _pass_bytes("add", {"a": [4, 6], "b": [6]}) == (2 * N + W, N + W)
    assert _pass_bytes("identity_conv", {"x": [4, 6]}) == (2 * N, 0)
    # a view reads its elements, once each: every one of a sliced view, one row of an
    # expanded one; the gradient written is the view's size either way
    assert _pass_bytes("softmax", {"x": [4, 6]}, "strided") == (2 * N, 3 * N)
    assert _pass_bytes("softmax", {"x": [4, 6]}, "expanded") == (N + W, 3 * N)
    # rms_norm's backward reads x and weight again: one row of x, one element of weight
    assert _pass_bytes("rms_norm", {"x": [4, 6], "weight": [6]}, "expanded") == (N + W + 4, 2 * N + 2 * W + 4)


@pytest.mark.slow
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


def test_skip_compile_times_the_rest_without_torch_compile(tmp_path):
    out = tmp_path / "rows.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_bench.py"), "--device", "cpu", "--dtypes",
                           "float32", "--ops", "add", "--shapes", "1M_permuted", "--forward-only", "--skip-compile",
                           "--json", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["shape"], r["variant"]) for r in rows] == [("1M_permuted", "backplane"), ("1M_permuted", "reference")]


def test_a_shape_no_op_has_is_refused_naming_the_known_ones():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_bench.py"), "--device", "cpu",
                           "--shapes", "nosuch,1M_transposed"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert "no bench: preset named nosuch; known: " in done.stderr, done.stderr
    assert "decode_1x4096" in done.stderr and "1M_transposed" in done.stderr


def test_graph_calls_needs_a_cuda_graph_and_a_positive_count():
    for extra in (["--graph-calls", "20"], ["--cuda-graph", "--graph-calls", "0"]):
        done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_bench.py"), "--device", "cuda", *extra],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 2, extra
        assert "--graph-calls takes a count of at least 1, with --cuda-graph (got " in done.stderr, done.stderr


def test_a_variant_that_disagrees_is_reported_not_timed():
    x = torch.randn(3, 5, requires_grad=True)
    right = {"backplane": lambda: torch.ops.backplane.softmax(x), "reference": lambda: torch.softmax(x, -1)}
    assert train_ops_bench.disagreements(right, (x,)) == ""
    wrong = {**right, "reference": lambda: torch.softmax(x, 0)}
    assert train_ops_bench.disagreements(wrong, (x,)).startswith("reference's output differs from backplane's: ")
    # the same values, a gradient of zero
    wrong_gradient = {**right, "reference": lambda: torch.softmax(x, -1).detach() + 0 * x}
    assert train_ops_bench.disagreements(wrong_gradient, (x,)).startswith("reference's gradient 0 differs from backplane's: ")


def test_variants_are_timed_in_turn_each_round():
    from device_timer import interleaved_device_ms

    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    medians = interleaved_device_ms(fns, "cpu", reps=2, rounds=3)
    assert sorted(medians) == ["a", "b", "c"]
    timed = calls[3 * 5:]  # after each fn's 5 warm-up calls
    assert timed == ["a", "a", "b", "b", "c", "c", "c", "c", "b", "b", "a", "a", "a", "a", "b", "b", "c", "c"]


def test_report_puts_two_runs_side_by_side(tmp_path):
    import train_ops_report

    def run(ours, aten, torch_version="2.11.0"):
        rows = [{"op": "add", "shape": "1M_elements", "dtype": "bfloat16", "variant": variant, "us": us,
                 "gbps": 6.0 / us, "copy_gbps": 3.0} for variant, us in (("backplane", ours), ("reference", aten))]
        rows.append({**rows[0], "dtype": "float32"})  # no PyTorch variant timed: an empty cell
        return {"torch": torch_version, "rows": rows}

    first, second = run(2.0, 2.0), run(1.6, 2.0)
    first["rows"].append({**first["rows"][0], "shape": "64M_elements"})  # only in the first run
    first["rows"].append({**first["rows"][1], "shape": "64M_elements", "us": 3.0})
    text = train_ops_report.markdown([first, second])
    assert "| op | preset | bfloat16 | float32 |" in text
    assert "| add | 1M_elements | 2.00 → 1.60, 100% → 125%, 1.000 → 1.250 |  |" in text
    assert "| add | 64M_elements | 2.00 → -, 100% → -, 1.500 → - |  |" in text
    assert text.startswith("torch 2.11.0; each cell: µs, % of copy_, × the fastest PyTorch variant "
                           "(first run → second)")
    (tmp_path / "a.json").write_text(json.dumps(run(2.0, 3.0)))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_report.py"), str(tmp_path / "a.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "| add | 1M_elements | 2.00, 100%, 1.500 |  |" in done.stdout, done.stderr
    assert subprocess.run([sys.executable, str(ROOT / "bench" / "train_ops_report.py")], capture_output=True,
                          timeout=60).returncode == 2
