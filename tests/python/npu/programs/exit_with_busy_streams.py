"""Ends with work queued on every stream of both npu devices, each with an event recorded
(test_npu_exit.py): the process must end by itself, promptly and with status 0."""
import torch, backplane; backplane.load('npu')
streams = [torch.npu.Stream(d) for d in (0, 1) for _ in range(6)]
events = []
for s in streams:
    with torch.npu.stream(s):
        x = torch.randn(200_000, device=s.device)
        for _ in range(10):
            torch.ops.backplane.scale_(x, 1.0001)
        events.append(torch.npu.Event())
        events[-1].record(s)
print("queued", len(streams))
