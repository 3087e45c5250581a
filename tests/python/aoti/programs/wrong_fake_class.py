"""`pipeline aoti identity --out argv[1]` with a fake IdentityConv class that predicts the
wrong output layout (channels-last; the real forward returns contiguous): the pipeline
must refuse the package or the package must still be right (test_aoti_guards.py)."""
import sys
from pathlib import Path

import torch
from torch._library.fake_class_registry import deregister_fake_class, register_fake_class

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the checkout, for `models`
from models import pipeline  # noqa: E402

deregister_fake_class("backplane::IdentityConv")


@register_fake_class("backplane::IdentityConv")
class WrongFake:  # predicts channels-last; the real forward returns contiguous
    def __init__(self, channels):
        self.c = channels

    @classmethod
    def __obj_unflatten__(cls, flat):
        return cls(**dict(flat))

    def forward(self, x):
        return torch.empty_like(x, memory_format=torch.channels_last)

    def channels(self):
        return self.c


sys.exit(pipeline.main(["aoti", "identity", "--out", sys.argv[1]]))
