"""The registry's own checks (issue 32, items 8 and 14), through the build's registry check
(backplane_registry_check, the tool that prints "registry: N ops OK"): every formula is
checked when the registry is read, at the offending name's file:line:column; an error is
said once with exit status 1; strings and None are formula arguments; and namespaces and
op names that PyTorch owns or that torch.ops cannot reach are refused."""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import run_python

REPO = Path(__file__).resolve().parents[3]
BIN = Path(os.environ.get("BACKPLANE_BIN", REPO / "build" / "bin" / "backplane")).parent
CHECK = BIN / "backplane_registry_check"
OPS = (REPO / "registry" / "ops.yaml").read_text()

ONE_OP = """{namespace}ops:
  - schema: {name}(Tensor x) -> Tensor
    doc: Gelu, tanh form.
    dtypes: [float32]
    shape: {{same_as: x}}
    reference: "aten::gelu(x, approximate='tanh')"
    baseline: "aten::gelu(aten::clone(x, memory_format=None), approximate='tanh')"
"""


def check(*paths, env=None):
    return subprocess.run([str(CHECK), *map(str, paths)], capture_output=True, text=True, timeout=120, env=env)


def write(tmp_path, text, name="ops.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def location(text, needle, after=""):
    """1-based line:column of `needle` in `text` (on the first line holding `after` too)."""
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line and after in line:
            return f"{number}:{line.index(needle) + 1}"
    raise AssertionError(f"{needle!r} not in the text")


def test_a_typo_in_a_backward_formula_fails_the_check_at_the_name(tmp_path):
    text = OPS.replace("aten::mul.Scalar(grad, alpha)", "aten::mul.Scalar(gard, alpha)")
    assert text != OPS
    path = write(tmp_path, text)
    r = check(path)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr == (f"{path}:{location(text, 'gard')}: backward of 'add' for 'b': formula "
                        "'aten::mul.Scalar(gard, alpha)', column 18: unknown name 'gard'; expected one of: a, alpha, "
                        "b, grad, result\n")


def test_an_unknown_op_is_reported_at_its_name_not_the_formulas_start(tmp_path):
    text = OPS.replace("aten::rms_norm(x, [aten::size.int(x, -1)]", "aten::rms_norm(x, [aten::sizee.int(x, -1)]")
    assert text != OPS
    path = write(tmp_path, text)
    r = check(path)
    assert r.returncode == 1
    where = location(text, "aten::sizee.int")
    assert r.stderr.startswith(f"{path}:{where}: baseline of 'rms_norm': formula "), r.stderr
    assert "unknown op aten::sizee" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_backward_key_naming_two_arguments_needs_two_gradients(tmp_path):
    text = OPS.replace("backplane::rms_norm_backward(grad, x, weight, eps)", "aten::mul.Tensor(grad, weight)")
    assert text != OPS
    path = write(tmp_path, text)
    r = check(path)
    assert r.returncode == 1
    where = location(text, "aten::mul.Tensor(grad, weight)", '"x, weight"')
    assert r.stderr.startswith(f"{path}:{where}: backward of 'rms_norm' "
                               "for 'x, weight' gives 1 value(s); a key naming 2 arguments needs a call giving one "
                               "gradient per argument"), r.stderr


def test_strings_and_none_make_pytorchs_fused_op_a_reference_and_baseline(tmp_path):
    # The check evaluates both on the first sample and compares them.
    r = check(write(tmp_path, ONE_OP.format(namespace="", name="gelu_tanh")))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "registry: 1 ops, 0 classes OK\n"
    wrong = ONE_OP.format(namespace="", name="gelu_tanh").replace("approximate='tanh')", "approximate='none')", 1)
    r = check(write(tmp_path, wrong))
    assert r.returncode == 1 and "baseline of 'gelu_tanh' does not compute what its reference computes" in r.stderr


def _relink_core_with(build, replace, tmp_path):
    """libbackplane_core linked from the build's objects with the compiled-in registry edited
    (`replace`: (old, new)), in tmp_path; None where the build is not a Ninja build."""
    def last_command(target):
        r = subprocess.run(["ninja", "-C", str(build), "-t", "commands", target], capture_output=True, text=True)
        return r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else None
    source = build / "core" / "generated" / "registry_sources.cpp"
    obj = "core/CMakeFiles/backplane_core.dir/generated/registry_sources.cpp.o"
    compile_cmd, link_cmd = last_command(obj), last_command("lib/libbackplane_core.so")
    if not (compile_cmd and link_cmd and source.exists()):
        return None
    broken = tmp_path / "registry_sources.cpp"
    text = source.read_text()
    assert replace[0] in text
    broken.write_text(text.replace(*replace))
    # The compiler's own arguments (past `cmake -E env ... ccache`), without the precompiled
    # header and dependency files: the generated file includes no torch header.
    args = shlex.split(compile_cmd.split(" && ")[-1])
    compilers = [i for i, a in enumerate(args) if re.search(r"(^|[/-])(c|g|clang)\+\+(-[\d.]+)?$", a)]
    if not compilers:
        return None
    args = args[compilers[0]:]
    for flag in ("-include", "-MF", "-MT"):
        while flag in args:
            del args[args.index(flag):args.index(flag) + 2]
    args = [str(tmp_path / "registry_sources.o") if a == obj else str(broken) if a == str(source) else a
            for a in args if a not in ("-MD", "-Winvalid-pch")]
    subprocess.run(args, cwd=build, check=True, timeout=300)
    link = shlex.split(link_cmd.split(" && ")[1])
    link = [str(tmp_path / "libbackplane_core.so") if a == "lib/libbackplane_core.so" else
            str(tmp_path / "registry_sources.o") if a == obj else a for a in link]
    subprocess.run(link, cwd=build, check=True, timeout=300)
    return tmp_path


def test_a_bad_compiled_registry_is_said_once_and_exits_1(tmp_path):
    """The build's check loads the core built from the same files, so a registry error is
    first met in the core's static initialization: once, exit 1, no `terminate called`."""
    build = Path(os.environ.get("BACKPLANE_LIB_DIR", REPO / "build" / "lib")).parent
    if not (build / "build.ninja").exists() or shutil.which("ninja") is None:
        pytest.skip("needs the Ninja build tree the tests run from, and ninja")
    lib = _relink_core_with(build, ("aten::mul.Scalar(grad, alpha)", "aten::mul.Scalar(gard, alpha)"), tmp_path)
    if lib is None:
        pytest.skip("ninja cannot list the core's build commands")
    r = check(REPO / "registry" / "ops.yaml", env={**os.environ, "LD_LIBRARY_PATH": str(lib)})
    assert r.returncode == 1, r.stderr
    assert r.stderr == (f"registry/ops.yaml:{location(OPS, 'grad, alpha)', 'aten::mul.Scalar')}: backward of 'add' "
                        "for 'b': formula 'aten::mul.Scalar(gard, alpha)', column 18: unknown name 'gard'; expected one "
                        "of: a, alpha, b, grad, result\n")


def _pytorch_namespaces():
    """The namespaces of the ops this torch defines, in a fresh process (this one holds
    whatever other tests defined) after importing the modules that define some on import
    (quantized_decomposed; cplib and others under torch.distributed); the private ones
    (_c10d_functional) aside."""
    code = """
import importlib, torch
for module in ("torch.ao.quantization.fx._decomposed", "torch.distributed.tensor",
               "torch.distributed.tensor.experimental"):
    try:
        importlib.import_module(module)
    except ImportError:
        pass
print(" ".join(sorted({n.split("::")[0] for n in torch._C._dispatch_get_all_op_names()})))
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    return [n for n in done.stdout.split() if not n.startswith("_") and n != "backplane"]


@pytest.mark.parametrize("namespace", ["quantized_decomposed", "mkldnn", "onednn", "_c10d_functional"])
def test_pytorchs_namespaces_are_refused(tmp_path, namespace):
    r = check(write(tmp_path, ONE_OP.format(namespace=f"namespace: {namespace}\n", name="twice")))
    assert r.returncode == 1
    assert f"ops.yaml:1:12: namespace '{namespace}' " in r.stderr, r.stderr
    assert ("belongs to PyTorch" if not namespace.startswith("_") else "marks PyTorch's private namespaces") in r.stderr


def test_every_namespace_this_torch_defines_is_refused(tmp_path):
    namespaces = _pytorch_namespaces()
    r = check(*[write(tmp_path, ONE_OP.format(namespace=f"namespace: {ns}\n", name="twice"), f"{ns}.yaml")
                for ns in namespaces])  # the check says each file's first error
    assert r.returncode == 1
    accepted = [ns for ns in namespaces if f"{ns}.yaml:1:12: namespace '{ns}' belongs to PyTorch" not in r.stderr]
    assert accepted == [], "add these to reserved_namespace() in core/src/registry/reserved_names.cpp"


def test_names_torch_ops_cannot_reach_are_refused(tmp_path):
    """torch.ops.<ns> and torch.ops.<ns>.<op> are attribute lookups: a namespace named like an
    attribute of torch.ops, or an op named like one of every namespace, is never reached."""
    ops_attributes = {a for a in dir(torch._ops._Ops()) if not a.startswith("__")}
    namespace_attributes = {a for a in dir(torch._ops._OpNamespace("fresh")) if not a.startswith("__")}
    assert namespace_attributes == {"name", "_dir"}, "update reserved_op_name() in core/src/registry/reserved_names.cpp"
    namespaces, names = sorted(ops_attributes), sorted(namespace_attributes | {"__init__", "lambda"})
    r = check(*[write(tmp_path, ONE_OP.format(namespace=f"namespace: {ns}\n", name="twice"), f"ns{i}.yaml")
                for i, ns in enumerate(namespaces)],
              *[write(tmp_path, ONE_OP.format(namespace="namespace: acme\n", name=name), f"op{i}.yaml")
                for i, name in enumerate(names)])
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == len(namespaces) + len(names), r.stderr
    for i, namespace in enumerate(namespaces):
        assert lines[i].startswith(f"{tmp_path}/ns{i}.yaml:1:12: namespace '{namespace}' "), lines[i]
    for i, name in enumerate(names):
        assert lines[len(namespaces) + i].startswith(f"{tmp_path}/op{i}.yaml:3:13: op name '{name}' is "), lines


def test_usage_errors_exit_2_naming_the_flag_or_file(tmp_path):
    r = check()
    assert r.returncode == 2 and r.stderr == "usage: backplane_registry_check [--markdown OUT] FILE...\n"
    r = check(REPO / "registry" / "ops.yaml", "--markdown")
    assert r.returncode == 2 and r.stderr.startswith("backplane_registry_check: --markdown needs a file to write\n")
    r = check(tmp_path / "missing.yaml")
    assert r.returncode == 2 and r.stderr == f"{tmp_path / 'missing.yaml'}: cannot read\n"


# Issue 45, item 14: str arguments in samples, errors and bench presets, their `choices:`,
# and a sample's `magnitude:`.
STR_OP = """ops:
  - schema: gelu_str(Tensor x, *, str approximate='none') -> Tensor
    doc: Gelu, either form.
    dtypes: [float32]
    shape: {same_as: x}
    choices: {approximate: [none, tanh]}
    reference: aten::gelu(x, approximate=approximate)
    samples:
      - {x: [4]}
      - {name: tanh, x: [4], approximate: tanh, magnitude: 300}
    errors:
      - {name: bad, x: [4], approximate: Tanh, error: "is 'Tanh'"}
    bench:
      - {name: tanh_1k, x: [1024], approximate: tanh}
"""


def test_str_arguments_choices_and_magnitude_are_read(tmp_path):
    # The first sample ('none' by default) runs the reference; 'Tanh' is left to `errors:`.
    r = check(write(tmp_path, STR_OP))
    assert (r.returncode, r.stdout, r.stderr) == (0, "registry: 1 ops, 0 classes OK\n", "")


STR_OP_MISTAKES = [
    # (old, new, where: (needle, on the line holding), message)
    ("approximate: tanh, magnitude", "approximate: Tanh, magnitude", ("Tanh", "magnitude"),
     "argument 'approximate' is 'Tanh', which is not one of its choices (none, tanh); a value the op must refuse "
     "belongs in 'errors'"),
    ("x: [1024], approximate: tanh", "x: [1024], approximate: fast", ("fast", ""),
     "argument 'approximate' is 'fast', which is not one of its choices (none, tanh); a value the op must refuse "
     "belongs in 'errors'"),
    ("approximate: tanh, magnitude", "approximate: [tanh], magnitude", ("[tanh]", "magnitude"),
     "argument 'approximate' must be a string, found a list"),
    ("choices: {approximate: [none, tanh]}", "choices: {x: [none]}", ("x: [none]", ""),
     "choices of 'gelu_str' names 'x', which is not a str argument; expected one of: approximate"),
    ("choices: {approximate: [none, tanh]}", "choices: {approximate: [tanh]}", ("[tanh]", "choices"),
     "choices of 'approximate' lack its schema default 'none'; expected it among: tanh"),
    ("choices: {approximate: [none, tanh]}", "choices: {approximate: [none, tanh, none]}", ("none]", "choices"),
     "choices of 'approximate' list 'none' twice"),
    ("magnitude: 300", "magnitude: 0", ("0}", "magnitude"),
     "magnitude must be a positive finite number (the factor every Tensor argument's values are multiplied by), "
     "found '0'"),
    ('approximate: Tanh, error', 'approximate: Tanh, magnitude: 2, error', ("magnitude", "Tanh"),
     "'magnitude' scales a sample's values; an entry of 'errors' takes none"),
]


def test_str_argument_and_magnitude_mistakes_are_named_at_their_place(tmp_path):
    texts = []
    for i, (old, new, _, _) in enumerate(STR_OP_MISTAKES):
        assert old in STR_OP, old
        texts.append(STR_OP.replace(old, new))
    r = check(*[write(tmp_path, text, f"m{i}.yaml") for i, text in enumerate(texts)])
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == len(STR_OP_MISTAKES), r.stderr
    for i, (text, (_, _, (needle, after), message)) in enumerate(zip(texts, STR_OP_MISTAKES)):
        assert lines[i] == f"{tmp_path}/m{i}.yaml:{location(text, needle, after)}: {message}", lines[i]
