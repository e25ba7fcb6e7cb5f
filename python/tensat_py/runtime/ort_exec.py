"""onnxruntime executor: run a :class:`~tensat_py.graph.Graph` by exporting it to ONNX.

The graph is written with :func:`tensat_py.frontends.onnx.to_model` (weights from the
feeds, or from the ONNX model it was loaded from), opaque nodes as their original ONNX
nodes, and run on onnxruntime's CPU execution provider in float32. This is how graphs
with opaque operators are verified (:func:`tensat_py.verify` with
``runner="onnxruntime"``, the default when a graph has opaque nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tensat_py.graph import Graph, TensorType
from tensat_py.runtime.numpy_exec import random_feeds

__all__ = ["run", "feeds", "prepare", "session", "source_session"]


def session(model: Any, *, threads: int = 0, level: str = "all", spinning: bool = True) -> Any:
    """An onnxruntime CPU ``InferenceSession`` for ``model`` (ModelProto or bytes).

    Args:
        model: the model.
        threads: intra-op threads (0: onnxruntime's default).
        level: graph optimisation level: ``"disable"``, ``"basic"``, ``"extended"``, ``"all"``.
        spinning: let idle intra-op threads spin-wait (onnxruntime's default). Benchmarks
            that alternate several sessions turn it off, or one session's spinning threads
            take the cores from the next (``session.intra_op.allow_spinning``).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    if threads:
        opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    if not spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for :func:`run`: every input and weight of ``graph`` by graph name.

    Weights take the values of the ONNX model the graph was loaded from when it holds
    them, random values (:func:`~tensat_py.runtime.numpy_exec.random_feeds`) otherwise.
    Float inputs are standard normal; integer inputs are drawn from ``{0, 1}`` (valid
    indices for any gather), boolean inputs at random. Same names and seed, same values.
    """
    from onnx import TensorProto, helper

    out = random_feeds(graph, seed=seed, dtype="float32")
    src = graph.meta.get("onnx")
    if src is None:
        return out
    out.update(src.weight_values(graph))
    types = dict(src.inputs)
    for nid in graph.inputs():
        node = graph.nodes[nid]
        elem = types.get(src.leaf_names.get(node.name, node.name), TensorProto.FLOAT)
        if elem == TensorProto.FLOAT:
            continue
        t: TensorType = node.type  # type: ignore[assignment]
        dt = helper.tensor_dtype_to_np_dtype(elem)
        sub = np.random.default_rng([seed, *node.name.encode()])
        if dt == np.bool_:
            out[node.name] = sub.integers(0, 2, t.shape).astype(bool)
        else:
            out[node.name] = sub.integers(0, 2, t.shape).astype(dt)
    return out


def run(
    graph: Graph,
    feeds: Mapping[str, np.ndarray],
    *,
    source: Graph | None = None,
    threads: int = 0,
) -> list[np.ndarray]:
    """Runs ``graph`` on onnxruntime; returns its outputs in order.

    Args:
        graph: the program.
        feeds: ``{input or weight name: array}``; weights found here become the model's
            initializers, the rest come from the source model. Every feed is cast to its
            node's dtype (``TensorType.dtype``; a float64 verification feed for a float32
            input runs as float32).
        source: the graph ``graph`` was optimised from, when ``graph.meta`` lacks the
            ONNX source or opaque payloads.
        threads: intra-op threads (0: default).

    Raises:
        ValueError: an input without a feed, or a graph that cannot be exported
            (``tensat_py.frontends.onnx.OnnxError``).
    """
    sess, inputs = prepare(graph, feeds, source=source, threads=threads)
    return list(sess.run(None, inputs))


def prepare(
    graph: Graph,
    feeds: Mapping[str, np.ndarray],
    *,
    source: Graph | None = None,
    threads: int = 0,
    spinning: bool = True,
) -> tuple[Any, dict[str, np.ndarray]]:
    """The session and the inputs :func:`run` would use (arguments as there; ``spinning``
    as in :func:`session`).

    Raises:
        ValueError: as :func:`run`.
    """
    from tensat_py.frontends.onnx import to_model

    leaf_types = graph.leaf_types()
    weight_names = {graph.nodes[i].name for i in graph.weights()}
    weights = {k: _as_dtype(v, leaf_types[k].dtype) for k, v in feeds.items() if k in weight_names}
    model = to_model(graph, weights=weights, source=source, check=False)
    for nid in graph.inputs():
        if graph.nodes[nid].name not in feeds:
            raise ValueError(f"no feed for input '{graph.nodes[nid].name}'")
    src = graph.meta.get("onnx") or (source.meta.get("onnx") if source is not None else None)
    inputs = _onnx_inputs(graph, feeds, src)
    sess = session(model, threads=threads, spinning=spinning)
    wanted = {i.name for i in sess.get_inputs()}
    return sess, {k: v for k, v in inputs.items() if k in wanted}


def source_session(
    graph: Graph, feeds: Mapping[str, np.ndarray], *, threads: int = 0, spinning: bool = True
) -> tuple[Any, dict[str, np.ndarray]] | None:
    """A session running the model ``graph`` was loaded from, as it was given
    (:func:`tensat_py.frontends.onnx.exporter.source_model`), and its inputs from ``feeds``
    (graph input names); None when there is no such model, onnxruntime cannot load it, or
    it needs an input ``feeds`` does not cover. Arguments as for :func:`prepare`."""
    from tensat_py.frontends.onnx.exporter import source_model

    model = source_model(graph)
    if model is None:
        return None
    inputs = _onnx_inputs(graph, feeds, graph.meta["onnx"])
    try:
        sess = session(model, threads=threads, spinning=spinning)
    except Exception:  # onnxruntime refuses the model as given: it is not timed
        return None
    wanted = {i.name for i in sess.get_inputs()}
    if not wanted <= inputs.keys():
        return None
    return sess, {k: v for k, v in inputs.items() if k in wanted}


def _onnx_inputs(graph: Graph, feeds: Mapping[str, np.ndarray], src: Any) -> dict[str, Any]:
    """The graph inputs ``feeds`` holds, under their ONNX names (``src``: the graph's
    :class:`~tensat_py.frontends.onnx.importer.OnnxSource`, or None) and cast to their
    dtypes."""
    leaf = src.leaf_names if src is not None else {}
    types = graph.leaf_types()
    names = (graph.nodes[i].name for i in graph.inputs())
    return {leaf.get(n, n): _as_dtype(feeds[n], types[n].dtype) for n in names if n in feeds}


def _as_dtype(a: object, dtype: str) -> np.ndarray:
    """``a`` as an array of the language dtype ``dtype`` (``bfloat16`` via ml_dtypes)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return np.asarray(a).astype(ml_dtypes.bfloat16)
    return np.asarray(a).astype(np.dtype(dtype), copy=False)
