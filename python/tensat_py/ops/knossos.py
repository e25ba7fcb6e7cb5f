"""The knossos dialect's Python side (``rust/src/lang/knossos.rs``).

Knossos constructs bind variables, so they are not run node by node by the tensor
executor: programs of this dialect run in the Knossos evaluator
(:mod:`tensat_py.frontends.knossos.evaluate`) and are priced by RLO's cost model
(``cost_model="rlo"``, ``rust/src/ks_cost.rs``). The declarations here make the layers
agree (``tests/test_language.py``) and say so when a tensor-only path meets them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensat_py.ops import OpContext, OpDef, register

__all__: list[str] = []

_SUMMARIES = {
    "var": "a variable of the given type",
    "let": "body with name bound to value",
    "lam": "the function name -> body",
    "build": "the vector [f 0, ..., f (n-1)]",
    "sumbuild": "f 0 + ... + f (n-1)",
    "index": "element i of vector v",
    "size": "length of vector v",
    "sum": "sum of the elements of v",
    "tuple": "the tuple of the operands",
    "get": "element i (1-based) of an n-tuple",
    "if": "then if cond else else",
    "assert": "body, after checking cond",
    "call": "a call of a user or prelude function",
    "ks_opaque": "an untranslated sub-term over its operands (kept by key, raised as written)",
}


def _evaluate(ctx: OpContext, args: Sequence[Any]) -> Any:
    raise NotImplementedError(
        f"`{ctx.op}` is a Knossos construct: run Knossos programs with "
        "tensat_py.frontends.knossos.evaluate"
    )


def _cost(ctx: OpContext) -> tuple[float, float]:
    raise ValueError(f"`{ctx.op}` is priced by the rlo cost model, not by FLOPs and bytes")


def _to_onnx(writer: Any, ctx: OpContext, inputs: Sequence[str], output: str) -> None:
    raise ValueError(f"`{ctx.op}` (Knossos) has no ONNX form; write .ks files")


for _name, _doc in _SUMMARIES.items():
    register(OpDef(_name, "knossos", _evaluate, _cost, _to_onnx, doc=_doc))
