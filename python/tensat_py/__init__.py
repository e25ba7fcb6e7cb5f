"""tensat-py: an e-graph-first superoptimizer for tensor programs.

>>> import tensat_py
>>> from tensat_py.builder import GraphBuilder
>>> b = GraphBuilder()
>>> x = b.input((4, 8), name="x")
>>> y = b.ewadd(b.matmul(x, b.weight((8, 3))), b.matmul(x, b.weight((8, 3))))
>>> result = tensat_py.optimize(b.finish([y]), extractor="greedy")
>>> result.cost_after <= result.cost_before
True

The flow follows Tensat (Yang et al., MLSys 2021): the program is saturated with the rules
of ``rules/*.rules`` in the Rust e-graph core and the cheapest equivalent program under a
cost model is extracted (greedy or ILP) and verified numerically against the input.
"""

from tensat_py import _core
from tensat_py.graph import Graph, GraphError, Node, TensorType
from tensat_py.pipeline import OptimizeResult, load_rules, optimize
from tensat_py.verify import VerifyReport, verify

__all__ = [
    "Graph",
    "GraphError",
    "Node",
    "OptimizeResult",
    "TensorType",
    "VerifyReport",
    "_core",
    "load",
    "load_rules",
    "optimize",
    "verify",
]


def load(target: str) -> Graph:
    """Loads a program: a zoo name (``"bert"``, ``"nasrnn"``, ...) or a file path.

    Supported files: TASO-serialised ``.model`` graphs and ``.onnx`` models (see
    :func:`tensat_py.frontends.onnx.load`; unmodelled operators become opaque nodes).

    Raises:
        FileNotFoundError: when ``target`` is neither a zoo name nor an existing file.
        ValueError: on a malformed file (the message names the file and the node).
    """
    from pathlib import Path

    from tensat_py import models

    path = Path(target)
    if path.suffix == ".model" and path.is_file():
        from tensat_py.frontends.taso_model import load as load_model

        return load_model(path)
    if path.suffix == ".onnx" and path.is_file():
        from tensat_py.frontends.onnx import load as load_onnx

        return load_onnx(path)
    if target in models.ZOO:
        return models.get(target)
    if path.exists():
        raise ValueError(
            f"{target}: unsupported file type {path.suffix!r} (expected .model or .onnx)"
        )
    raise FileNotFoundError(
        f"{target!r} is neither a zoo model ({', '.join(sorted(models.ZOO))}) nor a file"
    )
