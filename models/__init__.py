"""Models that use the backplane ops, and the pipeline that takes them from eager to
AOTInductor packages and ONNX (models/pipeline.py).

Each model is a ModelSpec: how to build it, its inputs at a given batch size, the
reference it must match and with what tolerance.
"""
import sys
from pathlib import Path

try:
    import backplane  # noqa: F401
except ImportError:  # a source checkout: the package lives in python/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from .spec import ModelSpec  # noqa: E402
from . import decoder_block, identity  # noqa: E402

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (identity.SPEC, decoder_block.SPEC)}

__all__ = ["MODELS", "ModelSpec"]
