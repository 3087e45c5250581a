"""Whether the two rows `bench --mode compile` compares for an op whose selection is
`inductor` run the same generated code: torch.compile of the op's reference as the bench
compiles it (its compiled row) and of the op itself with a selection naming `inductor` for
every op (its selected row), on each op's first bench preset, float32. Prints per op the
number of kernels each generates and whether their sources are the same once kernel names,
comments and whitespace are set aside, and whether the host code calling them is. Ops that
cannot name `inductor` (tune_compile.can_be_inductor) are left out; each op's `inductor` is
forced as `backplane tune --mode compile` forces a candidate. Devices: cpu (Inductor's C++)
or cuda (Triton).

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/compiled_rows_same_code.py cpu|cuda
"""
import re
import sys
import warnings

import torch
from torch._inductor.utils import run_and_get_code

import backplane
from backplane.bench import compiled, tune_compile
from backplane.bench.inputs import preset_for, preset_values
from backplane.formula import Formula

warnings.simplefilter("ignore")
device = torch.device(sys.argv[1] if len(sys.argv) > 1 else "cpu")
backplane.load(device.type)
key = "CUDA" if device.type == "cuda" else "CPU"
ops = [op for op in backplane.ops() if op.bench and tune_compile.can_be_inductor(op)]
forcing = tune_compile._Forcing()

_NAMES = re.compile(r"\b(?:cpp_fused|triton_(?:poi|red|per|tem)_fused)\w*")


def kernels_and_host(code: str):
    """The kernels' sources and the host code's `call`, names, comments and spacing set aside."""
    code = _NAMES.sub("K", re.sub(r"#[^\n']*", "", code))
    kernels = [re.sub(r"\s+", " ", k) for k in re.findall(r"'''([\s\S]*?)'''", code)]
    call = re.search(r"def call\(self, args\):([\s\S]*?)\n\s*return", code)
    return kernels, re.sub(r"\s+", " ", call.group(1)) if call else ""


print(f"{'op':20} {'preset':22} kernels  same kernels  same host code")
for op in ops:
    preset = op.bench[0]["name"]
    values = preset_values(op, preset_for(op, preset), dtype=torch.float32, device=device, requires_grad=())
    _, reference, tensors = compiled._compiled_formula(Formula.parse(compiled.compiled_formula_text(op, values)),
                                                       op, values)
    _, selected, _ = compiled._compiled_call(backplane.torch_op(op.name), op, values)
    codes = []
    with forcing.only(op.name, key, "float32", tune_compile.INDUCTOR):
        for fn in (reference, selected):
            _, code = run_and_get_code(fn, *tensors)
            codes.append(kernels_and_host("\n".join(code)))
            torch._dynamo.reset()
    (ka, ha), (kb, hb) = codes
    print(f"{op.name.rpartition('::')[2]:20} {preset:22} {len(ka)}/{len(kb):<5} {str(ka == kb):13} {ha == hb}")
forcing.close()
