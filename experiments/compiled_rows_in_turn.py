"""Whether `bench --mode compile` read its selected rows below 1.00x torch.compile of the
reference because the two were timed minutes apart (bench/results/compile-selection): one
engine run (cuda, --cuda-graph, float32, five repetitions), then, on it, the selected and
compiled rows timed (a) as before 00d75b3, every compiled row, then every selected row, and
(b) each selected row in turn with its compiled row (timing.time_steps); the ratio
compiled / selected (the table's "x compile") of each op both ways. Needs the CUDA plugin
and a GPU.

    PYTHONPATH=python BACKPLANE_LIB_DIR=build/lib python experiments/compiled_rows_in_turn.py SELECTION.yaml
"""
import sys
from statistics import median

import backplane
from backplane import bench

backplane.load("cuda", selection=sys.argv[1])
run = bench.run("cuda", dtypes="float32", repetitions=5, cuda_graph=True, quiet=True, extra=["--max-time=0.1"])


def ratios(entries):
    times = {}
    for e in entries:
        if not e.get("error_occurred"):
            op, _, impl, _ = e["name"].split("/")
            times.setdefault((op, impl), []).append(e["real_time"])
    ops = sorted({op for op, _ in times})
    return {op: median(times[op, "compiled"]) / median(times[op, "selected"]) for op in ops
            if (op, "compiled") in times and (op, "selected") in times}


apart = ratios(bench.compiled_rows(run, max_time=0.1) + bench.selected_rows(run, max_time=0.1))
in_turn = ratios(bench.selected_rows(run, max_time=0.1, with_compiled=True))
print(f"{'op':20} {'apart':>7} {'in turn':>8}")
for op in sorted(in_turn):
    print(f"{op:20} {apart.get(op, float('nan')):7.3f} {in_turn[op]:8.3f}")
