"""Cold weights: what a measured operator costs when its weights come from memory.

A one-operator measurement (``profile``) runs the same operator again and again, so its
weights stay in the CPU's last-level cache and it is timed at cache speed. Inside a whole
model that holds more weight bytes than the last-level cache, every weight is read from
memory once per inference. On the 2-core test machine (32 MiB L3) NasRNN's 1x512 by
512x512 matmuls take 26 µs alone and 96 µs inside the model (onnxruntime's per-node
profile), and the sum of the one-operator figures is 0.46 of NasRNN's and 0.75 of BERT's
measured latency, while SqueezeNet (5 MB of weights) and ResNet-50's convolutions
(compute-bound) sum to within a few per cent of theirs.

So a CPU cost model that measures operators hot (``profile``, and ``learned``, trained on
those figures) prices a program whose weights outgrow the last-level cache with the
roofline argument (Williams, Waterman and Patterson, CACM 2009) applied to the weights
alone: an operator with constant operands costs at least their bytes over the memory
bandwidth, ``max(measured, weight bytes / bandwidth(weight bytes))``. The bandwidth is
measured once per device on the same backend, as a function of the weight's size
(:class:`BandwidthCurve`): chains of ``1 x n`` by ``n x n`` float32 matmuls with distinct
weights that together hold four times the last-level cache, for ``n`` = 256, 512, 1024
and 2048 (0.25 to 16 MiB per weight), their bytes over the chain's time. Small weights
stream slower (here 13.6 GB/s at 0.25 MiB, 17-21 GB/s at 1 MiB, 21.7 GB/s at 16 MiB),
which is why merging two matmuls that share an input pays on NasRNN although the bytes
read stay the same.

A program's weight bytes are those of its distinct weights: the ``weight`` leaves of a
graph (:func:`graph_weight_bytes`) or of an exported e-graph (:func:`export_weight_bytes`);
rewrites do not add weights (a concatenation of weights is a constant computed from them).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from tensat_py import ops
from tensat_py.cost.base import operand_flags
from tensat_py.graph import Graph, TensorType

__all__ = [
    "BandwidthCurve",
    "ColdWeights",
    "cold_adjust",
    "export_weight_bytes",
    "graph_weight_bytes",
    "last_level_cache_bytes",
    "non_decreasing",
    "streamed_bytes",
]

#: Last-level cache assumed where sysfs does not say (bytes).
DEFAULT_LLC = 32 << 20


def last_level_cache_bytes(default: int = DEFAULT_LLC) -> int:
    """Size in bytes of the largest cache of CPU 0 (Linux sysfs), or ``default``;
    ``TENSAT_LLC_BYTES`` in the environment overrides both (a virtual machine may report
    its host's whole cache: 480 MiB here once, which made the cold-weight calibration
    stream 1.9 GB per matrix size).

    Raises:
        ValueError: ``TENSAT_LLC_BYTES`` is not a positive integer.

    Example:
        >>> last_level_cache_bytes() > 0
        True
    """
    env = os.environ.get("TENSAT_LLC_BYTES", "").strip()
    if env:
        if not env.isdigit() or int(env) <= 0:
            raise ValueError(f"TENSAT_LLC_BYTES must be a positive number of bytes, got {env!r}")
        return int(env)
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        return default
    best = 0
    for e in entries:
        try:
            with open(os.path.join(base, e, "size")) as f:
                text = f.read().strip().upper()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * unit)
    return best or default


def graph_weight_bytes(graph: Graph) -> int:
    """Bytes of the ``weight`` nodes some output of ``graph`` depends on."""
    live = graph.live()
    total = 0
    for i in graph.weights():
        t = graph.nodes[i].type
        if live[i] and isinstance(t, TensorType):
            total += t.nbytes
    return total


def export_weight_bytes(export: Mapping[str, Any]) -> int:
    """Bytes of the classes of an exported e-graph that hold a ``weight`` e-node (shape
    and dtype from the class's analysis data)."""
    classes = export["classes"]
    seen: set[int] = set()
    total = 0
    for op, c in zip(export["node_op"], export["node_eclass"], strict=True):
        if op != "weight" or c in seen:
            continue
        seen.add(c)
        data = classes[c]
        if data.get("kind") == "tensor":
            t = TensorType(
                tuple(int(d) for d in data["shape"]), str(data.get("dtype") or "float32")
            )
            total += t.nbytes
    return total


def streamed_bytes(ctx: ops.OpContext) -> int:
    """Bytes of ``ctx``'s constant operands (the weights it reads)."""
    return sum(
        t.nbytes
        for t, c in zip(ctx.inputs, operand_flags(ctx), strict=True)
        if c and isinstance(t, TensorType)
    )


def non_decreasing(values: Sequence[float]) -> list[float]:
    """The least-squares non-decreasing fit of ``values`` (pool adjacent violators: a run
    that decreases is replaced by its mean). Streaming a weight of ``s`` bytes takes
    ``o + s / B`` (a fixed cost per operator, then the bytes at the memory's rate ``B``),
    so the rate ``s / t`` cannot fall as weights grow; a measured point below a smaller
    size's is noise.

    Example:
        >>> non_decreasing([10.0, 20.0, 18.0, 30.0])
        [10.0, 19.0, 19.0, 30.0]
    """
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([float(v), 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return [b[0] / b[1] for b in blocks for _ in range(int(b[1]))]


class BandwidthCurve:
    """Memory bandwidth (bytes per second) as a function of a weight's size in bytes:
    piecewise linear in ``log(bytes)`` through measured points, constant beyond them.

    Args:
        points: ``(weight bytes, bytes per second)`` pairs, at least one, all positive.

    Raises:
        ValueError: no points, or a point that is not positive and finite.

    Example:
        >>> curve = BandwidthCurve([(1 << 20, 10e9), (4 << 20, 20e9)])
        >>> [round(curve(b) / 1e9) for b in (1 << 18, 1 << 20, 2 << 20, 4 << 20, 1 << 30)]
        [10, 10, 15, 20, 20]
    """

    def __init__(self, points: Sequence[tuple[float, float]]) -> None:
        pts = sorted((float(b), float(bw)) for b, bw in points)
        if not pts or not all(b > 0 and bw > 0 and math.isfinite(b * bw) for b, bw in pts):
            raise ValueError(f"BandwidthCurve: need positive, finite points, got {points!r}")
        self.points = pts

    def __call__(self, nbytes: float) -> float:
        pts = self.points
        if nbytes <= pts[0][0]:
            return pts[0][1]
        for (b0, w0), (b1, w1) in zip(pts, pts[1:], strict=False):
            if nbytes <= b1:
                t = math.log(nbytes / b0) / math.log(b1 / b0)
                return w0 + t * (w1 - w0)
        return pts[-1][1]


def cold_adjust(
    costs: Sequence[float], ctxs: Sequence[ops.OpContext], bandwidth: BandwidthCurve
) -> list[float]:
    """Each priced (non-zero) figure raised to its weights' bytes over ``bandwidth`` at
    their size; ``costs`` in seconds, one per context.

    Example:
        >>> from tensat_py.cost.base import make_context
        >>> mm = make_context("matmul", {"act": 0}, [(1, 512), (512, 512)], (1, 512),
        ...                   operand_constant=(False, True))
        >>> flat = BandwidthCurve([(1 << 20, 1e10)])  # 10 GB/s at every size
        >>> [round(x * 1e6) for x in cold_adjust([26e-6], [mm], flat)]  # 1 MiB
        [105]
    """
    out = []
    for x, c in zip(costs, ctxs, strict=True):
        n = streamed_bytes(c) if x > 0 else 0
        out.append(max(x, n / bandwidth(n)) if n > 0 else x)
    return out


class ColdWeights:
    """Mixin for a CPU cost model whose figures are measured (or learned) hot: while it
    prices a graph (:meth:`graph_cost`) or an exported e-graph (:meth:`costs_for_export`)
    whose weight bytes exceed :attr:`llc`, its :meth:`costs` pass through
    :meth:`cold_weights_adjust` (see the module docstring).

    Subclasses set :attr:`cold_weights` (whether the rule applies: CPU backends) and
    implement :meth:`bandwidth`; their ``costs`` end with ``self.cold_weights_adjust(out,
    ctxs)``.
    """

    #: Whether the rule applies to this model (CPU backends).
    cold_weights: bool = False
    #: Last-level cache bytes: a program with more weight bytes streams them from memory.
    llc: int = DEFAULT_LLC
    _cold: bool = False

    def bandwidth(self) -> BandwidthCurve | None:
        """Memory bandwidth by weight size, or ``None`` when unknown."""
        raise NotImplementedError

    def graph_cost(self, graph: Graph) -> float:
        """See :meth:`tensat_py.cost.base.OpCostModel.graph_cost`; cold weights when the
        graph's weights outgrow the last-level cache."""
        prev, self._cold = self._cold, self.cold_weights and graph_weight_bytes(graph) > self.llc
        try:
            return super().graph_cost(graph)  # type: ignore[misc]
        finally:
            self._cold = prev

    def costs_for_export(self, export: Mapping[str, Any]) -> list[float]:
        """See :meth:`tensat_py.cost.base.OpCostModel.costs_for_export`; cold weights when
        the e-graph's weights outgrow the last-level cache."""
        big = export_weight_bytes(export) > self.llc
        prev, self._cold = self._cold, self.cold_weights and big
        try:
            return super().costs_for_export(export)  # type: ignore[misc]
        finally:
            self._cold = prev

    def cold_weights_adjust(
        self, costs: Sequence[float], ctxs: Sequence[ops.OpContext]
    ) -> list[float]:
        """``costs`` as given, or through :func:`cold_adjust` while a program with cold
        weights is being priced and the bandwidth is known."""
        if not self._cold:
            return list(costs)
        bw = self.bandwidth()
        return cold_adjust(costs, ctxs, bw) if bw else list(costs)
