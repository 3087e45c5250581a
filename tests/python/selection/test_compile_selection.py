"""Selection at compile time (python/backplane/compile/, docs/selection.md): a selection
file's `inductor` bucket traces the op's reference into compiled graphs, by dtype and size,
with guards at bucket boundaries under dynamic shapes, in Inductor's cache key, and into
AOTInductor packages, which then need no plugin for the op. On CPU, with Inductor's C++
backend, and two plugins (cpu, and the fixture cpu_alt whose identity_conv returns -x),
each program in a child process of its own (programs/compile_*.py)."""
import os
import textwrap
from pathlib import Path

import pytest

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BACKPLANE = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane"))
FIXTURES = BACKPLANE.parent.parent / "tests" / "fixtures"
PROGRAMS = Path(__file__).with_name("programs")

BY_SIZE = """\
backplane_selection: 1
ops:
  - op: identity_conv
    dispatch_key: CPU
    buckets:
      - {up_to: 100, plugin: inductor}
      - {plugin: cpu_alt}
"""
EVERY_SIZE_CPU_ALT = """\
backplane_selection: 1
ops:
  - {op: identity_conv, dispatch_key: CPU, buckets: [{plugin: cpu_alt}]}
"""
FLOAT64_ONLY = """\
backplane_selection: 1
ops:
  - {op: identity_conv, dispatch_key: CPU, dtype: float64, mode: compile, buckets: [{plugin: inductor}]}
  - {op: identity_conv, dispatch_key: CPU, buckets: [{plugin: cpu_alt}]}
"""
TRAINING = """\
backplane_selection: 1
ops:
  - {op: rms_norm, dispatch_key: CPU, buckets: [{plugin: inductor}]}
  - {op: rms_norm_backward, dispatch_key: CPU, buckets: [{plugin: inductor}]}
"""
CROP = """\
backplane_selection: 1
ops:
  - {op: crop, dispatch_key: CPU, buckets: [{plugin: inductor}]}
  - {op: mul, dispatch_key: CPU, buckets: [{plugin: inductor}]}
"""
ROTARY = """\
backplane_selection: 1
ops:
  - {op: rotary, dispatch_key: CPU, buckets: [{plugin: inductor}]}
"""


def _file(tmp_path, text, name="selection.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def _child(program, *args, env=None, own_cache=False):
    """Runs a program in a child process. Each compiles afresh: the FX-graph and AOTAutograd
    caches off, since a graph served from them records no choice (resolutions()), while the
    rest of the worker's Inductor cache (compiled kernels, the compiler's checks) is shared,
    so a child does not pay the compiler's first-use costs again. own_cache: an Inductor cache
    of the test's own with every cache on, for the test of what the cache serves."""
    caches = ({"TORCHINDUCTOR_CACHE_DIR": str(args[0].parent / "cache")} if own_cache else
              {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"})
    r = run_python(PROGRAMS / program, FIXTURES, *args, env={**caches, **(env or {})})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert r.stdout.strip().endswith("ok"), r.stdout
    return r.stdout


@pytest.mark.slow
def test_static_shapes_trace_the_small_calls_and_leave_the_large_to_the_plugin(tmp_path):
    trace = tmp_path / "trace"
    _child("compile_static_by_size.py", _file(tmp_path, BY_SIZE), env={"TORCH_TRACE": str(trace)})
    logged = "".join(p.read_text(errors="replace") for p in trace.glob("*"))
    assert "backplane_selection" in logged and '"choice": "inductor"' in logged  # what tlparse shows


@pytest.mark.slow
def test_dynamic_shapes_guard_the_bucket_boundary(tmp_path):
    _child("compile_dynamic_guards.py", _file(tmp_path, BY_SIZE))


@pytest.mark.slow
def test_a_selection_changed_between_two_compiles_is_not_served_from_the_cache(tmp_path):
    _child("compile_cache_sees_selection.py", _file(tmp_path, BY_SIZE), _file(tmp_path, EVERY_SIZE_CPU_ALT, "b.yaml"),
           own_cache=True)


@pytest.mark.slow
def test_a_file_keyed_by_dtype(tmp_path):
    _child("compile_by_dtype.py", _file(tmp_path, FLOAT64_ONLY))


@pytest.mark.slow
def test_a_training_step_with_forward_and_backward_ops_traced(tmp_path):
    _child("compile_training.py", _file(tmp_path, TRAINING))


@pytest.mark.slow
def test_a_package_made_with_inductor_for_an_op_runs_with_no_plugin(tmp_path):
    package = tmp_path / "model.pt2"
    _child("compile_package_without_the_plugin.py", _file(tmp_path, BY_SIZE), package)
    r = run_python(PROGRAMS / "run_package_without_plugins.py", package, env={"BACKPLANE_BACKENDS": "none"})
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]


@pytest.mark.slow
def test_a_traced_rotary_keeps_attention_free_of_copies(tmp_path):
    _child("compile_layout.py", _file(tmp_path, ROTARY))


@pytest.mark.slow
def test_a_traced_view_returns_memory_of_its_own(tmp_path):
    _child("compile_view_reference.py", _file(tmp_path, CROP))
