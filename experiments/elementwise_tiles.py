"""Tile shapes of the dense elementwise kernel, beside torch.add and copy_ (standalone probe).

    PYTHONPATH=python python experiments/elementwise_tiles.py [--elements 67108864] [--rounds 15] [--sliced]

Compiles elementwise_tiles.cu with nvcc (sm_90) into a temporary shared library and calls
its launchers through ctypes on torch's tensors. Each variant (threads a block x 16-byte
vectors a thread, one tile a block; plain, read-only or streaming loads and stores),
torch.add(a, b, out=c) and c.copy_(a) are captured as CUDA graphs of --calls calls and
timed in turn each round (so drift falls on all alike): median microseconds a call over
--rounds rounds. Every variant's result is checked against
torch.add first. Needs a GPU of compute capability 9.0 and nvcc on PATH.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import torch

from backplane.bench.timing import graphed  # the package's one timer (PYTHONPATH=python)

DTYPES = {"float32": (0, torch.float32), "bfloat16": (1, torch.bfloat16), "float16": (2, torch.float16)}
# (threads a block, vectors a thread, load/store mode: 0 plain, 1 __ldg, 2 __ldcs/__stcs, 3 __stcs)
VARIANTS = [(128, 1, 0), (128, 2, 0), (128, 4, 0), (128, 8, 0), (256, 1, 0), (256, 2, 0), (256, 4, 0), (256, 8, 0),
            (512, 1, 0), (512, 2, 0), (512, 4, 0), (1024, 1, 0), (256, 4, 1), (256, 4, 2), (256, 4, 3), (512, 1, 1),
            (512, 1, 2), (512, 1, 3), (128, 1, 1), (128, 1, 2), (128, 1, 3)]
MODES = ["", " ldg", " cs", " stcs"]
# --sliced: inputs x[::2] of contiguous bases. (threads, items a thread, 0: an element an
# item, 1: a 16-byte vector of the base an item, every other element used)
SLICED_VARIANTS = [(128, 2, 0), (128, 4, 0), (256, 2, 0), (256, 4, 0), (512, 1, 0), (512, 2, 0), (1024, 1, 0),
                   (256, 8, 0), (128, 8, 0), (128, 1, 1), (256, 1, 1), (256, 2, 1), (1024, 1, 1), (128, 4, 1)]
SLICED_MODES = ["", " pairs"]


def build(tmp: Path) -> ctypes.CDLL:
    so = tmp / "elementwise_tiles.so"
    src = Path(__file__).with_suffix(".cu")
    subprocess.run(["nvcc", "-O3", "-std=c++17", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", str(src), "-o",
                    str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.probe_add_stride2.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.probe_add.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    return lib


def print_kernels(label, fns):
    """The device kernels `fns` launch, with their launch configuration, from a profiler trace."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for fn in fns:
                fn()
            torch.cuda.synchronize()
        prof.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text())["traceEvents"]
    for e in events:
        if e.get("cat") == "kernel":
            a = e.get("args", {})
            print(f"{label}: {e['name'][:160]}\n    grid {a.get('grid')} block {a.get('block')} "
                  f"registers {a.get('registers per thread')} dur {e.get('dur')} us")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elements", type=int, nargs="+", default=[1 << 26])
    ap.add_argument("--dtypes", default="bfloat16,float16,float32")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--aten-kernels", action="store_true",
                    help="first print the kernel, grid, block and registers torch.add and copy_ launch "
                         "(torch.profiler)")
    ap.add_argument("--sliced", action="store_true", help="inputs x[::2] of contiguous bases (the 64M_sliced preset)")
    args = ap.parse_args()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        for n in args.elements:
            for name in args.dtypes.split(","):
                code, dtype = DTYPES[name]
                step = 2 if args.sliced else 1
                a = torch.randn(n * step, device="cuda").to(dtype)[::step]
                b = torch.randn(n * step, device="cuda").to(dtype)[::step]
                c = torch.empty(n, device="cuda", dtype=dtype)
                expected = torch.add(a, b)
                nvec = n * a.element_size() // 16
                launcher = lib.probe_add_stride2 if args.sliced else lib.probe_add
                modes = SLICED_MODES if args.sliced else MODES

                def variant(th, u, m):
                    def call():
                        rc = launcher(code, th, u, m, c.data_ptr(), a.data_ptr(), b.data_ptr(),
                                      n if args.sliced else nvec, torch.cuda.current_stream().cuda_stream)
                        assert rc == 0, f"launch {th}x{u}{modes[m]}: error {rc}"
                    return call

                rows = {"torch.add": lambda: torch.add(a, b, out=c), "copy_": lambda: c.copy_(a)}
                if args.aten_kernels:
                    print_kernels(f"{n} {name}", list(rows.values()))
                for th, u, m in SLICED_VARIANTS if args.sliced else VARIANTS:
                    c.zero_()
                    variant(th, u, m)()
                    torch.cuda.synchronize()
                    assert torch.equal(c, expected), f"{th}x{u}{modes[m]} {name}: wrong result"
                    rows[f"{th}x{u}{modes[m]}"] = variant(th, u, m)
                replays = {k: graphed(fn, args.calls) for k, fn in rows.items()}
                times = {k: [] for k in rows}
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for _ in range(args.rounds):
                    for k, replay in replays.items():
                        replay()  # untimed: the device is busy while the timed replay is launched
                        start.record()
                        replay()
                        end.record()
                        end.synchronize()
                        times[k].append(start.elapsed_time(end) * 1000 / args.calls)
                ref = statistics.median(times["torch.add"])
                copy = statistics.median(times["copy_"])
                gb = 3 * n * a.element_size() / 1e9
                layout = " sliced" if args.sliced else ""
                print(f"\n{n} elements {name}{layout}: torch.add {ref:.2f} us, copy_ {copy:.2f} us")
                for k, ts in times.items():
                    t = statistics.median(ts)
                    print(f"  {k:>14} {t:9.2f} us  {gb / (t * 1e-6):7.1f} GB/s  x torch.add {ref / t:.4f}"
                          f"  spread {min(ts):.2f}-{max(ts):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
