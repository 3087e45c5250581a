"""`backplane bench` (argv: its flags) with the triton plugin's rms_norm_backward launcher
made wrong (dx negated after the real kernel), for test_bench_triton_backward.py. The cpu
plugin, loaded first here, would serve rms_norm_backward (rightly) without a preference: a
wrong gradient reported for the triton row shows that its backward ran the plugin's
kernel, and that the gradient check is wired."""
import sys

import backplane
from backplane import bench

sys.path.insert(0, str(backplane.lib_dir() / "triton"))  # the manifest's python_path: loading reuses the module
from backplane_triton import _registry  # noqa: E402

right = _registry._launchers["rms_norm_backward"]


def wrong(dx, dweight, *args):
    right(dx, dweight, *args)
    dx.neg_()


_registry._launchers["rms_norm_backward"] = wrong
backplane.load("cpu")  # first: the core's rule without preferences ("loaded first") picks cpu
sys.exit(bench.main(sys.argv[1:]))
