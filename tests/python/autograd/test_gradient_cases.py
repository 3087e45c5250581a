"""The conformance suite's gradient cases (core/src/conformance/gradient_cases.cpp): each
`backward:` formula against autograd through the op's `reference:`, one case per registry
sample, in float64. The `swapped_grad` fixture plugin (tests/fixtures/vendor/
swapped_grad_ops.yaml) has a formula with two arguments swapped and is otherwise right:
`backplane check` and backplane.check() must fail it naming the op, the argument, the
formula and its file:line; --no-gradients / gradients=False leave the cases out; every
in-tree formula passes on cpu. The fixture loads in child processes: defined ops stay
defined for the life of a process."""
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import backplane
from conftest import child_env, run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURE_DIR = BACKPLANE.parent.parent / "tests" / "fixtures" / "swapped_grad"
FRAGMENT = FIXTURE_DIR / "libbackplane_swapped_grad.ops.yaml"  # the plugin's copy, as messages name it
SWAPPED = "aten::div.Tensor(b, grad)"  # a's formula; right: aten::div.Tensor(grad, b)
REFERENCE = "aten::div.Tensor(a, b)"


def where(text):
    """FRAGMENT:line:column of the YAML value `text` (the column of its quote, if quoted)."""
    for number, line in enumerate(FRAGMENT.read_text().splitlines(), 1):
        for value in (f'"{text}"', text):
            if line.endswith(value):
                return f"{FRAGMENT}:{number}:{len(line) - len(value) + 1}"
    raise AssertionError(f"{text} is not in {FRAGMENT}")


EXPECTED = (f"swapped_grad::ratio: the gradient of 'a' by its backward formula `{SWAPPED}` ({where(SWAPPED)}) "
            f"differs from autograd through the reference `{REFERENCE}` ({where(REFERENCE)}): ")


def cli(*args):
    return subprocess.run([str(BACKPLANE), "check", "swapped_grad", "--plugin-path", str(FIXTURE_DIR), *args],
                          capture_output=True, text=True, env=child_env(), timeout=300)


def test_check_names_the_op_the_swapped_formula_and_its_line():
    r = cli("--json")
    assert r.returncode == 1, r.stdout + r.stderr
    (row,) = [row for row in json.loads(r.stdout) if row["op"] == "swapped_grad::ratio"]
    assert row["failures"], row
    for failure in row["failures"]:  # only gradient cases fail: the kernel and the reference are right
        assert failure["case"].startswith("gradient/") and failure["dtype"] == "float64", failure
        assert failure["detail"].startswith(EXPECTED), failure["detail"]
        assert "'b'" not in failure["detail"], failure["detail"]  # b's formula is right
    text = cli()
    assert f"    FAILED {row['failures'][0]['case']} [float64]: {EXPECTED}" in text.stdout, text.stdout


def test_no_gradients_leaves_the_gradient_cases_out():
    r = cli("--json", "--no-gradients")
    assert r.returncode == 0, r.stdout + r.stderr
    (row,) = [row for row in json.loads(r.stdout) if row["op"] == "swapped_grad::ratio"]
    assert row["status"] == "passed" and row["passed"] > 0, row
    usage = subprocess.run([str(BACKPLANE), "check", "--help"], capture_output=True, text=True, env=child_env())
    assert "--no-gradients           leave out the gradient cases" in usage.stdout, usage.stdout


def test_python_check_reports_the_gradient_cases_and_can_leave_them_out():
    code = f"""
import json, backplane
backplane.load("swapped_grad", path={str(FIXTURE_DIR)!r})
(op,) = [op for op in backplane.ops() if op.name == "swapped_grad::ratio"]
rows = {{str(g): [(r.case, r.dtype, r.outcome, r.detail) for r in backplane.check("swapped_grad", op.name, gradients=g)]
        for g in (True, False)}}
print(json.dumps({{"samples": [s["name"] for s in op.samples], **rows}}))
"""
    done = run_python(code, env={"BACKPLANE_BACKENDS": "none"})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    gradient = {case: (dtype, outcome, detail) for case, dtype, outcome, detail in rows["True"]
                if case.startswith("gradient/")}
    assert list(gradient) == [f"gradient/{name}" for name in rows["samples"]], gradient  # one per sample
    for case, (dtype, outcome, detail) in gradient.items():
        # The empty sample has no element to differ; every other one fails, named.
        want = ("passed", "") if case == "gradient/empty" else ("failed", EXPECTED)
        assert (dtype, outcome, detail[:len(want[1])]) == ("float64", *want), (case, detail)
    assert not [r for r in rows["False"] if r[0].startswith("gradient/")]
    assert {r[2] for r in rows["False"]} <= {"passed", "skipped"}, rows["False"]


def test_every_in_tree_backward_formula_matches_autograd_through_its_reference_on_cpu():
    ops = [op for op in backplane.ops() if op.namespace == "backplane" and op.backward and op.reference]
    assert {"add", "rms_norm", "rotary", "softmax"} <= {op.name for op in ops}
    results = [r for r in backplane.check("cpu", [op.name for op in ops]) if r.case.startswith("gradient/")]
    assert Counter(r.op for r in results) == {op.name: len(op.samples) for op in ops}  # one case per sample
    assert {r.dtype for r in results} == {"float64"}
    assert [r for r in results if r.outcome != "passed"] == []


def _npu_gradient_outcomes(before):
    """The gradient cases of add on npu, in a child process that runs `before` first."""
    code = f"""
import json, torch, backplane
{before}
backplane.load("npu")
print(json.dumps([(r.outcome, r.detail) for r in backplane.check("npu", "add") if r.case.startswith("gradient/")]))
"""
    done = run_python(code, env={"BACKPLANE_BACKENDS": "none"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_gradient_cases_run_on_npu_and_skip_where_the_autograd_engine_predates_it():
    assert {outcome for outcome, _ in _npu_gradient_outcomes("")} == {"passed"}
    # A backward before the device's plugin loads starts PyTorch's engine without a thread
    # for it: said as a skip with the reason, not as the engine's internal assert.
    # Where the engine made room for the device anyway (torch 2.11 beside a CUDA device, on
    # the GPU machine) the cases pass; a failure (the engine's internal assert) never.
    late = _npu_gradient_outcomes("torch.ones(1, requires_grad=True).sum().backward()")
    assert late and {outcome for outcome, _ in late} <= {"skipped", "passed"}, late
    assert {detail for outcome, detail in late if outcome == "skipped"} <= {
        "PyTorch's autograd engine has no thread for npu: it started (at the process's first backward) before that "
        "device's plugin loaded; load the plugin before any backward"}
