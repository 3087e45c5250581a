"""The registry's custom classes (torch.classes.backplane.*) on the Python side.

The core registers each class from registry/*.yaml; this module makes the matching
fake class from the same YAML (through the core's C interface), so FakeTensor,
torch.compile and torch.export can trace a model holding one. Nobody writes a fake
class by hand: a method that `calls` an op runs that op's own Meta kernel on the fake
tensors, so the fake predicts exactly the strides the real method produces. (A fake
that guessed other strides made AOTInductor compute wrong numbers with no error; see
docs/aoti-findings.md.)

`eager_twin(obj)` gives a plain-Python object with the same methods, for exporters
that cannot carry a ScriptObject (ONNX).
"""
from __future__ import annotations

from typing import Any

import torch
from torch._library.fake_class_registry import has_fake_class, register_fake_class

from ._native import core

NAMESPACE = "backplane"


def _state_dict(cls_def: dict, values: tuple) -> dict[str, Any]:
    names = [f["name"] for f in cls_def["state"]]
    if len(values) != len(names):
        raise TypeError(f"{NAMESPACE}.{cls_def['name']} takes {len(names)} state values ({', '.join(names)}), "
                        f"found {len(values)}")
    return dict(zip(names, values))


def _make_method(method: dict):
    name, target = method["name"], method["target"]
    if method["kind"] == "calls":
        def call(self, *args):
            return getattr(torch.ops.backplane, target)(*args)
    else:
        def call(self):
            return self._state[target]
    call.__name__ = name
    call.__doc__ = method["doc"]
    return call


def _make_class(cls_def: dict, kind: str) -> type:
    """A Python class with the registry class's methods over a dict of its state."""

    def __init__(self, *values):
        self._state = _state_dict(cls_def, values)

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in self._state.items())
        return f"{type(self).__name__}({fields})"

    namespace = {"__init__": __init__, "__repr__": __repr__, "__doc__": cls_def["doc"]}
    for method in cls_def["methods"]:
        namespace[method["name"]] = _make_method(method)
    return type(f"{kind}{cls_def['name']}", (), namespace)


def _make_fake_class(cls_def: dict) -> type:
    fake = _make_class(cls_def, "Fake")

    @classmethod
    def __obj_unflatten__(cls, flat):
        # flat: the real object's __obj_flatten__: ((name, value), ...).
        state = dict(flat)
        return cls(*(state[f["name"]] for f in cls_def["state"]))

    fake.__obj_unflatten__ = __obj_unflatten__
    return fake


def definitions() -> list[dict]:
    """The registry's classes as the core parsed them: name, doc, init, state, methods."""
    return core().classes()


def register_fake_classes() -> None:
    """Registers a fake class for every registry class that has none yet (idempotent)."""
    for cls_def in definitions():
        if not has_fake_class(f"__torch__.torch.classes.{NAMESPACE}.{cls_def['name']}"):
            register_fake_class(f"{NAMESPACE}::{cls_def['name']}")(_make_fake_class(cls_def))


def eager_twin(obj: torch.ScriptObject):
    """A plain-Python object with the methods of a backplane ScriptObject and its state.

    For exporters that trace Python and cannot carry a ScriptObject (the ONNX
    exporter): its `calls` methods run the same op, so the traced graph holds the op.
    """
    qualified = obj._type().qualified_name()  # __torch__.torch.classes.backplane.IdentityConv
    name = qualified.rsplit(".", 1)[-1]
    for cls_def in definitions():
        if cls_def["name"] == name and qualified.endswith(f"classes.{NAMESPACE}.{name}"):
            state = dict(obj.__obj_flatten__())
            return _make_class(cls_def, "Eager")(*(state[f["name"]] for f in cls_def["state"]))
    raise TypeError(f"{qualified} is not a class of the backplane registry")


def inline_classes(module: torch.nn.Module) -> torch.nn.Module:
    """Replaces every backplane ScriptObject attribute in `module` (in place) by its eager twin."""
    for sub in module.modules():
        for attr, value in list(vars(sub).items()):
            if isinstance(value, torch.ScriptObject):
                object.__setattr__(sub, attr, eager_twin(value))
    return module
