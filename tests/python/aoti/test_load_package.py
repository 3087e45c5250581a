"""backplane.load_package: every input checked against the layout the package was compiled
for. Inputs in another layout (channels_last, transposed, sliced, offset) are copied into
the compiled one and give the right numbers, which torch's own loader does not guarantee;
a wrong dtype, device, rank or size is refused naming the input and both layouts."""
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

import backplane
from backplane.aoti import layouts
from backplane.aoti.archive import check_entries
from backplane.aoti.layouts import read_layouts
from conftest import Plain, run_python


def inputs(batch=4):
    g = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 3, 4, 5, generator=g), torch.randn(batch, 5, generator=g)


def other_layouts(x):
    """Same values, other strides or offset."""
    yield "channels_last", x.contiguous(memory_format=torch.channels_last)
    yield "transposed", x.transpose(0, -1).contiguous().transpose(0, -1)
    yield "sliced", torch.zeros(*x.shape[:-1], 2 * x.shape[-1])[..., ::2].copy_(x)
    yield "offset", torch.cat([x.new_zeros(1), x.flatten()])[1:].view(x.shape)


@pytest.fixture(scope="module")
def foreign_package(plain_package, tmp_path_factory):
    """The same package without Backplane's record, as one made elsewhere would be."""
    path = tmp_path_factory.mktemp("foreign") / "plain.pt2"
    with zipfile.ZipFile(plain_package[0]) as src, zipfile.ZipFile(path, "w") as dst:
        for item in src.infolist():
            if not item.filename.endswith(layouts.ENTRY):
                dst.writestr(item, src.read(item))
    return path


def test_the_record_describes_the_compiled_inputs(plain_package):
    path, recorded = plain_package
    assert read_layouts(path) == recorded
    assert [x.line() for x in recorded] == ["input 0 x float32 cpu sizes=2..1024,3,4,5 order=0,1,2,3",
                                            "input 1 y float32 cpu sizes=2..1024,5 order=0,1"]


@pytest.mark.parametrize("which", ["recorded", "foreign"])
def test_other_layouts_are_converted_and_exact(plain_package, foreign_package, which):
    run = backplane.load_package(plain_package[0] if which == "recorded" else foreign_package)
    x, y = inputs()
    expected = Plain()(x, y)
    assert torch.equal(run(x, y), expected) and run.converted == []
    for name, other in other_layouts(x):
        assert torch.equal(run(other, y), expected), name
        assert len(run.converted) == 1 and run.converted[0].startswith("input 0"), (name, run.converted)
    transposed_y = y.t().contiguous().t()
    assert torch.equal(run(x, transposed_y), expected)
    assert "(5, 1)" in run.converted[0] or "copied from strides (1, 4)" in run.converted[0], run.converted


HAZARD = Path(__file__).with_name("programs") / "unguarded_channels_last.py"


def test_the_hazard_is_real_without_the_guard(plain_package):
    """Why the guard exists: torch's loader, without its optional check
    (AOTI_RUNTIME_CHECK_INPUTS, which load_package sets in this process), reads a
    channels_last input with the compiled strides and returns other numbers."""
    result = run_python(HAZARD, plain_package[0], unset=("AOTI_RUNTIME_CHECK_INPUTS",))
    assert result.stdout.split() == ["True", "False"], result.stdout + result.stderr[-2000:]


@pytest.mark.parametrize("bad, message", [
    (lambda x, y: (x.double(), y), r"input 0 \(x\): dtype float64 is not float32; the package was compiled for "
                                   r"float32 cpu sizes \(2\.\.1024, 3, 4, 5\) dense in dimension order \(0, 1, 2, 3\), "
                                   r"found float64 cpu sizes \(4, 3, 4, 5\) strides \(60, 20, 5, 1\)"),
    (lambda x, y: (x[:, :2], y), r"input 0 \(x\): size 2 of dimension 1 is not 3"),
    (lambda x, y: (x[0], y), r"input 0 \(x\): 3 dimensions, not 4"),
    (lambda x, y: (x[:1], y[:1]), r"input 0 \(x\): size 1 of dimension 0 is outside the compiled range 2\.\.1024"),
    (lambda x, y: (x, y.to("meta")), r"input 1 \(y\): device meta is not cpu"),
])
def test_mismatches_that_a_copy_cannot_fix_are_refused(plain_package, bad, message):
    run = backplane.load_package(plain_package[0])
    with pytest.raises(layouts.LayoutError, match=message):
        run(*bad(*inputs()))


def test_a_missing_input_is_refused(plain_package):
    run = backplane.load_package(plain_package[0])
    with pytest.raises(layouts.LayoutError, match=r"plain.pt2: expected 2 inputs \(x, y\), found 1"):
        run(inputs()[0])


def test_the_whole_dynamic_range_is_accepted(plain_package):
    run = backplane.load_package(plain_package[0])
    for batch in (2, 16, 1024):
        x, y = inputs(batch)
        assert torch.equal(run(x, y), Plain()(x, y)), batch


def test_an_entry_outside_the_extraction_folder_is_refused_before_extracting(plain_package, tmp_path):
    evil = tmp_path / "inner" / "evil.pt2"
    evil.parent.mkdir()
    shutil.copy(plain_package[0], evil)
    with zipfile.ZipFile(evil, "a") as z:
        z.writestr("plain/../../escaped.txt", "written outside")
    with pytest.raises(ValueError, match=r"its entry 'plain/\.\./\.\./escaped\.txt' would be written outside"):
        backplane.load_package(evil)
    with pytest.raises(ValueError, match="would be written outside"):
        check_entries(evil)
    assert not list(tmp_path.rglob("escaped.txt"))


def test_a_malformed_record_names_the_line():
    with pytest.raises(ValueError, match=r"p.pt2, line 2: expected 'input 0 NAME DTYPE DEVICE"):
        layouts.parse_layouts("backplane-inputs 1\ninput 0 x float32 cpu sizes=2 order=0,1\n", "p.pt2")


def test_recording_refuses_a_non_dense_example():
    with pytest.raises(ValueError, match=r"strides \(2,\): package with dense example inputs"):
        layouts.dim_order(torch.zeros(8)[::2])
