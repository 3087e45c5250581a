"""A model from eager to deployment, one step at a time:

    python -m models.pipeline STEP MODEL [--device cpu|cuda|npu] [--dtype float32] [--out out]

STEP: eager | compile | export | aoti | load | cpp | onnx | all. Each step is also a
Python function of the same name taking a `Run`; `all` runs those that apply to the
device and dtype (onnx: cpu, float32). On npu (Backplane's emulated PrivateUse1 device)
the package's generated code runs as device work (backends/npu/python/backplane_npu/compile/_aoti.py). Artifacts go to OUT as
MODEL-DEVICE-DTYPE.{ep.pt2, io.pt, pt2, onnx}:
  ep.pt2  the torch.export program (dynamic batch dimension), for users: no step reads it
          back (torch.export.load unpickles; `aoti` exports again instead)
  io.pt   inputs at several batch sizes and the reference outputs, with the tolerance:
          what `load`, `cpp` (`backplane run`) and `onnx` check against
  pt2     the AOTInductor package, with its input layouts (backplane.aoti.layouts); it holds
          shared libraries, and loading it runs their code (docs/security.md)
Every check compares with the model's plain-PyTorch reference, bit for bit where the
tolerance is (0, 0); a mismatch raises, it is never just printed.
"""
from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

import backplane
from backplane.aoti.archive import check_entries
from backplane.aoti.layouts import add_layouts
from backplane.aoti.plugins import backplane_ops, read_record

from . import MODELS
from .run import BACKENDS, BATCH_RANGE, REPO, Run, load_cases, reference_cases, save_io, say  # noqa: F401
from backplane.aoti.libstdcxx import check_package, choose_cxx
from .progress import Ticker
from .spec import assert_matches

STEPS = ("eager", "compile", "export", "aoti", "load", "cpp", "onnx")


def _check_cases(run: Run, model: torch.nn.Module, fn, what: str) -> None:
    """Runs fn on the inputs at every check batch size against model's reference."""
    for batch, inputs, expected in reference_cases(run, model):
        assert_matches(fn(*inputs), expected, run.tolerance, f"{what}, batch {batch}")
    exact = "bit for bit" if run.tolerance == (0, 0) else f"within atol, rtol = {run.tolerance}"
    say(f"{what}: matches the reference {exact} at batch sizes {list(run.spec.check_batches)}")


def eager(run: Run) -> None:
    model = run.build()
    with torch.no_grad():
        _check_cases(run, model, model, f"{run.model} eager on {run.device}")


def compile(run: Run) -> None:  # noqa: A001  (the step's name)
    torch._dynamo.reset()
    model = run.build()
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    with torch.no_grad(), Ticker("torch.compile"):
        _check_cases(run, model, compiled, f"{run.model} torch.compile(fullgraph=True) on {run.device}")


def export_program(run: Run, model: torch.nn.Module) -> torch.export.ExportedProgram:
    example = run.inputs(run.spec.traced_batch)
    batch = torch.export.Dim("batch", min=BATCH_RANGE[0], max=BATCH_RANGE[1])
    return torch.export.export(model, example, dynamic_shapes=tuple({0: batch} for _ in example))


def export(run: Run) -> Path:
    run.out.mkdir(parents=True, exist_ok=True)
    model = run.build()
    with Ticker("torch.export"):
        ep = export_program(run, model)
    ops = sorted({str(n.target) for n in ep.graph.nodes if "backplane" in str(n.target)} |
                 {f"torchbind .{n.args[1]}()" for n in ep.graph.nodes if n.target == torch.ops.higher_order.call_torchbind})
    path = run.artifact("ep.pt2")
    torch.export.save(ep, path)
    io = save_io(run, model)
    with torch.no_grad():
        _check_cases(run, model, ep.module(), f"{run.model} torch.export on {run.device}")
    say(f"exported {path.name} (dynamic batch; backplane calls: {', '.join(ops)}); reference cases in {io.name}")
    return path


