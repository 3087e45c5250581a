"""torch.classes.backplane.IdentityConv: the real class (from the core) and the fake class
generated from the same YAML must agree, down to output strides (a fake that predicted
other strides made AOTInductor compute wrong numbers: docs/aoti-findings.md)."""
import pytest
import torch
from torch._library.fake_class_registry import find_fake_class
from torch._subclasses.fake_tensor import FakeTensorMode

import backplane
from backplane.classes import definitions, eager_twin, inline_classes

FAKE = "__torch__.torch.classes.backplane.IdentityConv"


def inputs():
    base = torch.randn(2, 4, 6, 8)
    return {
        "contiguous": base,
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "sliced": base[:, 1:3, ::2, 1:],
        "offset": base[1:],
        "empty": torch.randn(0, 4, 6, 8),
    }


def test_definitions_come_from_the_registry():
    (cls,) = definitions()
    assert cls["name"] == "IdentityConv"
    assert cls["state"] == [{"name": "channels", "type": "int"}]
    assert [(m["name"], m["kind"], m["target"]) for m in cls["methods"]] == [
        ("forward", "calls", "identity_conv"), ("channels", "returns", "channels")]


def test_real_object_methods():
    obj = torch.classes.backplane.IdentityConv(4)
    assert obj.channels() == 4
    x = inputs()["channels_last"]
    assert torch.equal(obj.forward(x), x)


@pytest.mark.parametrize("layout", list(inputs()))
def test_fake_forward_predicts_the_real_strides(layout):
    x = inputs()[layout]
    obj = torch.classes.backplane.IdentityConv(4)
    real = obj.forward(x)
    fake_obj = find_fake_class(FAKE).__obj_unflatten__(obj.__obj_flatten__())
    assert fake_obj.channels() == 4
    with FakeTensorMode() as mode:
        fake = fake_obj.forward(mode.from_tensor(x))
    assert (fake.shape, fake.stride(), fake.dtype) == (real.shape, real.stride(), real.dtype)


def test_registering_fake_classes_again_is_harmless():
    backplane.classes.register_fake_classes()
    assert find_fake_class(FAKE) is not None


def test_wrong_state_count_names_the_fields():
    fake_cls = find_fake_class(FAKE)
    with pytest.raises(TypeError, match=r"takes 1 state values \(channels\), found 2"):
        fake_cls(1, 2)


def test_export_keeps_the_object_and_matches_eager():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.classes.backplane.IdentityConv(4)

        def forward(self, x):
            return self.conv.forward(x) * 2

    x = inputs()["channels_last"]
    ep = torch.export.export(Layer(), (x,))
    assert any(n.target == torch.ops.higher_order.call_torchbind for n in ep.graph.nodes)
    assert torch.equal(ep.module()(x), x * 2)


def test_eager_twin_and_inline_classes():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.classes.backplane.IdentityConv(5)

    twin = eager_twin(Layer().conv)
    assert twin.channels() == 5 and "EagerIdentityConv" in repr(twin)
    layer = inline_classes(Layer())
    assert not isinstance(layer.conv, torch.ScriptObject)
    x = torch.randn(2, 5, 3, 3)
    assert torch.equal(layer.conv.forward(x), x)
