"""What an AOTInductor package expects of each input, and the check against it.

An AOTInductor package reads its inputs with the strides it was compiled for; given other
strides (channels_last, transposed, sliced, offset views) it returns wrong numbers without
an error (pytorch#141115), and torch checks only when AOTI_RUNTIME_CHECK_INPUTS=1, and only
from 2.14. So Backplane records, at packaging time, each input's dtype, device type, sizes
(a dynamic dimension as its range) and dense dimension order, in the package entry
`<archive>/extra/backplane_inputs.txt` (read by `backplane.load_package`, the pipeline and
`backplane run`):

    backplane-inputs 1
    input 0 x float32 cpu sizes=2..1024,4,5,7 order=0,1,2,3
    input 1 n other

`order` lists the dimensions from outermost to innermost: the expected strides are the
dense strides of the actual sizes in that order (0,1,2,3 is contiguous, 0,2,3,1 is
channels_last), as torch.export derives them from a dense example input.

The rule per input (`check_inputs`): a wrong dtype, device type, rank, static size or a
dynamic size outside its range is refused with both layouts named (converting would change
the numbers or hide a transfer). Other strides, or a data pointer not 16-byte aligned
(Inductor assumes the compile-time alignment), are converted: the input is copied into the
compiled layout, which costs one copy and leaves the values unchanged.

Packages made elsewhere carry no record. For them the rule is: every tensor input is
expected dense and contiguous (torch.export's usual example inputs) and 16-byte aligned,
and is copied to that layout when it is not; sizes, dtype and device are left to torch's
own runtime check (AOTI_RUNTIME_CHECK_INPUTS=1, set by the loaders). Limit: a foreign
package compiled for another layout (e.g. channels_last examples) is then refused by
torch >= 2.14's stride check, but on older torch would compute wrong numbers.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from .archive import Archive

ENTRY = "extra/backplane_inputs.txt"
HEADER = "backplane-inputs 1"
ALIGNMENT = 16  # bytes; Inductor's assumption for input data pointers


@dataclass(frozen=True)
class InputLayout:
    index: int
    name: str
    dtype: str | None = None  # None: not a tensor
    device: str = ""
    sizes: tuple[int | tuple[int, int], ...] = ()  # an int, or (min, max) for a dynamic dimension
    order: tuple[int, ...] = ()  # dimensions outermost first

    @property
    def is_tensor(self) -> bool:
        return self.dtype is not None

    def describe(self) -> str:
        sizes = ", ".join(f"{s[0]}..{s[1]}" if isinstance(s, tuple) else str(s) for s in self.sizes)
        return f"{self.dtype} {self.device} sizes ({sizes}) dense in dimension order {self.order}"

    def line(self) -> str:
        if not self.is_tensor:
            return f"input {self.index} {self.name} other"
        sizes = ",".join(f"{s[0]}..{s[1]}" if isinstance(s, tuple) else str(s) for s in self.sizes)
        return f"input {self.index} {self.name} {self.dtype} {self.device} sizes={sizes} order={','.join(map(str, self.order))}"


def dense_strides(sizes, order) -> tuple[int, ...]:
    """The strides of a dense tensor of `sizes` whose dimensions run outermost-first in `order`."""
    strides = [0] * len(sizes)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= max(int(sizes[d]), 1)
    return tuple(strides)


def _hint(v) -> int:
    """An int, or a symbolic size's value in the example the program was exported with."""
    return int(v.node.hint) if isinstance(v, torch.SymInt) else int(v)


def dim_order(t: torch.Tensor) -> tuple[int, ...]:
    """t's dimensions outermost-first; raises unless t is dense (no gaps, no overlap).
    t may be a FakeTensor with symbolic sizes: its example values decide."""
    sizes, strides = [_hint(s) for s in t.shape], [_hint(s) for s in t.stride()]
    # Larger stride first; on ties (size-1 dimensions) the earlier dimension first.
    order = tuple(sorted(range(t.dim()), key=lambda d: (-strides[d], d)))
    dense = dense_strides(sizes, order)
    if any(sizes[d] != 1 and strides[d] != dense[d] for d in range(t.dim())):
        raise ValueError(f"cannot record the layout of an input with sizes {tuple(sizes)} and strides "
                         f"{tuple(strides)}: package with dense example inputs")
    return order


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def format_layouts(layouts: list[InputLayout]) -> str:
    return "\n".join([HEADER, *(x.line() for x in layouts)]) + "\n"


