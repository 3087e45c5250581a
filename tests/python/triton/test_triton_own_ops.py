"""A plugin of kind triton with ops of its own: the fixture tests/fixtures/triton_own_ops
(plugin fixture_tlx) names a registry fragment in its manifest (`registry:`), which the
loader defines exactly as a library's (docs/vendor-ops.md) before the package's kernels are
offered; its @triton.jit kernel serves tlx::scale_add. Under Triton's interpreter
(conftest.py) on the CPU: the conformance suite, opcheck, gradcheck in float64, listing,
torch.compile; an edited fragment picked up by a fresh process with nothing built; the
fragment refusals a library gets; the package and manifest agreeing on `ns::op` names.

Loading here is for good (ops are never undefined), so the fixture loads once in this
process, in a namespace no other test uses; a scenario that defines other ops runs in a
fresh process."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton", reason="a triton plugin needs the triton package (CUDA builds of torch ship it)")

import backplane  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURE = REPO / "tests" / "fixtures" / "triton_own_ops"
PACKAGE = "backplane_fixture_tlx"
FRAGMENT = FIXTURE / PACKAGE / "ops.yaml"
PROGRAMS = Path(__file__).with_name("programs")
INTERPRET = {"TRITON_INTERPRET": "1", "BACKPLANE_BACKENDS": "none"}


@pytest.fixture(scope="module")
def run_python(request):
    """tests/python/conftest.py's run_python (this folder's conftest.py takes the module name
    `conftest`), from the conftest module pytest already imported."""
    (tests_conftest,) = [m for m in request.config.pluginmanager.get_plugins()
                         if getattr(m, "__file__", None) == str(REPO / "tests" / "python" / "conftest.py")]
    return tests_conftest.run_python


@pytest.fixture(scope="module")
def plugin():
    (loaded,) = backplane.load("fixture_tlx", path=str(FIXTURE))
    return loaded


def test_it_loads_with_the_op_its_fragment_defines(plugin):
    assert (plugin.status, plugin.kind, plugin.dispatch_key) == ("loaded", "triton", "CPU"), plugin
    assert plugin.ops == ("tlx::scale_add",)
    assert plugin.registry == str(FRAGMENT)
    op = torch.ops.tlx.scale_add.default
    assert str(op._schema) == "tlx::scale_add(Tensor x, Tensor y, float alpha) -> Tensor"
    assert torch.Tag.pt2_compliant_tag in op.tags
    listed = {o.name: o for o in backplane.ops()}["tlx::scale_add"]
    assert (listed.namespace, listed.backends["fixture_tlx"]) == ("tlx", ("float32", "float64"))
    # alpha reaches the kernel in the op's dtype: float64 is exact, not rounded to float32.
    x, y = torch.randn(4, 5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    torch.testing.assert_close(torch.ops.tlx.scale_add(x, y, 0.3), x + 0.3 * y, rtol=0, atol=0)
    # Meta from the shape rule: no fake registration in the package.
    assert torch.ops.tlx.scale_add(x.to("meta"), y.to("meta"), 2.0).shape == (4, 5)


def test_the_contract_names_the_op(plugin):
    with pytest.raises(ValueError) as caught:
        torch.ops.tlx.scale_add(torch.randn(2, 3), torch.randn(4), 1.0)
    assert str(caught.value).startswith(
        "tlx::scale_add: sizes of 'x' [2, 3] and 'y' [4] do not broadcast (dimension -1: 3 vs 4)"), caught.value


def test_the_conformance_suite_passes_with_its_gradient_and_error_cases(plugin):
    results = backplane.check("fixture_tlx", ["tlx::scale_add"])
    failed = [r for r in results if r.outcome not in ("passed", "skipped")]
    assert not failed, "\n".join(f"{r.case} [{r.dtype}]: {r.outcome} {r.detail}" for r in failed[:8])
    passed = {r.case for r in results if r.outcome == "passed"}
    assert {"gradient/broadcast", "error/not_broadcastable", "fractional_alpha/transposed"} <= passed, sorted(passed)


def test_opcheck_and_gradcheck_in_float64(plugin):
    op = torch.ops.tlx.scale_add.default
    for dtype in (torch.float32, torch.float64):
        torch.library.opcheck(op, (torch.randn(4, 1, 5, dtype=dtype), torch.randn(3, 5, dtype=dtype), -0.75))
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: torch.ops.tlx.scale_add(a, b, 0.3), (x, y))


def test_under_torch_compile_the_call_stays_the_plugins_and_says_why(plugin):
    from backplane.compile import resolutions
    from torch._inductor.utils import fresh_cache

    x, y = torch.randn(6, 8), torch.randn(8)

    def f(x, y):  # the op alone: Inductor then compiles no C++ kernel around it (seconds saved)
        return torch.ops.tlx.scale_add(x, y, 1.5)

    with fresh_cache():  # a cached graph skips the selection pass, which records resolutions
        torch._dynamo.reset()
        before = len(resolutions())
        got = torch.compile(f, fullgraph=True)(x, y)
        chosen = [r for r in resolutions()[before:] if r["op"] == "tlx::scale_add"]
    torch.testing.assert_close(got, x + 1.5 * y, rtol=0, atol=0)
    assert chosen and not chosen[0]["traced"], chosen
    assert chosen[0]["choice"].startswith("fixture_tlx (kept as a call: Triton's interpreter"), chosen


def test_backplane_list_shows_it_and_its_fragment_from_the_manifest():
    # The C++ command has no Python: it lists the plugin from its manifest without loading it.
    env = {k: v for k, v in os.environ.items() if k != "BACKPLANE_BACKENDS"}  # "none" would list nothing
    listed = subprocess.run([str(BACKPLANE), "list", "--json", "--plugin-path", str(FIXTURE)], capture_output=True,
                            text=True, timeout=60, env=env)
    assert listed.returncode == 0, listed.stderr
    (record,) = [b for b in json.loads(listed.stdout)["backends"] if b["name"] == "fixture_tlx"]
    assert (record["kind"], record["ops"], record["registry"]) == ("triton", ["tlx::scale_add"], str(FRAGMENT))


def _copy_fixture(folder: Path) -> Path:
    shutil.copytree(FIXTURE, folder)
    shutil.rmtree(folder / PACKAGE / "__pycache__", ignore_errors=True)
    return folder


def test_an_edited_fragment_is_picked_up_by_a_fresh_process_with_nothing_built(run_python, tmp_path):
    plugin_dir = _copy_fixture(tmp_path / "plugin")
    with open(plugin_dir / PACKAGE / "ops.yaml", "a") as f:
        f.write("\n  - schema: scale_sub(Tensor x, Tensor y, float alpha) -> Tensor\n"
                "    doc: x - alpha * y, with broadcasting.\n    dtypes: [float32]\n    shape: {broadcast: [x, y]}\n"
                "    reference: aten::sub.Tensor(x, y, alpha=alpha)\n"
                "    backward: {x: grad, y: \"aten::neg(aten::mul.Scalar(grad, alpha))\"}\n"
                "    samples:\n      - {x: [4, 33], y: [33], alpha: 0.5}\n")
    with open(plugin_dir / PACKAGE / "__init__.py", "a") as f:
        f.write("\n\ndef kernels():\n    return {'tlx::scale_add': scale_add,\n"
                "            'tlx::scale_sub': lambda out, x, y, alpha: scale_add(out, x, y, -alpha)}\n")
    manifest = plugin_dir / "libbackplane_fixture_tlx.manifest.yaml"
    manifest.write_text(manifest.read_text().replace('ops: ["tlx::scale_add"]', "ops: [tlx::scale_add, tlx::scale_sub]"))
    done = run_python(PROGRAMS / "own_ops_edited_fragment.py", plugin_dir, env=INTERPRET)
    assert done.returncode == 0 and done.stdout.endswith("ok\n"), done.stdout[-2000:] + done.stderr[-4000:]


def _plugin(folder: Path, name: str, fragment: str, ops: str, serves: str = "") -> Path:
    """A triton plugin `name` in folder/name: the fixture's package as pkg_<name> with
    `fragment` as its ops.yaml (and kernels() giving `serves`, a dict's Python text, when
    given), its manifest listing `ops`."""
    plugin_dir = folder / name
    shutil.copytree(FIXTURE / PACKAGE, plugin_dir / f"pkg_{name}", ignore=shutil.ignore_patterns("__pycache__"))
    (plugin_dir / f"pkg_{name}" / "ops.yaml").write_text(fragment)
    if serves:
        with open(plugin_dir / f"pkg_{name}" / "__init__.py", "a") as f:
            f.write(f"\n\ndef kernels():\n    return {serves}\n")
    (plugin_dir / f"libbackplane_{name}.manifest.yaml").write_text(
        f'backplane_plugin_abi: 1\nname: {name}\nversion: "0.1"\nkind: triton\ndispatch_key: CUDA\n'
        f'python_module: pkg_{name}\npython_path: .\nregistry: pkg_{name}/ops.yaml\nops: {ops}\n'
        f'triton: ">=3.0"\ntorch: ">=2.11"\n')
    return plugin_dir


SCALE_ADD = FRAGMENT.read_text().split("ops:\n", 1)[1]


def _refusal(plugin_dir: Path, name: str) -> str:
    with pytest.raises(backplane.BackendError) as caught:
        backplane.load(name, path=str(plugin_dir))
    listed = {b.name: b for b in backplane.backends()}[name]  # the loader keeps the record of a refused load
    assert listed.status == "rejected" and str(caught.value).endswith(listed.reason), (listed, caught.value)
    return str(caught.value)


# The fragment refusals run in this process: the loader refuses these while inspecting the
# plugin, before anything is defined or imported.
def test_a_fragment_redefining_a_core_op_leaves_the_plugin_rejected_naming_both_places(tmp_path):
    fragment = ("namespace: backplane\nops:\n  - schema: add(Tensor a, Tensor b, *, Scalar alpha=1) -> Tensor\n"
                "    doc: a + alpha * b.\n    dtypes: [float32]\n    shape: {broadcast: [a, b]}\n"
                "    reference: aten::add.Tensor(a, b, alpha=alpha)\n")
    plugin_dir = _plugin(tmp_path, "redefines_add", fragment, "[add]", serves="{'add': scale_add}")
    lines = (REPO / "registry" / "ops.yaml").read_text().splitlines()
    core_line = 1 + next(i for i, line in enumerate(lines) if line.startswith("  - schema: add("))
    manifest = plugin_dir / "libbackplane_redefines_add.manifest.yaml"
    assert _refusal(plugin_dir, "redefines_add") == (
        f"backend 'redefines_add' rejected ({manifest}): its registry fragment is refused: "
        f"{plugin_dir}/pkg_redefines_add/ops.yaml:3:5: redefines backplane::add, which the core registry defines at "
        f"registry/ops.yaml:{core_line}:5; a plugin's ops go in a namespace of its own")


def test_a_fragment_that_is_not_yaml_leaves_the_plugin_rejected_at_its_line_and_column(tmp_path):
    plugin_dir = _plugin(tmp_path, "bad_yaml", "namespace: tly\nops:\n  - schema: [scale_add(Tensor x\n    doc: x\n",
                         '["tly::scale_add"]')
    assert _refusal(plugin_dir, "bad_yaml").endswith(
        f"its registry fragment is refused: {plugin_dir}/pkg_bad_yaml/ops.yaml:4:8: invalid YAML: "
        "end of sequence flow not found")


def test_a_fragment_outside_the_plugins_directory_is_refused_as_a_librarys_is(tmp_path):
    plugin_dir = _plugin(tmp_path, "outside", FRAGMENT.read_text(), '["tlx::scale_add"]')
    manifest = plugin_dir / "libbackplane_outside.manifest.yaml"
    manifest.write_text(manifest.read_text().replace("registry: pkg_outside/ops.yaml", "registry: ../ops.yaml"))
    assert _refusal(plugin_dir, "outside") == (
        f"backend 'outside' rejected ({manifest}): bad manifest {manifest}:8:11: key 'registry' should be a file "
        "relative to the manifest, without '..'; found '../ops.yaml'")


def test_a_second_plugin_defining_the_fixtures_op_is_refused_naming_the_first(plugin, tmp_path):
    plugin_dir = _plugin(tmp_path, "twin", FRAGMENT.read_text(), '["tlx::scale_add"]')
    assert _refusal(plugin_dir, "twin").endswith(
        f"{plugin_dir}/pkg_twin/ops.yaml:7:5: redefines tlx::scale_add, which plugin 'fixture_tlx' already defined "
        f"at {FRAGMENT}:7:5")


def test_the_package_and_the_manifest_must_agree_on_its_ops_by_id(run_python, tmp_path):
    _plugin(tmp_path, "unlisted", "namespace: tlu\nops:\n" + SCALE_ADD, "[]", serves="{'tlu::scale_add': scale_add}")
    _plugin(tmp_path, "unserved", "namespace: tlv\nops:\n" + SCALE_ADD, '["tlv::scale_add"]', serves="{}")
    _plugin(tmp_path, "bare", "namespace: tlb\nops:\n" + SCALE_ADD, '["tlb::scale_add"]',
            serves="{'scale_add': scale_add}")
    done = run_python(PROGRAMS / "own_ops_names_must_agree.py", tmp_path, env=INTERPRET)
    assert done.returncode == 0, done.stderr[-4000:]
    messages = json.loads(done.stdout)
    manifest = {name: tmp_path / name / f"libbackplane_{name}.manifest.yaml" for name in messages}
    assert messages["unlisted"] == (
        f"backend 'unlisted' failed ({manifest['unlisted']}): its package 'pkg_unlisted' serves [tlu::scale_add], "
        f"which its manifest {manifest['unlisted']} does not list (it lists []): add them to the manifest's ops")
    assert messages["unserved"] == (
        f"backend 'unserved' failed ({manifest['unserved']}): its manifest {manifest['unserved']} lists "
        "[tlv::scale_add], which its package 'pkg_unserved' does not serve (its kernels() has no launcher for them): "
        "take them out of the manifest's ops")
    assert messages["bare"] == (
        f"backend 'bare' failed ({manifest['bare']}): its package 'pkg_bare' serves [scale_add], which its manifest "
        f"{manifest['bare']} does not list (it lists [tlb::scale_add]): kernels() names a plugin's own op by its id, "
        "as the manifest does: 'tlb::scale_add', not 'scale_add'")
