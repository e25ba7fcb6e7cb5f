"""RLO's cost model for Knossos programs (``cost_model="rlo"``).

The constants and rules are those of knossos-ksc ``rlo/src/rlo/costs.py`` (RLO); they are
implemented once, in Rust (``rust/src/ks_cost.rs``), where extraction uses them. Costs are
in RLO's unitless units, not seconds: add/sub 1, mul/div 2, exp/log 4, let 0.1, constants
and variables 0, build 2 + size + 16 x body, sumbuild 15 x (body scalars) + size +
16 x body, index/size 1, sum 15, call 2 + arguments + callee, if 1 + condition + the
costlier branch + 0.0001 x the other.

>>> from tensat_py.frontends.knossos.syntax import parse_text
>>> RloCostModel().program_cost(parse_text("(def f Float ((x : Float)) (mul x (add x 1.0)))"))
{'f': 3.0}
"""

from __future__ import annotations

from typing import Any

__all__ = ["RloCostModel"]


class RloCostModel:
    """Prices Knossos defs with RLO's cost function (tensor graphs are not priced)."""

    name = "rlo"

    def program_cost(self, program: Any) -> dict[str, float]:
        """RLO cost of each translatable def of a Knossos ``Program``, by name."""
        from tensat_py.frontends.knossos import function_costs

        return function_costs(program)

    def graph_cost(self, graph: Any) -> float:
        """Sum of the defs' costs of a loaded Knossos program (``KsProgram``).

        Raises:
            ValueError: ``graph`` is a tensor Graph, which RLO's model does not price.
        """
        prog = getattr(graph, "program", None)
        if prog is None:
            raise ValueError("the rlo cost model prices Knossos programs only")
        costs = self.program_cost(prog)
        return sum(costs.get(d.name, 0.0) for d in prog.defs)
