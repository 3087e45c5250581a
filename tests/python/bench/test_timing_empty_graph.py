"""A CUDA-graph timing of a step that records no GPU work (a view, or an op compiled away)
is refused with a reason instead of timing a replay of nothing (~0.1 us, which read as a
kernel 160x faster than PyTorch's in a bench row on the H200). torch says so with a
warning at the end of capture; here its CUDA entry points are stood in for, so the rule is
tested without a GPU (the GPU run is in bench/results/compile-selection)."""
import contextlib
import warnings

import pytest
import torch

from backplane.bench import timing


class _Stream:
    def synchronize(self):
        pass


def _stand_in_for_cuda(monkeypatch, capture_warns: list[str]):
    @contextlib.contextmanager
    def graph(_graph, stream=None, pool=None):
        yield
        for text in capture_warns:
            warnings.warn(text, UserWarning)

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Stream", _Stream)
    monkeypatch.setattr(torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: object())
    monkeypatch.setattr(torch.cuda, "graph", graph)


def test_an_empty_graph_is_refused_with_the_reason(monkeypatch):
    _stand_in_for_cuda(monkeypatch, ["The CUDA Graph is empty. This usually means ...", "another warning"])
    with pytest.warns(UserWarning, match="another warning"), \
            pytest.raises(timing.NoDeviceWork, match=r"launches no work on the GPU .*time it without --cuda-graph"):
        timing._GraphReplays(lambda: None, 4)
