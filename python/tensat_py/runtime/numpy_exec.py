"""The NumPy reference executor: every operator exactly as ``docs/language.md`` defines it.

The semantics live with the operators' declarations (:mod:`tensat_py.ops`: the TASO
dialect in :mod:`tensat_py.ops.taso`, the general tensor operators in
:mod:`tensat_py.ops.tensor`); this module walks a graph and calls each operator's
``evaluate(ctx, args)`` with an :class:`~tensat_py.ops.OpContext` built from the node and
its operands' types. ``input``/``weight`` values come from the feeds.

Arrays keep their dtype: float graphs run in the feeds' float dtype (verification uses
float64), integer and boolean tensors stay integer and boolean.

``opaque`` nodes are not computed here; their payload (``Graph.opaque_payload``, supplied
by the front end that created them) is asked to ``evaluate`` the operands. A node without
a payload, or whose payload cannot evaluate, raises ``ValueError``.

``conv2d``, ``merge``, ``enlarge`` and ``BN_EPS`` are re-exported from
:mod:`tensat_py.ops.taso` for existing callers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.graph import Graph, Node, TensorType
from tensat_py.ops.taso import BN_EPS, conv2d, enlarge, merge
from tensat_py.ops.tensor import np_dtype

__all__ = [
    "run",
    "random_feeds",
    "eval_node",
    "node_context",
    "BN_EPS",
    "conv2d",
    "merge",
    "enlarge",
    "INT_FEED_HIGH",
]

#: Integer inputs and weights are drawn uniformly from ``[0, INT_FEED_HIGH)``.
INT_FEED_HIGH = 4
#: Leaves never computed here (the feeds give them).
_LEAVES = frozenset({"input", "weight"})


def _array_type(a: Any) -> TensorType | tuple[TensorType, TensorType]:
    """The type of an operand value: an array, or a pair of arrays (a ``split``)."""
    if isinstance(a, tuple):
        return (_array_type(a[0]), _array_type(a[1]))  # type: ignore[return-value]
    arr = np.asarray(a)
    shape = tuple(int(d) for d in arr.shape)
    try:
        return TensorType(shape, arr.dtype.name)
    except ValueError:  # a dtype the language lacks (an opaque payload's result)
        return TensorType(shape)


def node_context(
    node: Node,
    graph: Graph | None = None,
    args: Sequence[Any] = (),
    float_dtype: str | None = None,
) -> ops.OpContext:
    """The :class:`~tensat_py.ops.OpContext` of ``node``.

    Operand types come from ``graph`` when given (the node's operands are graph node
    ids), else from the operand values ``args`` (shapes and dtypes of the arrays).
    """
    if graph is not None:
        inputs = [graph.nodes[i].type for i in node.inputs]
    else:
        inputs = [_array_type(a) for a in args]
    return ops.OpContext(
        op=node.op,
        params=node.params,
        inputs=inputs,
        output=node.type,
        constant=node.constant,
        graph=graph,
        name=node.name,
        float_dtype=float_dtype,
    )


def eval_node(node: Node, args: Sequence[Any], graph: Graph | None = None) -> Any:
    """Evaluate one node on the values of its tensor operands ``args`` (signature order).

    Returns an array of the node's output shape (a pair of arrays for ``split``; None for
    ``noop``). ``graph`` is needed for ``opaque`` nodes (their payloads live in
    ``graph.meta``).

    Raises:
        KeyError: an operator without a Python declaration (the message names it).
        ValueError: ``input``/``weight`` (fed, never evaluated), or the operator fails.
    """
    ctx = node_context(node, graph, args)
    return ops.get(node.op).evaluate(ctx, list(args))


def run(
    graph: Graph, feeds: Mapping[str, np.ndarray], float_dtype: str | None = None
) -> list[np.ndarray]:
    """Run ``graph`` on ``feeds`` (``{input/weight name: array}``); return its outputs.

    Only nodes some output depends on are computed; intermediate arrays are freed after
    their last use. Arrays keep the feeds' dtypes (float32 or float64 for floats; integer
    and boolean feeds stay so). ``float_dtype="float64"`` computes every float in float64
    whatever the feeds are (a program whose only inputs are integers, such as a random
    number generator's key); by default that happens when a float feed is float64.

    Raises:
        ValueError: a feed is missing or has the wrong shape, or an operator fails (the
            message names the node and operator).
    """
    keep = graph.live()
    last_use: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if keep[nid]:
            for i in node.inputs:
                last_use[i] = nid
    pinned = set(graph.outputs)
    # A float graph fed float64 (verification) computes every float in float64: constants
    # and casts made inside the graph follow (OpContext.float_dtype).
    leaf_types = graph.leaf_types()
    wide = any(
        np.asarray(v).dtype == np.float64
        for k, v in feeds.items()
        if k in leaf_types and leaf_types[k].dtype != "float64"
    )
    float_dtype = float_dtype or ("float64" if wide else None)
    vals: dict[int, Any] = {}
    for nid, node in enumerate(graph.nodes):
        if not keep[nid]:
            continue
        if node.op in _LEAVES:
            shape = node.type.shape  # type: ignore[union-attr]
            if node.name not in feeds:
                raise ValueError(f"no feed for {node.op} '{node.name}' {shape}")
            a = np.asarray(feeds[node.name])
            if tuple(a.shape) != shape:
                raise ValueError(f"feed '{node.name}' has shape {a.shape}, expected {shape}")
            vals[nid] = a
        else:
            opdef = ops.get(node.op)
            ctx = node_context(node, graph, float_dtype=float_dtype)
            try:
                vals[nid] = opdef.evaluate(ctx, [vals[i] for i in node.inputs])
            except ValueError as e:
                raise ValueError(f"node '{node.name}' ({node.op}): {e}") from None
        for i in set(node.inputs):
            if last_use.get(i) == nid and i not in pinned:
                vals.pop(i, None)
    return [vals[o] for o in graph.outputs]


def _fan_in(t: TensorType) -> int:
    s = t.shape
    if len(s) == 4:
        return max(s[1] * s[2] * s[3], 1)
    if len(s) >= 2:
        return max(s[-2:])
    return 1


def random_feeds(graph: Graph, seed: int = 0, dtype: str = "float32") -> dict[str, np.ndarray]:
    """Random feeds for every input and weight, keyed by name.

    Float leaves (any float dtype) are drawn in float64 and cast to ``dtype`` (verification
    passes ``"float64"``): inputs are standard normal; weights are uniform in
    ``±sqrt(3 / fan_in)`` (unit variance through a layer: fan-in = ``I*kh*kw`` for 4-D
    kernels, the larger of the last two dims for matrices) so deep graphs neither vanish
    nor overflow; 1-D weights are uniform in [-1, 1], except batch-norm variances and
    scales (uniform in [0.5, 1.5]). Integer leaves (any integer dtype) are uniform
    integers in ``[0, INT_FEED_HIGH)`` = 0..3 and boolean leaves fair coin flips, both in
    their own dtype whatever ``dtype`` says. The same names and seed give the same values.

    Raises:
        TypeError: ``dtype`` is not a float dtype NumPy knows.
    """
    try:
        out_dtype = np_dtype(dtype)
    except ValueError:
        out_dtype = None
    if out_dtype is None or not (out_dtype.kind == "f" or dtype == "bfloat16"):
        raise TypeError(f"random_feeds: dtype {dtype!r} is not a float dtype")
    positive: set[int] = set()
    for node in graph.nodes:
        if node.op == "batchnorm":
            positive.add(node.inputs[1])
            positive.add(node.inputs[4])
    feeds: dict[str, np.ndarray] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op not in _LEAVES:
            continue
        t: TensorType = node.type  # type: ignore[assignment]
        # Seed per name so two graphs with the same names get the same values.
        sub = np.random.default_rng([seed, *node.name.encode()])
        if t.dtype == "bool":
            feeds[node.name] = sub.random(t.shape) < 0.5
            continue
        if np.dtype(t.dtype).kind in "iu":
            feeds[node.name] = sub.integers(0, INT_FEED_HIGH, t.shape, dtype=t.dtype)
            continue
        if node.op == "input":
            a = sub.standard_normal(t.shape)
        elif nid in positive:
            a = sub.uniform(0.5, 1.5, t.shape)
        elif len(t.shape) <= 1:
            a = sub.uniform(-1.0, 1.0, t.shape)
        else:
            lim = np.sqrt(3.0 / _fan_in(t))
            a = sub.uniform(-lim, lim, t.shape)
        feeds[node.name] = np.asarray(a).astype(out_dtype)
    return feeds
