"""ONNX export of a pipeline model, checked with onnx.checker and onnxruntime.

The backplane ops become nodes of an ONNX custom domain `backplane`, and the model
carries a local function for each (so any ONNX runtime can execute it) whose body is
the op's standard ONNX form: identity_conv -> Identity, add -> Add(a, Mul(b, alpha)),
rms_norm -> RMSNormalization (opset 23). The exporter traces Python and cannot carry a
ScriptObject, so the model's backplane objects are first swapped for their eager twins
(backplane.classes.inline_classes), whose methods call the same ops.

Limits: CPU and float32 only (onnxruntime's CPU provider lacks bfloat16 for most of
these ops); ops without a standard form (scale_, sin_out, crop) have no translation yet.
"""
from __future__ import annotations

from pathlib import Path

import torch

from backplane.classes import inline_classes

from .spec import assert_matches

OPSET = 23
DOMAIN = "backplane"
FLOAT_TYPES = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)"]


def _attribute_ref(name: str, attr_type, onnx_field: str):
    """An attribute of a body node that takes the value of the function's attribute `name`."""
    from onnx import AttributeProto

    return AttributeProto(name=onnx_field, type=attr_type, ref_attr_name=name)


def _functions() -> dict[str, tuple[list[str], list[str], list]]:
    """op -> (tensor inputs, float attributes, body nodes): each op's standard ONNX form."""
    from onnx import AttributeProto, helper

    alpha = helper.make_node("Constant", [], ["alpha"])
    alpha.attribute.append(_attribute_ref("alpha", AttributeProto.FLOAT, "value_float"))
    rms = helper.make_node("RMSNormalization", ["x", "weight"], ["y"], axis=-1)
    rms.attribute.append(_attribute_ref("eps", AttributeProto.FLOAT, "epsilon"))
    return {
        "identity_conv": (["x"], [], [helper.make_node("Identity", ["x"], ["y"])]),
        "add": (["a", "b"], ["alpha"], [alpha, helper.make_node("CastLike", ["alpha", "b"], ["alpha_b"]),
                                       helper.make_node("Mul", ["b", "alpha_b"], ["scaled"]),
                                       helper.make_node("Add", ["a", "scaled"], ["y"])]),
        "rms_norm": (["x", "weight"], ["eps"], [rms]),
    }


def function_library() -> list:
    """The FunctionProtos the exported model carries, so any ONNX runtime can run it."""
    from onnx import helper

    return [helper.make_function(DOMAIN, name, inputs, ["y"], nodes, [helper.make_opsetid("", OPSET)],
                                 attributes=attributes)
            for name, (inputs, attributes, nodes) in _functions().items()]


def translation_table() -> dict:
    """torch.ops.backplane.<op> -> a function emitting one node of the backplane domain."""
    import onnxscript
    from onnx.defs import OpSchema

    opset = onnxscript.values.Opset(DOMAIN, 1)

    def node(name: str):
        inputs, attributes, _ = _functions()[name]
        schema = OpSchema(name, DOMAIN, 1, inputs=[OpSchema.FormalParameter(i, "T") for i in inputs],
                          outputs=[OpSchema.FormalParameter("y", "T")], type_constraints=[("T", FLOAT_TYPES, "")],
                          attributes=[OpSchema.Attribute(a, OpSchema.AttrType.FLOAT, "") for a in attributes])
        return onnxscript.values.Op(opset, name, schema)

    identity_node, add_node, rms_node = node("identity_conv"), node("add"), node("rms_norm")

    # The signatures mirror the registry schemas; annotated floats become ONNX attributes.
    def identity_conv(x):
        return identity_node(x)

    def add(a, b, alpha: float = 1.0):
        return add_node(a, b, alpha=float(alpha))

    def rms_norm(x, weight, eps: float = 1e-6):
        return rms_node(x, weight, eps=float(eps))

    ops = torch.ops.backplane
    return {ops.identity_conv.default: identity_conv, ops.add.default: add, ops.rms_norm.default: rms_norm}


def export_onnx(run) -> Path:
    import onnx
    import onnxruntime

    from .progress import Ticker
    from .run import load_cases, save_io, say

    if run.device != "cpu" or run.dtype != "float32":
        raise ValueError(f"the ONNX step runs on cpu in float32 (onnxruntime's CPU provider); found "
                         f"{run.device} {run.dtype}")
    run.out.mkdir(parents=True, exist_ok=True)
    model = inline_classes(run.build())
    example = run.inputs(run.spec.traced_batch)
    batch = torch.export.Dim("batch", min=2, max=1024)
    path = run.artifact("onnx")
    with Ticker("ONNX export"):
        program = torch.onnx.export(model, example, dynamo=True, opset_version=OPSET,
                                    dynamic_shapes=tuple({0: batch} for _ in example),
                                    custom_translation_table=translation_table(), verbose=False)
    proto = program.model_proto
    proto.functions.extend(function_library())
    onnx.save(proto, str(path))
    onnx.checker.check_model(proto, full_check=True)
    calls = sorted({n.op_type for n in proto.graph.node if n.domain == DOMAIN})
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    io = run.artifact("io.pt")
    if not io.is_file():
        save_io(run, model)
    batches = []
    for batch_size, inputs, expected, tolerance in load_cases(io, "cpu"):
        out = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})[0]
        assert_matches(torch.from_numpy(out), expected[0], tolerance, f"{path.name} in onnxruntime, batch {batch_size}")
        batches.append(batch_size)
    say(f"exported {path.name} (opset {OPSET}; backplane domain calls: {', '.join(calls)}); onnx.checker passed; "
        f"onnxruntime matches the reference at batch sizes {batches}")
    return path
