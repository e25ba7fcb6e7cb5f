"""Runs knossos-dialect terms node by node through the operators' declarations.

What :mod:`tensat_py.runtime.numpy_exec` is for tensor graphs, this is for the knossos
dialect: a term (a flat node list, children first and the root last, as
:func:`tensat_py.frontends.knossos.lower.lower` writes it and e-graph extraction returns
it) runs by calling each operator's ``evaluate`` (:mod:`tensat_py.ops`). The dialect's
constructs (:mod:`tensat_py.ops.knossos`) receive their operands unevaluated (a
``let`` body runs under its binding, an ``if`` runs one branch) and the scope in
``ctx.scope``; scalar arithmetic runs the tensor dialect's ``evaluate`` on rank-0 NumPy
arrays (``Float`` float64, ``Integer`` int64, ``Bool`` bool) and gives back a Python
float, int or bool.

Calls of functions and untranslated sub-terms (``ks_opaque``) need the program: the
caller passes a :class:`Program` (the Knossos evaluator,
:func:`tensat_py.frontends.knossos.evaluate.evaluate_term`, is one).

Integer division follows the tensor dialect (``div`` truncates toward zero, ``x / 0``
is 0), where ksc's runtime fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from tensat_py import ops
from tensat_py.graph import TensorType
from tensat_py.ops import OpContext
from tensat_py.ops.knossos import CONSTRUCTS, EvalError

__all__ = ["Program", "run_term"]

_COMPARISONS = frozenset({"equal", "greater", "greater_equal", "less", "less_equal"})


class Program(Protocol):
    """The functions a term may call."""

    def call(self, name: str, args: list[Any]) -> Any:
        """Call function ``name``: the symbol the term's ``call`` node names (a front end
        may write an overload's symbol, such as ``f@Vec<Float>``)."""
        ...

    def opaque(self, key: str, operands: list[Any]) -> Any:
        """Run the untranslated sub-term ``key`` over its operands' values."""
        ...


def _signatures() -> dict[str, list[tuple[str, str]]]:
    global _SIGS
    if _SIGS is None:
        from tensat_py import _core

        _SIGS = {k: list(v) for k, v in _core.signatures().items()}
    return _SIGS


_SIGS: dict[str, list[tuple[str, str]]] | None = None


class _Term:
    def __init__(self, nodes: Sequence[tuple[str, Sequence[int]]], program: Program) -> None:
        self.nodes = nodes
        self.program = program
        self.sigs = _signatures()

    def params(self, i: int) -> tuple[dict[str, Any], list[int]]:
        """Node ``i``'s parameters (from its leaf children) and its operand node ids."""
        op, ch = self.nodes[i]
        params: dict[str, Any] = {}
        operands: list[int] = []
        sig = self.sigs.get(op, [])
        for k, c in enumerate(ch):
            kind = sig[k][1] if k < len(sig) else "tensor"
            if kind == "tensor":
                operands.append(c)
                continue
            text = self.nodes[c][0]
            params[sig[k][0]] = (
                int(text) if kind == "int" else float(text) if kind == "float" else text
            )
        return params, operands

    def run(self, i: int, frame: _Frame) -> Any:
        if i in frame.memo:
            return frame.memo[i]
        op = self.nodes[i][0]
        params, operands = self.params(i)
        try:
            d = ops.get(op)
        except KeyError:
            raise EvalError(f"node {i}: `{op}` is not an operator of the language") from None
        if op in CONSTRUCTS:
            ctx = OpContext(op, params, (), None, scope=frame)
            v = d.evaluate(ctx, [_Operand(self, c, frame) for c in operands])
        else:
            args = [_array(self.run(c, frame)) for c in operands]
            ins = [TensorType((), str(a.dtype)) for a in args]
            out = self._output(op, params, ins)
            ctx = OpContext(op, params, ins, out)
            v = _scalar(d.evaluate(ctx, args))
        frame.memo[i] = v
        return v

    @staticmethod
    def _output(op: str, params: Mapping[str, Any], ins: list[TensorType]) -> TensorType:
        if "dtype" in params:
            return TensorType((), str(params["dtype"]))
        if op in _COMPARISONS:
            return TensorType((), "bool")
        return ins[0] if ins else TensorType((), "float64")


class _Frame:
    """The variables bound where a node runs, and the values of nodes already run there
    (a term shares sub-terms; a value depends only on the node and its frame)."""

    __slots__ = ("vars", "memo", "term")

    def __init__(self, term: _Term, variables: dict[str, Any]) -> None:
        self.term, self.vars = term, variables
        self.memo: dict[int, Any] = {}

    def variable(self, name: str) -> Any:
        if name not in self.vars:
            raise EvalError(f"unbound variable `{name}`")
        return self.vars[name]

    def call(self, name: str, args: list[Any]) -> Any:
        return self.term.program.call(name, args)

    def opaque(self, key: str, operands: list[Any]) -> Any:
        return self.term.program.opaque(key, operands)


class _Operand:
    __slots__ = ("term", "node", "frame")

    def __init__(self, term: _Term, node: int, frame: _Frame) -> None:
        self.term, self.node, self.frame = term, node, frame

    def value(self) -> Any:
        return self.term.run(self.node, self.frame)

    def under(self, bindings: Mapping[str, Any]) -> Any:
        return self.term.run(self.node, _Frame(self.term, {**self.frame.vars, **bindings}))


def _array(v: Any) -> np.ndarray:
    if isinstance(v, bool):
        return np.asarray(v, np.bool_)
    if isinstance(v, int):
        return np.asarray(v, np.int64)
    if isinstance(v, float):
        return np.asarray(v, np.float64)
    raise EvalError(f"a tensor-dialect operator of the knossos dialect got {v!r}, not a scalar")


def _scalar(a: Any) -> Any:
    arr = np.asarray(a)
    if arr.shape != ():
        raise EvalError(f"a scalar operator gave shape {arr.shape}")
    return arr.item()


def run_term(
    nodes: Sequence[tuple[str, Sequence[int]]],
    variables: Mapping[str, Any],
    program: Program,
) -> Any:
    """The value of a knossos-dialect term.

    Args:
        nodes: the term, ``(operator or symbol, child ids)`` rows, root last.
        variables: values of its free variables (a def's parameters), by name.
        program: resolves ``call`` and ``ks_opaque`` nodes.

    Returns:
        The root's value (see :mod:`tensat_py.ops.knossos` for how values are held).

    Raises:
        EvalError: an unbound variable, a failed ``assert``, an index out of range, a
            node that is not an operator.

    >>> class NoCalls:
    ...     def call(self, name, args): raise EvalError(name)
    ...     def opaque(self, key, operands): raise EvalError(key)
    >>> t = [("x", []), ("Float", []), ("var", [0, 1]), ("mul", [2, 2])]
    >>> run_term(t, {"x": 3.0}, NoCalls())
    9.0
    """
    if not nodes:
        raise EvalError("an empty term")
    term = _Term(nodes, program)
    return term.run(len(nodes) - 1, _Frame(term, dict(variables)))
