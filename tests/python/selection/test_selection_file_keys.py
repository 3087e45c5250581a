"""A selection file's keys beyond plugins by size (core/include/backplane/selection_file.h):
`inductor` buckets, `dtype:` and `mode:` per entry, and `environment:`, compared with this
process's as the file is applied (a warning naming each difference; strict refuses). In
this session's process, with cpu loaded; each test clears the file it applied."""
import textwrap
import warnings

import pytest
import torch

import backplane
from backplane.selection_environment import current, file_sha256


@pytest.fixture(autouse=True)
def _cleared():
    backplane.load("cpu")
    yield
    backplane.apply_selection(None)


def _file(tmp_path, text):
    path = tmp_path / "selection.yaml"
    path.write_text("backplane_selection: 1\n" + textwrap.dedent(text))
    return path


def _refusal(tmp_path, text, strict=False) -> str:
    with pytest.raises(ValueError) as e:
        backplane.apply_selection(_file(tmp_path, text), strict=strict)
    return str(e.value)


def test_inductor_is_refused_for_an_op_that_writes_an_argument(tmp_path):
    message = _refusal(tmp_path, """\
        ops:
          - {op: scale_, dispatch_key: CPU, buckets: [{plugin: inductor}]}
        """)
    assert "'inductor' replaces a call returning new tensors, and 'scale_' writes an argument; name a plugin" in message


def test_inductor_needs_no_plugin_and_is_no_warning_even_strict(tmp_path):
    path = _file(tmp_path, """\
        ops:
          - {op: add, dispatch_key: CPU, buckets: [{up_to: 10, plugin: inductor}, {plugin: cpu}]}
        """)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Said where this process compiled before (another test in this worker): not the point here.
        warnings.filterwarnings("ignore", message=".*functions compiled before keep the choice")
        backplane.apply_selection(path, strict=True)
    (s,) = [s for s in backplane.serving() if s.op == "add" and s.dispatch_key == "CPU"]
    assert s.buckets == ((10, "inductor"), (None, "cpu")) and s.serving == "inductor<=10,cpu", s
    a = torch.randn(3)
    assert torch.equal(torch.ops.backplane.add(a, a), a + a)  # eager: cpu serves the inductor bucket's sizes


@pytest.mark.parametrize("entry, expected", [
    ("{op: add, dispatch_key: CPU, dtype: float33, buckets: [{plugin: cpu}]}",
     "op 'add': dtype: expected one of bfloat16, "),
    ("{op: add, dispatch_key: CPU, mode: fast, buckets: [{plugin: cpu}]}",
     "op 'add': mode: expected eager, graph or compile, found 'fast'"),
])
def test_a_bad_dtype_or_mode_is_refused_with_its_place(tmp_path, entry, expected):
    message = _refusal(tmp_path, f"ops:\n  - {entry}\n")
    assert "selection.yaml:3:" in message and expected in message, message


def test_one_op_twice_for_one_dtype_is_refused_and_for_two_dtypes_accepted(tmp_path):
    twice = """\
        ops:
          - {op: add, dispatch_key: CPU, dtype: float32, buckets: [{plugin: cpu}]}
          - {op: add, dispatch_key: CPU, dtype: float32, buckets: [{plugin: inductor}]}
        """
    assert "op 'add' on CPU for float32 appears twice in the file" in _refusal(tmp_path, twice)
    backplane.apply_selection(_file(tmp_path, twice.replace("dtype: float32, buckets: [{plugin: inductor}]",
                                                            "dtype: float64, buckets: [{plugin: inductor}]")))
    (s,) = [s for s in backplane.serving() if s.op == "add" and s.dispatch_key == "CPU"]
    assert s.by_dtype == {"float32": ((None, "cpu"),), "float64": ((None, "inductor"),)}, s
    assert s.serving == "float32:cpu;float64:inductor;*:cpu", s.serving
    assert "float64 calls: bucket 1 (every size elements): inductor (compiled code; eager calls: cpu)" in s.why, s.why