def decode_record(data: bytes, where: str) -> str:
    """The record's text; raises ValueError naming `where` and the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ValueError(f"{where}: expected UTF-8 text, found byte 0x{data[e.start]:02x} at offset {e.start} "
                         f"(line {line})") from None


def parse_layouts(text: str | bytes, where: str) -> list[InputLayout]:
    """The layouts of a record (its text, or its bytes as read from the archive); raises
    ValueError naming `where` and the line that is not one."""
    if isinstance(text, bytes):
        text = decode_record(text, where)
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != HEADER:
        raise ValueError(f"{where}: expected the first line '{HEADER}', found {lines[0] if lines else 'nothing'!r}")
    out = []
    for number, line in enumerate(lines[1:], start=2):
        words = line.split()
        try:
            if words[0] != "input" or int(words[1]) != len(out):
                raise ValueError
            if words[3:] == ["other"]:
                out.append(InputLayout(len(out), words[2]))
                continue
            fields = dict(w.split("=", 1) for w in words[5:])
            sizes = tuple(tuple(int(v) for v in s.split("..")) if ".." in s else int(s)
                          for s in fields["sizes"].split(",") if s)
            order = tuple(int(d) for d in fields["order"].split(",") if d)
            if sorted(order) != list(range(len(sizes))):
                raise ValueError
            out.append(InputLayout(len(out), words[2], words[3], words[4], sizes, order))
        except (ValueError, IndexError, KeyError):
            raise ValueError(f"{where}, line {number}: expected 'input {len(out)} NAME DTYPE DEVICE sizes=... "
                             f"order=...' or 'input {len(out)} NAME other', found {line!r}") from None
    return out


def record_layouts(ep: torch.export.ExportedProgram) -> list[InputLayout]:
    """The layouts an exported program's user inputs will be compiled for."""
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    layouts = []
    for index, name in enumerate(ep.graph_signature.user_inputs):
        value = placeholders[name].meta.get("val")
        if not isinstance(value, torch.Tensor):
            layouts.append(InputLayout(index, name))
            continue
        sizes = []
        for d in value.shape:
            if isinstance(d, torch.SymInt):
                r = ep.range_constraints.get(d.node.expr)
                if r is None:
                    raise ValueError(f"input {index} ({name}): dimension {d} is not a plain symbol of the export; "
                                     "its range is not recorded")
                sizes.append((int(r.lower), int(r.upper)))
            else:
                sizes.append(int(d))
        layouts.append(InputLayout(index, name, dtype_name(value.dtype), value.device.type, tuple(sizes),
                                   dim_order(value)))
    return layouts


def read_layouts(path: str | os.PathLike) -> list[InputLayout] | None:
    """The input layouts Backplane recorded in the package, or None for a package without them."""
    archive = Archive(path)
    data = archive.read_record(ENTRY)
    return None if data is None else parse_layouts(data, f"{path}:{archive.entry(ENTRY)}")


def add_layouts(path: str | os.PathLike, ep: torch.export.ExportedProgram) -> list[InputLayout]:
    """Records ep's input layouts in the package compiled from it."""
    recorded = record_layouts(ep)
    Archive(path).add_record(ENTRY, format_layouts(recorded))
    return recorded


class LayoutError(ValueError):
    """An input the package cannot take without changing its numbers."""


def _refuse(layout: InputLayout, t: torch.Tensor, why: str) -> LayoutError:
    return LayoutError(f"input {layout.index} ({layout.name}): {why}; the package was compiled for "
                       f"{layout.describe()}, found {dtype_name(t.dtype)} {t.device.type} sizes {tuple(t.shape)} "
                       f"strides {t.stride()}")


def check_input(layout: InputLayout, t: torch.Tensor) -> tuple[torch.Tensor, str]:
    """(the tensor to pass, '' or what was converted); raises LayoutError on a refusal."""
    if dtype_name(t.dtype) != layout.dtype:
        raise _refuse(layout, t, f"dtype {dtype_name(t.dtype)} is not {layout.dtype}")
    if t.device.type != layout.device:
        raise _refuse(layout, t, f"device {t.device.type} is not {layout.device}")
    if t.dim() != len(layout.sizes):
        raise _refuse(layout, t, f"{t.dim()} dimensions, not {len(layout.sizes)}")
    for d, (have, want) in enumerate(zip(t.shape, layout.sizes)):
        if isinstance(want, tuple) and not want[0] <= have <= want[1]:
            raise _refuse(layout, t, f"size {have} of dimension {d} is outside the compiled range {want[0]}..{want[1]}")
        if isinstance(want, int) and have != want:
            raise _refuse(layout, t, f"size {have} of dimension {d} is not {want}")
    return to_layout(t, dense_strides(t.shape, layout.order), f"input {layout.index} ({layout.name})")


def to_layout(t: torch.Tensor, strides: tuple[int, ...], what: str) -> tuple[torch.Tensor, str]:
    """t itself when it has `strides` and an aligned data pointer, else a copy that does."""
    aligned = t.numel() == 0 or t.data_ptr() % ALIGNMENT == 0
    if tuple(t.stride()) == strides and aligned:
        return t, ""
    copy = torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)
    why = f"strides {t.stride()}" if tuple(t.stride()) != strides else f"a data pointer not {ALIGNMENT}-byte aligned"
    return copy, f"{what}: copied from {why} to the compiled strides {strides}"


def contiguous_rule(index: int, t: torch.Tensor) -> tuple[torch.Tensor, str]:
    """The rule for packages without a record: dense, contiguous and aligned."""
    return to_layout(t, dense_strides(t.shape, tuple(range(t.dim()))), f"input {index}")
