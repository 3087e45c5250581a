"""Whether the selected and compiled rows of `bench --mode compile` part where they run the
same generated code because their CUDA graphs were recorded into memory pools of their own
(their outputs at other addresses): one engine run (cuda, --cuda-graph, float32, five
repetitions), then each selected row timed in turn with its compiled row (timing.time_steps)
four times, alternately with pools of their own (as before the shared pool) and with one
pool (timing.shared_pool); the ratio compiled / selected (the table's "x compile") of each
op each time. Needs the CUDA plugin and a GPU.

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/compiled_rows_one_pool.py SELECTION.yaml
"""
import sys
from statistics import median

import backplane
from backplane import bench
from backplane.bench import timing

backplane.load("cuda", selection=sys.argv[1])
run = bench.run("cuda", dtypes="float32", repetitions=5, cuda_graph=True, quiet=True, extra=["--max-time=0.1"])
one_pool = timing.shared_pool


def ratios(shared: bool) -> dict:
    timing.shared_pool = one_pool if shared else (lambda: None)  # None: each graph a private pool
    times = {}
    for e in bench.selected_rows(run, max_time=0.1, with_compiled=True):
        if not e.get("error_occurred"):
            op, _, impl, _ = e["name"].split("/")
            times.setdefault((op, impl), []).append(e["real_time"])
    return {op: median(times[op, "compiled"]) / median(times[op, "selected"]) for op, impl in times
            if impl == "selected" and (op, "compiled") in times}


passes = [("own pools", False), ("one pool", True), ("own pools", False), ("one pool", True)]
measured = [ratios(shared) for _, shared in passes]
print(f"{'op':20} " + " ".join(f"{name:>10}" for name, _ in passes))
for op in sorted(measured[0]):
    print(f"{op:20} " + " ".join(f"{m.get(op, float('nan')):10.3f}" for m in measured))
