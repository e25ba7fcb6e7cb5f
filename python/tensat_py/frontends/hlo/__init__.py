"""XLA HLO text in and out: ``tensat_py.load("m.hlo")``, ``tensat optimize m.hlo -o out.hlo``.

* :mod:`~tensat_py.frontends.hlo.parser`: HLO text -> :class:`~.ir.Module`
  (``file:line:col: message`` on malformed input).
* :mod:`~tensat_py.frontends.hlo.ir`: the module as data, and the printer
  (``parse(print(parse(t))) == parse(t)``).
* :mod:`~tensat_py.frontends.hlo.translate`: module <-> :class:`~tensat_py.graph.Graph`
  (tensor and hlo dialects; opaque nodes for the rest, tuples flattened at the boundary).

Graphs loaded here are verified through XLA (``Graph.meta["verify_runner"] = "xla"``:
:func:`tensat_py.verify` compiles both modules with jaxlib and runs them on the same random
inputs), and optimised with ``rules/tensor.rules`` + ``rules/hlo.rules`` by default.

>>> from tensat_py.frontends.hlo import loads, dumps
>>> text = "HloModule m\\nENTRY e {\\n  p = f32[2,3] parameter(0)\\n"
>>> g = loads(text + "  ROOT n = f32[2,3] negate(p)\\n}\\n")
>>> g.op_counts()
{'input': 1, 'neg': 1}
>>> "negate(%p)" in dumps(g)
True
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tensat_py.frontends.hlo.ir import Module, leaf_shapes, print_module
from tensat_py.frontends.hlo.parser import HloParseError, parse_file, parse_module
from tensat_py.frontends.hlo.translate import (
    LITERAL_LIMIT,
    HloExportError,
    HloOpaque,
    HloSource,
    HloTranslateError,
    entry_leaves,
    to_graph,
    to_module,
    weight_values,
)
from tensat_py.graph import Graph

__all__ = [
    "HloParseError",
    "HloTranslateError",
    "HloExportError",
    "HloOpaque",
    "HloSource",
    "load",
    "loads",
    "save",
    "dumps",
    "parse_module",
    "parse_file",
    "print_module",
    "to_graph",
    "to_module",
    "random_args",
    "entry_leaves",
    "LITERAL_LIMIT",
    "graph_hash",
]


def load(path: str | Path) -> Graph:
    """Read an HLO text file into a graph.

    Raises:
        HloParseError, HloTranslateError: ``file:line:col: message``.
    """
    p = Path(path)
    return to_graph(parse_file(p), str(p))


def loads(text: str, file: str = "<hlo>") -> Graph:
    """:func:`load` from a string."""
    return to_graph(parse_module(text, file), file)


def dumps(
    graph: Graph,
    *,
    weights: Mapping[str, Any] | None = None,
    literal_limit: int | None = LITERAL_LIMIT,
) -> str:
    """The HLO text of ``graph`` (its source module's signature and root structure).

    Weights with known values (``weights``, else the front end's, e.g. an ONNX model's
    initializers) of at most ``literal_limit`` elements print as literals; the others
    are entry parameters after the inputs (:func:`entry_leaves` lists them; see
    :data:`LITERAL_LIMIT`)."""
    return print_module(to_module(graph, weights=weights, literal_limit=literal_limit))


def save(
    graph: Graph,
    path: str | Path,
    *,
    source: Graph | None = None,
    weights: Mapping[str, Any] | None = None,
    literal_limit: int | None = LITERAL_LIMIT,
) -> Path:
    """Write ``graph`` as HLO text to ``path`` atomically; returns the path.

    ``source`` (the graph it was optimised from) supplies the module frame when ``graph``
    lacks ``meta["hlo"]``, and the weight values when ``weights`` is None and ``graph``'s
    meta holds none (an ONNX source's initializers). Other arguments as :func:`dumps`.
    """
    if "hlo" not in graph.meta and source is not None and "hlo" in source.meta:
        graph.meta["hlo"] = source.meta["hlo"]
    if weights is None and source is not None and not weight_values(graph):
        weights = _source_values(graph, source)
    text = dumps(graph, weights=weights, literal_limit=literal_limit)
    p = Path(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def _source_values(graph: Graph, source: Graph) -> Mapping[str, Any] | None:
    """The weight values ``source``'s front end holds for ``graph``'s weights (None when
    it holds none)."""
    fn = getattr(source.meta.get("onnx"), "weight_values", None)
    return dict(fn(graph)) if fn is not None else None


def random_args(
    graph: Graph,
    seed: int = 0,
    *,
    weights: Mapping[str, Any] | None = None,
    literal_limit: int | None = LITERAL_LIMIT,
) -> list[np.ndarray]:
    """Random arguments for the entry parameters of ``graph``'s module, tuple leaves
    flattened: for inputs, floats standard normal, integers uniform in ``[0, 4)``,
    booleans coin flips (the HLO element type's NumPy dtype); for weights written as
    parameters (:func:`entry_leaves`, after the inputs), the values
    :func:`tensat_py.runtime.numpy_exec.random_feeds` draws for them by name (positive
    batch-norm variances). ``weights``/``literal_limit`` as for :func:`dumps`."""
    from tensat_py.frontends.hlo.ir import ArrayShape
    from tensat_py.frontends.hlo.translate import ETYPE
    from tensat_py.runtime.xla_exec import np_dtype

    rng = np.random.default_rng(seed)
    src: HloSource | None = graph.meta.get("hlo")
    shapes = (
        [s for _, sh, _ in src.params for _, s in leaf_shapes(sh)]
        if src is not None
        else [
            ArrayShape(ETYPE[t.dtype], tuple(t.shape))
            for t in (graph.type_of(i) for i in graph.inputs())
        ]
    )
    leaves = entry_leaves(graph, weights=weights, literal_limit=literal_limit)[len(shapes) :]
    drawn: dict[str, np.ndarray] = {}
    if leaves:
        from tensat_py.runtime.numpy_exec import random_feeds

        drawn = random_feeds(graph, seed=seed)
    out = []
    for s in shapes:
        dt = np.dtype(np_dtype(s.etype))
        if dt == np.bool_:
            out.append(rng.integers(0, 2, s.dims).astype(bool))
        elif dt.kind in "iu":
            out.append(rng.integers(0, 4, s.dims).astype(dt))
        else:
            out.append(rng.standard_normal(s.dims).astype(dt))
    by_name = {graph.nodes[i].name: i for i in graph.weights()}
    for name in leaves:
        t = graph.type_of(by_name[name])
        out.append(np.asarray(drawn[name]).astype(np_dtype(ETYPE[t.dtype])))
    return out


def graph_hash(module: Module) -> str:
    """A structural hash of a module (as HloEnv's graph hash): opcodes, shapes and
    attributes over the entry's instructions reachable from the root, with operands by
    position rather than name, and the called computations likewise; names, metadata and
    layouts do not count. Two modules with equal hashes compute the same function."""
    import hashlib

    from tensat_py.frontends.hlo.ir import COMPUTATION_ATTRS, print_shape

    memo: dict[str, str] = {}

    def comp_hash(name: str) -> str:
        if name in memo:
            return memo[name]
        comp = module.computation(name)
        by = comp.by_name()
        local: dict[str, str] = {}

        def ins_hash(n: str) -> str:
            if n in local:
                return local[n]
            ins = by[n]
            parts = [ins.opcode, print_shape(ins.shape, layouts=False), ins.payload or ""]
            for k, v in ins.attrs:
                if k in ("metadata", "sharding", "frontend_attributes"):
                    continue
                if k in COMPUTATION_ATTRS:
                    v = ",".join(comp_hash(c.strip().lstrip("%")) for c in v.strip("{}").split(","))
                parts.append(f"{k}={v}")
            parts += [ins_hash(o) for o in ins.operands]
            local[n] = hashlib.sha256("|".join(parts).encode()).hexdigest()
            return local[n]

        import sys

        sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
        memo[name] = ins_hash(comp.root.name)
        return memo[name]

    return comp_hash(module.entry.name)[:16]
