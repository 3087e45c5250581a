"""A plugin's own ops (docs/vendor-ops.md), through the fixture plugin `acme`: its registry
fragment (tests/fixtures/vendor/acme_ops.yaml) defines acme::fused_gelu, acme::clamp_ and
acme::gelu (a str argument with `choices:`), which get schemas, Meta kernels, autograd, the conformance suite, opcheck, the CLI and the
bench like the core's ops; `acme_clash` redefines one and is refused. Each test runs in a
child process: defined ops stay defined for the life of a process."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
FRAGMENT = FIXTURES / "libbackplane_acme.ops.yaml"

PRELUDE = """
import torch, backplane
backplane.load("cpu")
acme = backplane.load("acme", path={path!r})[0]
gelu = backplane.torch_op("acme::fused_gelu")
"""


def env():
    full = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    full.pop("BACKPLANE_BACKENDS", None)
    return full


def python(code, acme_path=FIXTURES):
    prelude = PRELUDE.format(path=str(acme_path))
    r = run_python(prelude + code)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def cli(*args):
    return subprocess.run([str(BACKPLANE), *args], capture_output=True, text=True, env=env(), timeout=300)


def test_vendor_ops_are_listed_and_compute():
    python("""
assert acme.ops == ("acme::fused_gelu", "acme::clamp_", "acme::gelu"), acme.ops
assert acme.registry.endswith("libbackplane_acme.ops.yaml"), acme.registry
info = {op.name: op for op in backplane.ops()}
assert info["acme::fused_gelu"].namespace == "acme" and info["acme::fused_gelu"].backends["acme"]
assert info["add"].namespace == "backplane"
x = torch.randn(4, 33, dtype=torch.float64)
torch.testing.assert_close(torch.ops.acme.fused_gelu(x), torch.nn.functional.gelu(x))
y = x.clone()
torch.ops.acme.clamp_(y, -0.25, 0.25)
torch.testing.assert_close(y, x.clamp(-0.25, 0.25))
# The Meta kernel from the shape rule, and the contract's checks under the op's own name.
assert gelu(torch.empty(3, 7, device="meta")).shape == (3, 7)
try:
    gelu(torch.ones(3, dtype=torch.int32))
    raise SystemExit("an int32 input was accepted")
except TypeError as e:
    assert "acme::fused_gelu: argument 'x' has dtype int32" in str(e), e
""")


def test_conformance_opcheck_gradcheck_and_compile():
    python("""
results = backplane.check("acme")
assert {r.op for r in results} >= {"acme::fused_gelu", "acme::clamp_"}
mine = [r for r in results if r.op.startswith("acme::")]
assert mine and all(r.outcome in ("passed", "skipped") for r in mine), [r for r in mine if r.outcome == "failed"][:3]
x = torch.randn(5, 9, dtype=torch.float64, requires_grad=True)
torch.library.opcheck(gelu.default, (torch.randn(4, 33),))
torch.library.opcheck(torch.ops.acme.clamp_.default, (torch.randn(4, 33), -0.5, 0.5))
assert torch.autograd.gradcheck(gelu, (x,))
compiled = torch.compile(lambda t: gelu(t) * 2, backend="aot_eager", fullgraph=True)
torch.testing.assert_close(compiled(x.detach()), torch.nn.functional.gelu(x.detach()) * 2)
# clamp_ has no backward: asking for one is an error naming the op, never a silent None.
w = torch.randn(3, requires_grad=True)
c = w.clone()
torch.ops.acme.clamp_(c, 0.0, 1.0)
try:
    c.sum().backward()
    raise SystemExit("backward through clamp_ was accepted")
except RuntimeError as e:
    assert "acme::clamp_" in str(e), e
""")


def test_a_colliding_fragment_is_refused_naming_both_files_and_lines():
    python(f"""
try:
    backplane.load("acme_clash", path={str(FIXTURES / "clash")!r})
    raise SystemExit("the clash was accepted")
except backplane.BackendError as e:
    text = str(e)
