"""Shared by the cost-model tests: what onnxruntime's own graph optimiser makes of a model."""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path
from typing import Any


def optimised_ops(model: Any) -> collections.Counter[str]:
    """Operator types, counted, in onnxruntime's optimised graph (CPU, ``ORT_ENABLE_ALL``)
    of ``model``: an ONNX ``ModelProto``, or a ``tensat_py`` graph exported with random
    weights."""
    import onnx
    import onnxruntime as ort
    from tensat_py.graph import Graph

    if isinstance(model, Graph):
        from tensat_py.frontends.onnx import to_model

        model = to_model(model, weights="random")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "opt.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(path)
        so.log_severity_level = 3  # the "hardware specific" warning of saving it
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return collections.Counter(n.op_type for n in onnx.load(str(path)).graph.node)
