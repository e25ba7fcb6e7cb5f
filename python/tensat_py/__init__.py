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

from typing import Any

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
    "save",
    "optimize",
    "verify",
]


def load(target: str, **options: Any) -> Graph:
    """Loads a program: a zoo name (``"bert"``, ``"nasrnn"``, ...) or a file path.

    The file's suffix picks the front end (:mod:`tensat_py.frontends`): ``.model`` (TASO
    graphs), ``.onnx`` (see :func:`tensat_py.frontends.onnx.load`; ``input_shapes=``
    fixes symbolic dimensions), ... ``options`` go to the front end's loader. The graph
    remembers its front end (``meta["frontend"]``), whose rule files and cost model
    :func:`optimize` uses by default.

    Raises:
        FileNotFoundError: when ``target`` is neither a zoo name nor an existing file.
        ValueError: on a malformed file (the message names the file and the node or line),
            or an unsupported file type.
    """
    from pathlib import Path

    from tensat_py import frontends, models

    path = Path(target)
    if path.is_file():
        fe = frontends.for_path(path)
        graph = fe.load(path, **options)
        graph.meta.setdefault("frontend", fe.name)
        return graph
    if target in models.ZOO:
        if options:
            raise TypeError(f"zoo model {target!r} takes no options, got {sorted(options)}")
        return models.get(target)
    if path.exists():
        raise ValueError(f"{target}: not a file")
    raise FileNotFoundError(
        f"{target!r} is neither a zoo model ({', '.join(sorted(models.ZOO))}) nor a file"
    )


def save(graph: Graph, path: str, *, source: Graph | None = None) -> Any:
    """Writes ``graph`` to ``path`` in the format its suffix names (the counterpart of
    :func:`load`); ``source`` is the graph it was optimised from (its front-end data: the
    source model, weights). Writes atomically; returns the path written.

    Raises:
        ValueError: an unsupported suffix, or a format that cannot be written.
        OSError: the file cannot be written (the message names the path).
    """
    from tensat_py import frontends

    fe = frontends.for_path(path)
    if fe.save is None:
        raise ValueError(f"{path}: {fe.name} files cannot be written")
    return fe.save(graph, path, source=source)