clash = {str(FIXTURES / "clash" / "libbackplane_acme_clash.ops.yaml")!r}
assert clash + ":5:5: redefines acme::fused_gelu, which plugin 'acme' already defined at " in text, text
assert {str(FRAGMENT)!r} + ":5:5" in text, text
# acme's op is untouched.
x = torch.randn(8)
torch.testing.assert_close(gelu(x), torch.nn.functional.gelu(x))
""")


def test_cli_lists_checks_and_benchmarks_vendor_ops():
    listed = cli("ops", "--backends", "cpu,acme", "--plugin-path", str(FIXTURES))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    columns = lines[0].split()[1:3]  # the backends, in the table's order
    row = next(line for line in lines if line.startswith("acme::fused_gelu"))
    cells = dict(zip(columns, row.split()[1:3]))
    assert cells == {"cpu": "-", "acme": "yes"}, listed.stdout  # cpu lacks it, acme has it
    checked = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::fused_gelu")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"acme::fused_gelu +[1-9][0-9]* +0 ", checked.stdout), checked.stdout  # passed, none failed
    unknown = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::nosuch")
    assert unknown.returncode == 2 and "no op 'acme::nosuch'" in unknown.stderr, unknown.stderr
    bench = cli("bench", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::fused_gelu",
                "--dtypes", "float32", "--min-time", "0.01", "--repetitions", "1")
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    assert "acme::fused_gelu" in bench.stdout and "FAILED:" not in bench.stdout, bench.stdout[-2000:]


def test_a_str_argument_comes_from_samples_errors_and_bench_and_the_contract_checks_it():
    """acme::gelu(Tensor x, *, str approximate='none'), choices [none, tanh]: its samples and
    bench preset give 'tanh' (through the C interface to Python too), its `errors:` case
    gives a bad string, and the contract refuses that string before the kernel (which passes
    it on unchecked) on the CPU and under Meta alike."""
    python("""
import torch.nn.functional as F
op = {o.name: o for o in backplane.ops()}["acme::gelu"]
assert [s["args"].get("approximate") for s in op.samples] == [None, "tanh", "tanh"], op.samples
assert op.bench == ({"name": "1M_tanh", "args": {"x": [1048576], "approximate": "tanh"}},), op.bench
values = backplane.sample_values(op, 1, dtype=torch.float64)
assert values["approximate"] == "tanh", values
args, kwargs = backplane.sample_call(op, 1, dtype=torch.float64)
assert kwargs == {"approximate": "tanh"}, kwargs  # keyword-only, as the schema says
y = torch.ops.acme.gelu(*args, **kwargs)
torch.testing.assert_close(y, F.gelu(values["x"], approximate="tanh"), rtol=0, atol=0)
assert not torch.equal(y, F.gelu(values["x"]))
for device in ("cpu", "meta"):
    try:
        torch.ops.acme.gelu(torch.ones(3, device=device), approximate="Tanh")
        raise SystemExit(f"approximate='Tanh' was accepted on {device}")
    except ValueError as e:
        assert str(e).startswith("acme::gelu: argument 'approximate' is 'Tanh'; expected one of: 'none', 'tanh'"), e
