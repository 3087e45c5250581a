"""The exit-time drain (test_npu_exit.py): prints the autograd device threads there are
after it ran without a backward (none may be started), then how many tensors it drained
after a backward with gradients turned off."""
import torch, backplane; backplane.load('npu')
import os, backplane_npu
def autograd_threads():
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            names.append(open(f"/proc/self/task/{t}/comm").read().strip())
        except OSError:
            pass  # a thread that ended since the listing
    return sorted(n for n in names if n.startswith("pt_autograd_"))
x = torch.ones(4, device="npu")
torch.ops.backplane.scale_(x, 2.0)
backplane_npu._drain_at_exit()
print("without a backward:", autograd_threads())
a = torch.ones(4, device="npu", requires_grad=True)
torch.add(a, a).sum().backward()
torch.set_grad_enabled(False)  # as an inference script after training might
backplane_npu._drain_at_exit()
print("after a backward:", len(backplane_npu._exit_backward_tensors), "drained")