def _with_environment(tmp_path, environment: str):
    return _file(tmp_path, f"environment:\n{textwrap.indent(textwrap.dedent(environment), '  ')}"
                           "ops:\n  - {op: add, dispatch_key: CPU, buckets: [{plugin: cpu}]}\n")


def test_the_environment_tune_records_is_this_one(tmp_path):
    env = current(["cpu"])
    cpu = [b for b in backplane.backends() if b.name == "cpu"][0]
    assert env["torch"] == torch.__version__
    assert env["plugins"] == [{"name": "cpu", "version": cpu.version, "sha256": file_sha256(cpu.path)}]
    plugin = env["plugins"][0]
    path = _with_environment(tmp_path, f"""\
        torch: "{env['torch']}"
        plugins: [{{name: cpu, version: "{plugin['version']}", sha256: {plugin['sha256']}}}]
        """)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # Said where this process compiled before (another test in this worker): not the point here.
        warnings.filterwarnings("ignore", message=".*functions compiled before keep the choice")
        backplane.apply_selection(path, strict=True)


def test_a_file_measured_elsewhere_warns_once_naming_each_difference_and_strict_refuses(tmp_path):
    path = _with_environment(tmp_path, f"""\
        torch: "1.0.0+cu999"
        devices: [{{type: cuda, name: "NVIDIA H200", capability: "9.0", driver: "580.159.04"}}]
        plugins: [{{name: cpu, version: "9.9.9", sha256: {'0' * 64}}}]
        """)
    with pytest.warns(UserWarning) as caught:
        backplane.apply_selection(path)
    messages = [str(w.message) for w in caught if "measured elsewhere" in str(w.message)]
    assert len(messages) == 1, messages
    (message,) = messages
    assert f"torch 1.0.0+cu999 there, {torch.__version__} here" in message
    assert "plugin cpu version 9.9.9 there" in message and "sha256 000000000000... there" in message
    if not torch.cuda.is_available():  # a device type this process does not have
        assert "device cuda (NVIDIA H200) there, none here" not in message  # CPU-only: devices described: none
    with pytest.raises(ValueError, match="strict: a selection file must be applied where it was measured"):
        backplane.apply_selection(path, strict=True)


def test_an_unknown_environment_key_is_refused(tmp_path):
    message = _refusal(tmp_path, "environment: {torch: x, gpu: y}\nops: []\n")
    assert "environment" in message and "gpu" in message, message


def test_the_largest_int64_as_a_bucket_limit_is_refused(tmp_path):
    # That value means "every larger call": only the last bucket, without up_to, takes it.
    message = _refusal(tmp_path, """\
        ops:
          - {op: add, dispatch_key: CPU, buckets: [{up_to: 9223372036854775807, plugin: cpu}, {plugin: cpu}]}
        """)
    assert "up_to: expected fewer than 9223372036854775807 elements (that many is every larger call" in message, message


def test_a_recorded_serving_names_the_plugins_to_load_and_never_inductor():
    from backplane.aoti.plugins import _from_selection_file, _split_plugins

    assert _split_plugins("cpu") == ["cpu"] and not _from_selection_file("cpu")
    assert _split_plugins("cpu_alt<=4096,cpu") == ["cpu_alt", "cpu"]
    assert _split_plugins("bfloat16:inductor<=65536,cuda;*:cuda") == ["cuda"]
    assert _split_plugins("inductor") == [] and _from_selection_file("inductor")


def test_a_data_dependent_size_stays_the_plugins_and_a_known_one_is_decided():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from backplane.compile.resolve import bucket_of

    rule = {"buckets": [{"up_to": 100, "plugin": "inductor"}, {"up_to": None, "plugin": "cpu"}]}
    unbacked = ShapeEnv().create_unbacked_symint()
    assert bucket_of(rule, [unbacked]) is None  # no guard can be taken on it
    assert bucket_of(rule, [7]) == "inductor" and bucket_of(rule, [101]) == "cpu"
    assert bucket_of(rule, [7, 101]) == "cpu"  # the largest Tensor argument decides