results = [r for r in backplane.check("acme") if r.op == "acme::gelu"]
assert not [r for r in results if r.outcome != "passed"], [r for r in results if r.outcome != "passed"][:3]
cases = {r.case for r in results}
assert {"tanh/contiguous", "tanh/transposed", "tanh_three_d/permuted", "error/bad_approximate"} <= cases, cases
""")
    checked = cli("check", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::gelu")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"acme::gelu +[1-9][0-9]* +0 +0", checked.stdout), checked.stdout
    bench = cli("bench", "--backends", "acme", "--plugin-path", str(FIXTURES), "--ops", "acme::gelu",
                "--dtypes", "float32", "--min-time", "0.01", "--repetitions", "1")
    assert bench.returncode == 0, bench.stdout[-2000:] + bench.stderr[-2000:]
    row = next((line for line in bench.stdout.splitlines() if line.startswith("acme::gelu ")), "")
    assert row.split()[1:4] == ["1M_tanh", "float32", "acme"], bench.stdout[-2000:]
    assert "FAILED:" not in bench.stdout, bench.stdout[-2000:]


def _acme_copy(tmp_path, *replacements):
    """The acme fixture plugin copied into tmp_path, its fragment's text edited by each
    (old, new) replacement (each must be there: the fixture changed otherwise)."""
    for f in FIXTURES.glob("libbackplane_acme.*"):
        shutil.copy(f, tmp_path)
    fragment = tmp_path / "libbackplane_acme.ops.yaml"
    text = fragment.read_text()
    for old, new in replacements:
        assert old in text, f"the fixture's fragment changed: update this test ({old!r})"
        text = text.replace(old, new)
    fragment.write_text(text)
    return tmp_path


def _outcomes(folder, op):
    """{sample name: its cases' outcomes, sorted} of backplane.check for op, with acme
    loaded from folder; the contract's and the entry's error cases left out."""
    out = python(f"""
import collections, json
found = collections.defaultdict(set)
for r in backplane.check("acme"):
    if r.op == {op!r} and "/" in r.case and r.case.split("/")[0] not in ("error", "gradient"):
        found[r.case.split("/")[0]].add(r.outcome)
print(json.dumps({{k: sorted(v) for k, v in found.items()}}))
""", acme_path=folder)
    return json.loads(out.strip().splitlines()[-1])


def test_conformance_runs_each_sample_with_its_string(tmp_path):
    """A copy of acme whose gelu reference drops `approximate` (plain erf gelu): the sample
    without the string still passes, the 'tanh' samples fail, so the suite called the
    kernel with 'tanh'."""
    folder = _acme_copy(tmp_path, ("reference: aten::gelu(x, approximate=approximate)", "reference: aten::gelu(x)"))
    found = _outcomes(folder, "acme::gelu")
    assert found["x=[4, 33]"] == ["passed"], found
    assert "failed" in found["tanh"] and "failed" in found["tanh_three_d"], found


def test_conformance_draws_a_samples_values_at_its_magnitude(tmp_path):
    """A copy of acme whose clamp_ claims to be the identity (reference aten::clone(x)) for
    bounds of +-100: true of N(0, 1) values, false at magnitude 1000, where the kernel
    clamps. The conformance inputs (C++) scale by the sample's magnitude."""
    folder = _acme_copy(tmp_path, ("reference: aten::clamp(x, lo, hi)", "reference: aten::clone(x)"),
                        ("- {x: [4, 33], lo: -0.5, hi: 0.5}",
                         "- {name: small, x: [4, 33], lo: -100.0, hi: 100.0}\n"
                         "      - {name: large, x: [4, 33], lo: -100.0, hi: 100.0, magnitude: 1000}"))
    found = _outcomes(folder, "acme::clamp_")
    assert found["small"] == ["passed"], found
    assert found["large"] == ["failed"], found


@pytest.mark.slow
def test_backplane_run_names_the_plugin_a_package_needs_for_its_vendor_ops(tmp_path):
    """An AOTInductor package calling acme::fused_gelu: `backplane run` without acme names
    acme as the plugin to load (found through its fragment on the search path); with it,
    the package runs and matches its reference."""
    python(f"""
from torch._inductor import config
from backplane.aoti.libstdcxx import choose_cxx
from backplane.aoti.layouts import add_layouts

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.ops.acme.fused_gelu(x) * 2

batch = torch.export.Dim("batch", min=2, max=64)
ep = torch.export.export(Model(), (torch.randn(4, 8),), dynamic_shapes=({{0: batch}},))
with config.patch({{"cpp.cxx": (None, choose_cxx(None))}}):
    torch._inductor.aoti_compile_and_package(ep, package_path={str(tmp_path / "m.pt2")!r})
add_layouts({str(tmp_path / "m.pt2")!r}, ep)
cases = []
for b in (2, 5):
    x = torch.randn(b, 8)
    cases.append({{"batch": b, "inputs": [x], "expected": [torch.nn.functional.gelu(x) * 2]}})
torch.save({{"atol": 1e-6, "rtol": 1e-5, "cases": cases}}, {str(tmp_path / "io.pt")!r})
""")
    run = ("run", str(tmp_path / "m.pt2"), "--input", str(tmp_path / "io.pt"), "--repeat", "1")
    env_path = {"BACKPLANE_PLUGIN_PATH": str(FIXTURES)}
    without = subprocess.run([str(BACKPLANE), *run, "--backends", "cpu"], capture_output=True, text=True,
                             env={**env(), **env_path}, timeout=300)
    assert without.returncode == 1, without.stdout + without.stderr
    assert ("the package calls acme::fused_gelu on cpu, but no loaded backend implements it for CPU; load the plugin "
            "that implements it: acme") in without.stdout + without.stderr, without.stdout + without.stderr
    with_acme = subprocess.run([str(BACKPLANE), *run, "--backends", "cpu,acme"], capture_output=True, text=True,
                               env={**env(), **env_path}, timeout=300)
    assert with_acme.returncode == 0, with_acme.stdout + with_acme.stderr


def test_a_second_plugin_implements_another_plugins_op():
    """acme_alt implements acme::fused_gelu from acme's fragment (USES_REGISTRY: it ships
    none). Before acme it is refused, naming the missing op; after it, both serve the op and
    the core chooses per op, as for the core's ops."""
    python(f"""
import warnings
alt = {str(FIXTURES / "alt")!r}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    b = backplane.load("acme_alt", path=alt)[0]
assert b.ops == ("acme::fused_gelu",) and not b.registry, b
assert any("acme::fused_gelu on CPU is offered by 'acme', 'acme_alt'" in str(w.message) for w in caught), caught
with backplane.prefer("acme::fused_gelu", "acme_alt"):
    served = {{(s.op, s.dispatch_key): s.serving for s in backplane.serving()}}
    assert served[("acme::fused_gelu", "CPU")] == "acme_alt", served
    x = torch.randn(33, dtype=torch.float64)
    torch.testing.assert_close(gelu(x), torch.nn.functional.gelu(x))
results = [r for r in backplane.check("acme_alt") if r.op == "acme::fused_gelu"]
assert results and all(r.outcome in ("passed", "skipped") for r in results), results[:3]
""")
    first = subprocess.run([sys.executable, "-c", f"""
import backplane
backplane.load("cpu")
try:
    backplane.load("acme_alt", path={str(FIXTURES / "alt")!r})
    raise SystemExit("loaded before the plugin that defines its op")
except backplane.BackendError as e:
    assert "manifest lists op 'acme::fused_gelu', which the registry does not define" in str(e), e
    assert "load that plugin first" in str(e), e
"""], capture_output=True, text=True, env=env(), timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]


def test_vendor_ops_get_sharding_rules_when_loaded():
    # Registered with DTensor at load, from the fragment like the core's: fused_gelu is
    # pointwise (gelu is, and is not linear), clamp_ keeps the tensor it writes.
    python("""
rules = backplane.sharding.rules()
assert rules["acme::fused_gelu"].kind == "pointwise" and rules["acme::fused_gelu"].linear == (), rules["acme::fused_gelu"]
assert (rules["acme::clamp_"].kind, rules["acme::clamp_"].written) == ("pointwise", "x"), rules["acme::clamp_"]
import torch.distributed as dist
from torch.distributed.tensor import DTensor, Shard, distribute_tensor
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
mesh = torch.distributed.device_mesh.init_device_mesh("cpu", (1,))
x = torch.randn(6, 5, dtype=torch.float64)
y = gelu(distribute_tensor(x, mesh, [Shard(1)]))
assert y.placements == (Shard(1),), y.placements
torch.testing.assert_close(y.full_tensor(), torch.nn.functional.gelu(x))
dist.destroy_process_group()
""")