def aoti(run: Run) -> Path:
    """Compiles the model into a .pt2 package, records its input layouts in it (the plugins
    serving its ops are recorded by the hook on aoti_compile_and_package that `import
    backplane` installs: backplane/aoti/packaging_hook.py), then verifies the package."""
    # Exported here rather than read back from ep.pt2: torch.export.load unpickles, so a
    # planted ep.pt2 in the output folder would run its code (docs/security.md).
    model = run.build()
    with Ticker("torch.export"):
        ep = export_program(run, model)
    if not run.artifact("io.pt").is_file():
        save_io(run, model)
    cxx = choose_cxx(None)
    path = run.artifact("pt2")
    from torch._inductor import config

    with config.patch({"cpp.cxx": (None, cxx)}), Ticker(f"AOTInductor compile for {run.device} (C++: {cxx})"):
        torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    add_layouts(path, ep)
    if backplane_ops(ep) and read_record(path) is None:
        raise RuntimeError(f"{path}: the hook on aoti_compile_and_package recorded no plugins (see its warning)")
    check_package(path)
    say(f"packaged {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
    load(run)  # a package that does not reproduce the reference must fail here, not later
    return path


def probe(package: Path, backends: str) -> None:
    """Loads `package` in a child process first: a crash there is reported, not suffered."""
    code = ("import sys, torch, backplane; backplane.load(sys.argv[2]); "
            "torch._inductor.aoti_load_package(sys.argv[1])")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "python"), os.environ.get("PYTHONPATH", "")])}
    # torch extracts the package under $TMPDIR and removes it only when the loader is
    # destroyed, which a crashed child never does: the child's TMPDIR is ours to remove.
    # No core dump: a crash is what the probe is for, and a dump of a process holding
    # libtorch (and CUDA) is a large file written for nothing.
    with tempfile.TemporaryDirectory(prefix="backplane_probe_") as scratch:
        result = subprocess.run([sys.executable, "-c", code, str(package), backends], capture_output=True, text=True,
                                env={**env, "TMPDIR": scratch},
                                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    if result.returncode < 0:
        name = signal.Signals(-result.returncode).name
        raise RuntimeError(f"loading {package} killed a child process with {name}; loading it here would crash "
                           f"this process. See docs/aoti-findings.md. Child's stderr:\n{result.stderr[-2000:]}")
    if result.returncode != 0:
        raise RuntimeError(f"loading {package} failed in a child process:\n{result.stderr[-2000:]}")


def other_layouts(x: torch.Tensor):
    """x with the same values in layouts other than the compiled one: what the loader's
    input check must convert (a package reading them as they are gives wrong numbers)."""
    if x.dim() == 4:
        yield "channels_last", x.contiguous(memory_format=torch.channels_last)
    wide = torch.zeros(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    yield "sliced", wide[..., ::2].copy_(x)
    yield "transposed", x.transpose(0, -1).contiguous().transpose(0, -1)
    yield "offset", torch.cat([x.new_zeros(1), x.flatten()])[1:].view(x.shape)


def load(run: Run, probe_first: bool = True) -> None:
    """Loads the .pt2 in this Python process (backplane.load_package: inputs checked against
    the compiled layouts) and runs it on the saved cases, then on each case's inputs in
    other layouts."""
    path = run.artifact("pt2")
    check_entries(path)  # before anything, the probe included, extracts the archive
    check_package(path)
    if probe_first:
        probe(path, BACKENDS[run.device])
    run.load_backends()
    compiled = backplane.load_package(path)
    batches = []
    with torch.no_grad():
        for batch, inputs, expected, tolerance in load_cases(run.artifact("io.pt"), run.device):
            out = compiled(*inputs)
            out = out[0] if isinstance(out, (list, tuple)) else out
            assert_matches(out, expected[0], tolerance, f"{path.name} in Python, batch {batch}")
            for i, x in enumerate(inputs):
                for layout, other in other_layouts(x):
                    out = compiled(*inputs[:i], other, *inputs[i + 1:])
                    out = out[0] if isinstance(out, (list, tuple)) else out
                    assert_matches(out, expected[0], tolerance, f"{path.name} in Python, batch {batch}, input {i} {layout}")
            batches.append(batch)
        model, batch = run.build(), BATCH_RANGE[1]
        inputs = run.inputs(batch)
        out = compiled(*inputs)
        out = out[0] if isinstance(out, (list, tuple)) else out
        assert_matches(out, run.spec.reference(model, *inputs), run.tolerance,
                       f"{path.name} in Python, batch {batch} (the top of the exported range)")
        batches.append(batch)
    say(f"{path.name} loaded in Python: matches the reference at batch sizes {batches}, "
        "inputs contiguous, channels_last, sliced, transposed and offset")


def backplane_binary() -> Path:
    for candidate in (os.environ.get("BACKPLANE_BIN"), REPO / "build" / "bin" / "backplane"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise FileNotFoundError("the backplane command was not found; run `make build` or set BACKPLANE_BIN")


def cpp(run: Run) -> None:
    """Runs the package from C++ with no Python: `backplane run`."""
    command = [str(backplane_binary()), "run", str(run.artifact("pt2")), "--backends", BACKENDS[run.device],
               "--input", str(run.artifact("io.pt"))]
    say("$ " + " ".join(command))
    result = subprocess.run(command)
    if result.returncode != 0:
        raise RuntimeError(f"backplane run failed with exit status {result.returncode}")


def onnx(run: Run) -> Path:
    from .onnx_export import export_onnx

    return export_onnx(run)


def not_applicable(step: str, run: Run) -> str:
    """Why `step` does not apply to run's device and dtype; empty when it does."""
    if step == "onnx" and (run.device, run.dtype) != ("cpu", "float32"):
        return "the ONNX step runs on cpu in float32 (onnxruntime's CPU provider)"
    return ""


def all_steps(run: Run) -> None:
    for step in STEPS:
        if why := not_applicable(step, run):
            say(f"== {step}: skipped on {run.device} {run.dtype}: {why} ==")
            continue
        say(f"== {step} ==")
        globals()[step](run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.pipeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=STEPS + ("all",))
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--device", default="cpu", choices=sorted(BACKENDS))
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--out", default=str(REPO / "out"))
    args = parser.parse_args(argv)
    try:
        run = Run(args.model, args.device, args.dtype, Path(args.out))
        all_steps(run) if args.step == "all" else globals()[args.step](run)
    except (AssertionError, RuntimeError, ValueError, FileNotFoundError) as e:
        print(f"pipeline {args.step} {args.model}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
