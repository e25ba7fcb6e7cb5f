"""A whole program as onnxruntime (CPU, ``ORT_ENABLE_ALL``) runs it, for the cost models
that price onnxruntime from one-operator figures (``profile`` with its onnxruntime
backend, ``learned`` on the CPU).

Two things a sum of one-operator figures cannot see are priced at the program level by
the :class:`OrtProgram` mixin, in :meth:`~OrtProgram.graph_cost` (which decides whether
a candidate is cheaper than its input; an e-graph's per-node prices cannot see either):

* the chains onnxruntime fuses into one kernel (:func:`tensat_py.cost.ort_fusion.
  ort_fusions`): each is priced as its fused operator;
* the NCHWc layout (:func:`tensat_py.cost.nchwc.nchwc_plan`): onnxruntime's optimised
  graph holds a reorder at each boundary between an NCHWc tensor and a plain operator.
  A one-operator figure of an NCHWc convolution or pool was measured with its input
  reordered in and its output out again, while inside a program its neighbours may read
  NCHWc directly. The program's price is therefore the sum of its figures, less the
  reorders those figures hold (:attr:`~tensat_py.cost.nchwc.NchwcPlan.measured`) and
  the per-``split`` estimate the figures carry (:func:`tensat_py.cost.layout.reorders`),
  plus the reorders the program has (:attr:`~tensat_py.cost.nchwc.NchwcPlan.reorders`),
  each at the model's price of one reorder. A nearest ``resize`` is priced as the NCHWc
  ``Upsample`` exactly when the plan keeps it in NCHWc (an e-graph's prices guess that
  from its operand's producers, :func:`tensat_py.cost.layout.nchwc_kernel`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from tensat_py.cost import layout, nchwc
from tensat_py.cost.base import CostContext, Fusion, context_nodes, graph_contexts
from tensat_py.cost.ort_fusion import ort_fusions
from tensat_py.graph import Graph

__all__ = ["OrtProgram", "ReorderPrice"]

#: Seconds for one reorder (``"input"`` / ``"output"``) of a float32 NCHW shape.
ReorderPrice = Callable[[str, tuple[int, ...]], float]

#: Operators :func:`~tensat_py.cost.nchwc.nchwc_plan` can put in NCHWc on their own.
_NCHWC_ROOTS = frozenset({"conv2d", "poolmax", "poolavg", "opaque"})


class OrtProgram:
    """Mixin for cost models of onnxruntime on the CPU: while the model's ``fusion``
    attribute is true, a program is priced with its fused chains as one kernel and with
    the NCHWc reorders onnxruntime gives it (see the module docstring).

    Subclasses implement :meth:`reorder_price`; the mixin sits before
    :class:`~tensat_py.cost.base.OpCostModel` in the bases.
    """

    fusion: bool

    @property
    def prices_programs(self) -> bool:
        """Whether :meth:`graph_cost` prices more than the sum of per-node figures (while
        :attr:`fusion` is on): ``optimize`` then refines the extracted program against it
        (:func:`tensat_py.extract.refine.refine`)."""
        return bool(self.fusion)

    def reorder_price(self) -> tuple[int, ReorderPrice] | None:
        """The NCHWc block size and the price of one reorder on this device, or None when
        the layout is not priced (no NCHWc here, or no reorder figure known)."""
        raise NotImplementedError

    def _fusions(self, graph: Graph) -> dict[int, Fusion] | None:
        return ort_fusions(graph) if self.fusion else None

    def program_contexts(self, graph: Graph) -> list[CostContext]:
        """:func:`~tensat_py.cost.base.graph_contexts` of ``graph``, each chain
        onnxruntime fuses priced as its kernel when :attr:`fusion` is on."""
        return graph_contexts(graph, self._fusions(graph))

    def graph_cost(self, graph: Graph) -> float:
        """Seconds for ``graph`` on onnxruntime: the sum of the figures of
        :meth:`program_contexts`, plus :meth:`layout_cost`.

        Raises:
            ValueError: a node's operator cannot be priced.
        """
        fusions = self._fusions(graph)
        ctxs = graph_contexts(graph, fusions)
        total = sum(self.costs(ctxs))  # type: ignore[attr-defined]
        return total + self.layout_cost(graph, ctxs, fusions)

    def layout_cost(
        self,
        graph: Graph,
        ctxs: Sequence[CostContext],
        fusions: dict[int, Fusion] | None = None,
    ) -> float:
        """Seconds the NCHWc layout adds to the sum of the figures of ``ctxs`` (the
        contexts of ``graph`` with ``fusions``, as :meth:`costs` prices them): the
        program's reorders less those its figures already hold, and for each ``resize``
        priced as the NCHWc ``Upsample`` where the plan does not keep it in NCHWc (or the
        other way round), its plain figure less that kernel's price (or the other way
        round); 0 when :attr:`fusion` is off, the graph has no convolution or pool, or
        :meth:`reorder_price` is None. May be negative."""
        if not self.fusion or not any(n.op in _NCHWC_ROOTS for n in graph.nodes):
            return 0.0
        pricing = self.reorder_price()
        if pricing is None:
            return 0.0
        block, price = pricing
        plan = nchwc.nchwc_plan(graph, block, fusions)
        held = [r for c in ctxs if not c.constant for r in layout.reorders(c, block)]
        held += plan.measured
        total = sum(price(k, s) for k, s in plan.reorders) - sum(price(k, s) for k, s in held)
        for nid, c in zip(context_nodes(graph, fusions), ctxs, strict=True):
            if c.op == "resize" and not c.constant:
                total += self._upsample_correction(c, nid in plan.nchwc, block, price)
        return total

    def _upsample_correction(
        self, ctx: CostContext, nchwc_in_plan: bool, block: int, price: ReorderPrice
    ) -> float:
        """Seconds to add to a ``resize``'s per-operator price when the program's plan
        runs it otherwise (as NCHWc ``Upsample`` or as plain ``Resize``)."""
        guessed = layout.nchwc_kernel(ctx, block)
        if nchwc_in_plan == (guessed is not None):
            return 0.0
        x = ctx.inputs[0]
        key = guessed or ("upsample", layout.upsample_key(x.shape, ctx.params["sizes"]))
        kernel = price(key[0], key[1]) if key[1] is not None else 0.0
        if kernel <= 0.0:  # unknown: the figure stood in for it either way
            return 0.0
        plain = self.costs([dataclasses.replace(ctx, producers=())])[0]  # type: ignore[attr-defined]
        return kernel - plain if nchwc_in_plan else plain - kernel
