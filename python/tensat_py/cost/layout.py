"""onnxruntime's blocked NCHWc layout: where its reorders go, and what they cost.

With ``ORT_ENABLE_ALL`` on the CPU, onnxruntime's NchwcTransformer runs convolutions in
the blocked layout NCHWc (``[N, C/b, H, W, b]``, block ``b`` 8 with AVX2, 16 with
AVX-512) and keeps a tensor there while the operators reading it have NCHWc kernels
(pools, sums, some activations, channel concats). At every boundary with a plain
operator it inserts a copy: ``com.microsoft.nchwc.ReorderInput`` (NCHW to NCHWc) or
``ReorderOutput`` (back). A ``Split`` has no NCHWc kernel, so Tensat's convolution merges
(two convolutions that share an input become one and a ``split``) take the merged output
out of NCHWc and, through the parts, often their neighbours too: on NasNet-A the
profile-guided merges had 94 reorder nodes in onnxruntime's optimised graph, 16.4 ms of
298 ms, about what their convolutions saved (``docs/cost-models.md``).

Two levels:

* per operator, for an e-graph's prices (:func:`reorders`, :func:`adjust`): a ``split``
  along the channels of a convolution's output is priced with a ``ReorderOutput`` of its
  input and a ``ReorderInput`` of each block-aligned part (its readers assumed NCHWc
  convolutions);
* per program (:func:`tensat_py.cost.nchwc.nchwc_plan`, priced by
  :class:`tensat_py.cost.ort_program.OrtProgram`): NchwcTransformer followed over the
  whole program: the reorders of onnxruntime's optimised graph (for the NasNet-A
  candidate above, all 94), and the reorders the one-operator figures of its NCHWc
  convolutions and pools already hold (measured alone, a convolution reorders its input
  in and its output out).

:func:`nchwc_block` probes the block once per device (0 where no convolution becomes an
NCHWc one). Each reorder is measured alone on onnxruntime (a one-node model in the
``com.microsoft.nchwc`` domain) and cached with the operators' figures; ``learned``
prices them at the cached seconds per byte (:class:`ReorderRates`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.graph import TensorType

__all__ = [
    "BLOCK_SIGNATURE",
    "NCHWC_DOMAIN",
    "Reorder",
    "ReorderRates",
    "adjust",
    "measure_reorder",
    "nchwc_block",
    "reorder_op",
    "reorder_signature",
    "reorders",
]

#: onnxruntime's operator domain for the NCHWc kernels.
NCHWC_DOMAIN = "com.microsoft.nchwc"
#: Cache signature of the probed block size (``low`` holds it; 0: no NCHWc).
BLOCK_SIGNATURE = '{"calibration":"nchwc block"}'
#: Block sizes probed, smallest first (AVX2, AVX-512).
BLOCKS = (8, 16)

#: One reorder: ``("input" | "output", NCHW shape)``.
Reorder = tuple[str, tuple[int, ...]]


def reorder_op(kind: str) -> str:
    """The cache record's operator name of a ``kind`` (``"input"``/``"output"``) reorder,
    a calibration name (``__reorder_input__``)."""
    return f"__reorder_{kind}__"


def reorder_signature(kind: str, shape: Sequence[int]) -> str:
    """The cache signature of one ``Reorder{Input,Output}`` of an NCHW float32 ``shape``."""
    return json.dumps(
        {"calibration": "nchwc reorder", "kind": kind, "shape": [int(d) for d in shape]},
        separators=(",", ":"),
    )


def reorders(ctx: ops.OpContext, block: int) -> list[Reorder]:
    """The reorders onnxruntime adds around ``ctx`` with NCHWc block ``block`` (0: none).

    Only a ``split`` along axis 1 of a 4-D float32 tensor that a ``conv2d`` (or a sum onto
    one) may produce (any producer of the operand's class,
    :attr:`tensat_py.cost.base.CostContext.producers`)
    with a channel count divisible by ``block`` has any: ``("output", input shape)`` and
    ``("input", part shape)`` for each part whose channels ``block`` divides.

    Example:
        >>> from tensat_py.cost.base import CostContext
        >>> x = TensorType((1, 64, 28, 28), "float32")
        >>> part = TensorType((1, 32, 28, 28), "float32")
        >>> ctx = CostContext("split", {"axis": 1}, [x], (part, part),
        ...                   producers=(frozenset({"conv2d"}),))
        >>> reorders(ctx, 8)
        [('output', (1, 64, 28, 28)), ('input', (1, 32, 28, 28)), ('input', (1, 32, 28, 28))]
        >>> reorders(ctx, 0)
        []
    """
    if block <= 0 or ctx.op != "split" or ctx.constant:
        return []
    prods = getattr(ctx, "producers", ())
    x = ctx.inputs[0] if ctx.inputs else None
    parts = ctx.output if isinstance(ctx.output, tuple) else ()
    if not (prods and any(_nchwc_label(lab) for lab in prods[0]) and isinstance(x, TensorType)):
        return []
    if len(x.shape) != 4 or x.dtype != "float32" or int(ctx.params.get("axis", -1)) != 1:
        return []
    if x.shape[1] % block:
        return []
    out: list[Reorder] = [("output", tuple(x.shape))]
    for p in parts:
        if isinstance(p, TensorType) and p.shape[1] % block == 0:
            out.append(("input", tuple(p.shape)))
    return out


def _nchwc_label(label: str) -> bool:
    """Whether an operator of producer label ``label`` leaves its output in NCHWc: a
    convolution (with or without a fused activation) or a sum fused into one."""
    return label.rsplit("<", 1)[-1] in ("conv2d", "conv2d+act")


def _conv_model(channels: int) -> Any:
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.ones((channels, channels, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[1, 1])],
        "probe",
        [helper.make_tensor_value_info("x", 1, [1, channels, 8, 8])],
        [helper.make_tensor_value_info("y", 1, [1, channels, 8, 8])],
        [w],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def nchwc_block(threads: int = 0) -> int:
    """The NCHWc block size onnxruntime uses on this CPU: the smallest of :data:`BLOCKS`
    at which a 1x1 convolution of that many channels becomes a ``com.microsoft.nchwc``
    node in onnxruntime's optimised graph (``ORT_ENABLE_ALL``), or 0 when neither does.

    Example:
        >>> nchwc_block() in (0, 8, 16)
        True
    """
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime as ort

    for block in BLOCKS:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "optimised.onnx"
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            so.optimized_model_filepath = str(path)
            so.intra_op_num_threads = threads
            so.log_severity_level = 3  # the "hardware specific" warning of saving it
            ort.InferenceSession(
                _conv_model(block).SerializeToString(), so, providers=["CPUExecutionProvider"]
            )
            if any(n.domain == NCHWC_DOMAIN for n in onnx.load(str(path)).graph.node):
                return block
    return 0


def _reorder_model(kind: str, x_shape: Sequence[int], channels: int) -> Any:
    """A one-node model of a ``kind`` reorder of an input of ``x_shape`` (for
    ``ReorderOutput``, the NCHWc tensor of ``channels`` logical channels)."""
    from onnx import helper

    op = "ReorderInput" if kind == "input" else "ReorderOutput"
    attrs = {"channels": channels} if kind == "output" else {}
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], domain=NCHWC_DOMAIN, **attrs)],
        "reorder",
        [helper.make_tensor_value_info("x", 1, list(x_shape))],
        [helper.make_tensor_value_info("y", 1, None)],
    )
    m = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(NCHWC_DOMAIN, 1)]
    )
    m.ir_version = 8
    return m


def _padded(channels: int, block: int) -> int:
    """``channels`` rounded up to a multiple of ``block`` (as is, for block 0)."""
    return -(-channels // block) * block if block > 0 else channels


def measure_reorder(
    kind: str,
    shape: Sequence[int],
    session: Callable[[Any], Any],
    bound_call: Callable[[Any, Mapping[str, np.ndarray]], Callable[[], Any]],
    timing: Mapping[str, Any],
    block: int = 0,
) -> Any:
    """Times one ``Reorder{Input,Output}`` of float32 NCHW ``shape`` alone on onnxruntime,
    with the backend's ``session`` and ``bound_call`` and :func:`~tensat_py.cost.profile.
    time_callable`'s ``timing`` options; returns its ``Measurement``. The input of a
    ``ReorderOutput`` is the NCHWc tensor, its channels padded to ``block`` (onnxruntime
    refuses any other; 0: taken as aligned); the values do not matter to the copy."""
    from tensat_py.cost.profile import time_callable

    x_shape = tuple(shape)
    if kind == "output":
        x_shape = (x_shape[0], _padded(x_shape[1], block), *x_shape[2:])
    x = np.random.default_rng(0).uniform(0.5, 1.5, x_shape).astype(np.float32)
    sess = session(_reorder_model(kind, x_shape, int(shape[1])))
    return time_callable(bound_call(sess, {"x": x}), **timing)


def adjust(
    costs: Sequence[float],
    ctxs: Sequence[ops.OpContext],
    block: int,
    price: Callable[[str, tuple[int, ...]], float],
) -> list[float]:
    """``costs`` (seconds) with the reorders of each of ``ctxs`` (:func:`reorders` at
    ``block``) added at ``price(kind, shape)`` seconds each; unpriced (0) entries stay 0."""
    out = list(costs)
    if block <= 0:
        return out
    for k, c in enumerate(ctxs):
        if out[k] > 0.0:
            out[k] += sum(price(kind, shape) for kind, shape in reorders(c, block))
    return out


class ReorderRates:
    """Reorder prices for a model that does not measure (``learned``): per kind, the median
    seconds per byte of the reorders the profile cache holds, at least ``floor`` seconds.

    Args:
        points: per kind (``"input"``, ``"output"``), ``(bytes, seconds)`` measurements.
        floor: the least a reorder costs (the per-node cost), seconds.

    Example:
        >>> r = ReorderRates({"input": [(1000, 2e-6), (4000, 6e-6)]}, floor=1e-6)
        >>> round(r.price("input", (1, 8, 10, 10)) * 1e6, 3)   # 3200 bytes at 1.75 ns/byte
        5.6
        >>> r.price("output", (1, 8, 10, 10))   # nothing cached for that kind
        0.0
    """

    def __init__(self, points: Mapping[str, Sequence[tuple[int, float]]], floor: float = 0.0):
        self.rate = {k: float(np.median([t / b for b, t in v])) for k, v in points.items() if v}
        self.floor = floor

    def price(self, kind: str, shape: Sequence[int]) -> float:
        """Seconds for one reorder of float32 ``shape``; 0 when no rate is known."""
        rate = self.rate.get(kind)
        if rate is None:
            return 0.0
        return max(4 * int(np.prod(shape)) * rate, self.floor)

    @classmethod
    def from_records(cls, records: Sequence[Any], call: float, floor: float) -> ReorderRates:
        """From profile cache ``records`` (``tensat_py.cost.database.Record``): the
        reorder measurements among them, less the session call overhead ``call``."""
        from tensat_py.cost.profile import figure

        points: dict[str, list[tuple[int, float]]] = {}
        kinds = {reorder_op(k): k for k in ("input", "output")}
        for r in records:
            if r.op not in kinds:
                continue
            nbytes = 4 * int(np.prod(json.loads(r.signature)["shape"]))
            points.setdefault(kinds[r.op], []).append((nbytes, figure(r.low, call, floor)))
        return cls(points, floor)
