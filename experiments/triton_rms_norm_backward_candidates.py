"""rms_norm_backward on the Triton plugin at 8192x4096: every candidate configuration the tuner
chooses among, timed by triton.testing.do_bench (the tuner's timer until 6a6477b, and still off
CUDA) and as `backplane bench --cuda-graph` does (CUDA-graph replays, as the tuner times on
CUDA since); then the tuner's own pick and the op through the core as a graph. Needs a CUDA
GPU, the plugin built (cmake target backplane_triton):

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/triton_rms_norm_backward_candidates.py

With any argument (`smoke`) and TRITON_INTERPRET=1 it lists the candidates at 8x64 on CPU tensors
instead, timing nothing. Figures: bench/results/triton/."""
import sys, warnings
import torch
import backplane
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backplane.load("triton")
from backplane.bench.timing import device_ms, graphed  # noqa: E402 - the package's timers
from backplane_triton import rows, tuning  # noqa: E402
SMOKE = len(sys.argv) > 1
dev = "cpu" if SMOKE else "cuda"
R, N = (8, 64) if SMOKE else (8192, 4096)


def graph_us(fn, calls=10):
    """Microseconds a call of fn, replayed from one CUDA graph of `calls` calls."""
    return device_ms(graphed(fn, calls), "cuda", calls=2, rounds=10) * 1e3 / calls


for dtype in (torch.bfloat16, torch.float32):
    grad, x = torch.randn(R, N, device=dev, dtype=dtype), torch.randn(R, N, device=dev, dtype=dtype)
    w = torch.randn(N, device=dev, dtype=dtype)
    op = lambda: torch.ops.backplane.rms_norm_backward(grad, x, w, 1e-6)
    seen, real_pick = {}, tuning.pick

    def record(key, candidates, launch):
        seen[key[0]] = (key, candidates, launch)
        return candidates[0]

    tuning.pick = record
    rows._plans.clear()
    op()
    tuning.pick = real_pick
    key, candidates, launch = seen["rms_norm_backward"]
    print(f"{dtype} {R}x{N}: {len(candidates)} candidates, key {key}", flush=True)
    if SMOKE:
        print(candidates); continue
    import triton.testing
    for c in candidates:
        try:
            db = triton.testing.do_bench(lambda: launch(c), warmup=5, rep=25) * 1e3
            gr = graph_us(lambda: launch(c))
            print(f"  {c}: do_bench {db:.1f} us, graph {gr:.1f} us", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"  {c}: failed {type(e).__name__}: {str(e)[:200]}", flush=True)
            torch.cuda.synchronize()
    rows._plans.clear(); tuning._chosen.pop(key, None)
    op(); torch.cuda.synchronize()
    print(f"  tuner chose {tuning._chosen.get(key)}; through the core as a graph {graph_us(op):.1f} us", flush=True)
