"""A model run through the pipeline's steps: which model, device and dtype, where its files
go, and the reference cases every step is checked against (written by export, read by
the later steps and by the ONNX export). Shared by pipeline.py and onnx_export.py."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

import backplane

from . import MODELS, ModelSpec

REPO = Path(__file__).resolve().parents[1]
# The dynamic batch range every program is exported for (torch.export specializes 1).
# `load` runs the top end too: Inductor can compile a narrower range than the export's
# (a guard on the example's size; docs/aoti-findings.md), which the saved cases miss.
BATCH_RANGE = (2, 1024)
# The plugins a device's package needs loaded before it runs.
BACKENDS = {"cpu": "cpu", "cuda": "cpu,cuda", "npu": "cpu,npu"}


@dataclass
class Run:
    model: str
    device: str = "cpu"
    dtype: str = "float32"
    out: Path = field(default_factory=lambda: REPO / "out")

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model '{self.model}'; expected one of: {', '.join(MODELS)}")
        if self.device not in BACKENDS:
            raise ValueError(f"unknown device '{self.device}'; expected one of: {', '.join(BACKENDS)}")
        self.out = Path(self.out)
        self.spec.tolerance(self.torch_dtype)  # raises for a dtype the model does not support

    @property
    def spec(self) -> ModelSpec:
        return MODELS[self.model]

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def tolerance(self) -> tuple[float, float]:
        return self.spec.tolerance(self.torch_dtype)

    def artifact(self, suffix: str) -> Path:
        return self.out / f"{self.model}-{self.device}-{self.dtype}.{suffix}"

    def load_backends(self) -> None:
        """Loads the plugins this device's models and packages call into."""
        backplane.load(BACKENDS[self.device])

    def build(self) -> torch.nn.Module:
        self.load_backends()
        return self.spec.build(torch.device(self.device), self.torch_dtype)

    def inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        return self.spec.inputs(batch, torch.device(self.device), self.torch_dtype)


def say(message: str) -> None:
    print(message, flush=True)


def reference_cases(run: Run, model: torch.nn.Module):
    """(batch, inputs, reference output) at every check batch size."""
    with torch.no_grad():
        for batch in run.spec.check_batches:
            inputs = run.inputs(batch)
            yield batch, inputs, run.spec.reference(model, *inputs)


def save_io(run: Run, model: torch.nn.Module) -> Path:
    """The inputs and reference outputs every later step is checked against."""
    cases = [{"batch": batch, "inputs": [t.cpu() for t in inputs], "expected": [expected.cpu()]}
             for batch, inputs, expected in reference_cases(run, model)]
    atol, rtol = run.tolerance
    path = run.artifact("io.pt")
    torch.save({"model": run.model, "device": run.device, "dtype": run.dtype, "atol": float(atol),
                "rtol": float(rtol), "cases": cases}, path)
    return path


def load_cases(path: Path, device: str):
    # weights_only: tensors and plain containers only; a crafted file cannot run code.
    io = torch.load(path, weights_only=True)
    for case in io["cases"]:
        yield case["batch"], [t.to(device) for t in case["inputs"]], case["expected"], (io["atol"], io["rtol"])
