"""RLO's cost model for Knossos programs (``cost_model="rlo"``).

The constants and rules are those of knossos-ksc ``rlo/src/rlo/costs.py`` (RLO); they are
implemented once, in Rust (``rust/src/ks_cost.rs``), where extraction uses them. Costs are
in RLO's unitless units, not seconds: add/sub 1, mul/div 2, exp/log 4, let 0.1, constants
and variables 0, build 2 + size + 16 x body, sumbuild 15 x (body scalars) + size +
16 x body, index/size 1, sum 15, call 2 + arguments + callee, if 1 + condition + the
costlier branch + 0.0001 x the other.

A call's price needs the callee's cost: the model takes the program's function costs as
data (``function_costs``: name -> RLO units, what
:func:`tensat_py.frontends.knossos.function_costs` computes), so it never reads a program
itself; the pipeline's function stage (:mod:`tensat_py.def_phases`) gives it them.

>>> m = RloCostModel({"f": 3.0})
>>> nodes = [("x", []), ("Float", []), ("var", [0, 1]), ("f", []), ("call", [3, 1, 2])]
>>> m.term_cost(nodes + [("add", [4, 2])])  # (add (f x) x): add 1 + call (2 + 0 + f's 3)
6.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RloCostModel", "UNIT"]

#: The unit of every RLO cost.
UNIT = "RLO cost units"


class RloCostModel:
    """Prices Knossos terms with RLO's cost function (tensor graphs are not priced).

    Args:
        function_costs: each function's cost besides the call overhead and its arguments
            (RLO units), by the name calls use; a call to a function not in it costs RLO's
            default edef cost (7).
    """

    name = "rlo"
    unit = UNIT
    device = ""

    def __init__(self, function_costs: Mapping[str, float] | None = None) -> None:
        self.function_costs: dict[str, float] = dict(function_costs or {})

    def with_functions(self, function_costs: Mapping[str, float]) -> RloCostModel:
        """This model with these function costs (RLO units)."""
        return RloCostModel(function_costs)

    def term_cost(self, nodes: Sequence[tuple[str, Sequence[int]]]) -> float:
        """RLO cost of a flat knossos-dialect term (``(op, children)`` rows as
        :func:`tensat_py.frontends.knossos.lower.lower` makes them, children first, root
        last), RLO units; ``inf`` when it uses an operator RLO does not
        price (such as ``tanh``)."""
        from tensat_py import _core

        return float(_core.rlo_cost(list(nodes), self.function_costs))

    def extract(self, egraph: Any) -> tuple[float, Any]:
        """The cheapest term of a saturated e-graph's root under RLO's tree cost
        (``_core.EGraph.extract_rlo``): ``(cost in RLO units, flat term)``."""
        cost, term = egraph.extract_rlo(self.function_costs)
        return float(cost), term

    def graph_cost(self, graph: Any) -> float:
        """Not defined: RLO's model prices Knossos terms (:meth:`term_cost`), one def at a
        time, not tensor graphs or whole programs.

        Raises:
            ValueError: always, saying so.
        """
        raise ValueError(
            "the rlo cost model prices Knossos defs one at a time (RloCostModel.term_cost); "
            "optimise a .ks program with tensat_py.optimize(program), which prices each def"
        )
