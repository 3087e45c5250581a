"""One rank of a two-rank gloo job running `backplane tune --from-json` (tune_ranks.py):
argv rank, port, figures, out. The plugins are names only (loading them is left out).
Prints the selection in force after tune, and tune's status."""
import sys
import warnings

import torch.distributed as dist

import backplane
from backplane.bench import tune

rank, port, figures, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
backplane.load = lambda *a, **k: None
warnings.simplefilter("ignore")  # "names plugins that are not loaded": a and b are names only
status = tune.main(["--backends", "a,b", "--from-json", figures, "--out", out])
print(f"status {status} selection {backplane.selection_file()}")
dist.destroy_process_group()
