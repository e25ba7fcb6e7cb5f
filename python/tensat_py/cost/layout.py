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

* per operator, for an e-graph's prices (:func:`reorders`, :func:`nchwc_kernel`,
  :func:`adjust`): a ``split`` along the channels of a convolution's output is priced with
  a ``ReorderOutput`` of its input and a ``ReorderInput`` of each block-aligned part (its
  readers assumed NCHWc convolutions); a squeeze-excite gate ``mul(x[N,C,H,W],
  g[N,C,1,1])``, a broadcast no NCHWc kernel runs, with a ``ReorderOutput`` of each
  operand an NCHWc operator may produce and a ``ReorderInput`` of the product (its reader
  assumed an NCHWc convolution); a nearest ``resize`` by whole factors of such a tensor is
  priced as onnxruntime's NCHWc ``Upsample`` (measured in NCHWc) in place of its
  one-operator figure (a plain ``Resize``, several times dearer). The ``layout`` rules
  (``_core.RuleSet.layout()``) offer ``mul(x, resize(g, shape(x), nearest))`` for each
  such gate;
* per program (:func:`tensat_py.cost.nchwc.nchwc_plan`, priced by
  :class:`tensat_py.cost.ort_program.OrtProgram`): NchwcTransformer followed over the
  whole program: the reorders of onnxruntime's optimised graph (for the NasNet-A
  candidate above, all 94), and the reorders the one-operator figures of its NCHWc
  convolutions and pools already hold (measured alone, a convolution reorders its input
  in and its output out).

:func:`nchwc_block` probes the block once per device (0 where no convolution becomes an
NCHWc one). Each reorder is measured alone on onnxruntime (a one-node model in the
``com.microsoft.nchwc`` domain) and cached with the operators' figures; ``learned``
prices them on a power law of their bytes fitted to the cached ones, or at their cached
figures (:class:`ReorderCurves`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.cost.base import SHARED
from tensat_py.graph import TensorType

__all__ = [
    "BLOCK_SIGNATURE",
    "NCHWC_DOMAIN",
    "Reorder",
    "ReorderCurves",
    "adjust",
    "measure_reorder",
    "nchwc_block",
    "nchwc_kernel",
    "reorder_op",
    "reorder_signature",
    "reorders",
    "upsample_key",
]

#: onnxruntime's operator domain for the NCHWc kernels.
NCHWC_DOMAIN = "com.microsoft.nchwc"
#: Cache signature of the probed block size (``low`` holds it; 0: no NCHWc). It names the
#: probe, so that a block stored by the earlier probe (which took 8 on AVX-512) is measured
#: again.
BLOCK_SIGNATURE = '{"calibration":"nchwc block","probe":"padded weights"}'
#: Block sizes onnxruntime's MLAS uses, smallest first (AVX2, AVX-512); the probe
#: convolution has ``BLOCKS[0]`` channels.
BLOCKS = (8, 16)

#: One NCHWc copy: ``("input" | "output", NCHW shape)`` for a ``ReorderInput`` /
#: ``ReorderOutput``; ``("upsample", (N, C, H, W, sh, sw))`` for an NCHWc ``Upsample`` of
#: an NCHW-shaped ``[N, C, H, W]`` input by whole factors ``sh``, ``sw`` (the product of
#: the tuple is the output's element count, as a reorder's is its tensor's).
Reorder = tuple[str, tuple[int, ...]]

#: Producer labels (:func:`tensat_py.cost.base.producer_label`) of operators that may
#: leave their output in NCHWc: convolutions (with an activation fused or not), sums onto
#: one, the activations onnxruntime runs on an NCHWc tensor as it is, and sums and
#: products of two same-shape tensors (``tensat_py.cost.nchwc``; SiLU is ``ewmul``).
_MAY_BE_NCHWC = frozenset(
    {
        "conv2d",
        "conv2d+act",
        "relu",
        "sigmoid",
        "tanh",
        "hard_sigmoid",
        "hard_swish",
        "gelu",
        "ewadd",
        "ewmul",
    }
)


def reorder_op(kind: str) -> str:
    """The cache record's operator name of a ``kind`` copy (``"input"``/``"output"``
    reorder, ``"upsample"``), a calibration name (``__reorder_input__``)."""
    return f"__reorder_{kind}__"


def reorder_signature(kind: str, shape: Sequence[int]) -> str:
    """The cache signature of one NCHWc copy (:data:`Reorder`): a
    ``Reorder{Input,Output}`` of an NCHW float32 ``shape``, or an ``Upsample``."""
    return json.dumps(
        {"calibration": "nchwc reorder", "kind": kind, "shape": [int(d) for d in shape]},
        separators=(",", ":"),
    )


def upsample_key(x: Sequence[int], sizes: Sequence[int]) -> tuple[int, ...] | None:
    """The :data:`Reorder` shape of onnxruntime's NCHWc ``Upsample`` for a nearest
    ``resize`` of 4-D ``x`` to ``sizes``: ``(N, C, H, W, sh, sw)``; None unless batch and
    channels are kept and each spatial axis grows by a whole factor (onnxruntime's
    ``TransformResize`` condition).

    Example:
        >>> upsample_key((1, 16, 1, 1), (1, 16, 7, 7))
        (1, 16, 1, 1, 7, 7)
        >>> upsample_key((1, 16, 2, 2), (1, 16, 3, 3)) is None
        True
    """
    x, sizes = tuple(int(d) for d in x), tuple(int(d) for d in sizes)
    if len(x) != 4 or len(sizes) != 4 or sizes[:2] != x[:2]:
        return None
    if any(d <= 0 or s % d for d, s in zip(x[2:], sizes[2:], strict=True)):
        return None
    return (*x, sizes[2] // x[2], sizes[3] // x[3])


def _may_be_nchwc(labels: Iterable[str]) -> bool:
    return any(lab.rsplit("<", 1)[-1] in _MAY_BE_NCHWC for lab in labels)


def _float4d(t: Any) -> bool:
    return isinstance(t, TensorType) and t.dtype == "float32" and len(t.shape) == 4


def nchwc_kernel(ctx: ops.OpContext, block: int) -> Reorder | None:
    """The NCHWc kernel onnxruntime runs ``ctx`` with, when it is priced in place of the
    operator's one-operator figure at NCHWc block ``block`` (0: none): ``("upsample",
    key)`` (:func:`upsample_key`) for a nearest float32 ``resize`` by whole factors whose
    operand an NCHWc operator may produce (measured alone, a one-node ``Resize`` runs
    onnxruntime's plain kernel, which is several times slower); None otherwise.

    Example:
        >>> from tensat_py.cost.base import CostContext
        >>> g = TensorType((1, 16, 1, 1), "float32")
        >>> up = CostContext("resize", {"sizes": (1, 16, 7, 7), "mode": "nearest"}, [g],
        ...                  TensorType((1, 16, 7, 7), "float32"),
        ...                  producers=(frozenset({"hard_sigmoid"}),))
        >>> nchwc_kernel(up, 8)
        ('upsample', (1, 16, 1, 1, 7, 7))
        >>> nchwc_kernel(up, 0) is None
        True
    """
    if block <= 0 or ctx.op != "resize" or ctx.constant or not ctx.inputs:
        return None
    x, prods = ctx.inputs[0], getattr(ctx, "producers", ())
    if not (_float4d(x) and prods and _may_be_nchwc(prods[0])):
        return None
    if str(ctx.params.get("mode")) != "nearest":
        return None
    key = upsample_key(x.shape, ctx.params.get("sizes", ()))
    return None if key is None else ("upsample", key)


def _per_channel(ctx: ops.OpContext) -> tuple[int, int] | None:
    """For an ``add`` or ``mul`` of a 4-D float32 ``x[N, C, H, W]`` (H * W > 1) and a
    per-channel operand (``[N, C, 1, 1]``, ``[1, C, 1, 1]`` or ``[C, 1, 1]``), in either
    order: the operand positions ``(x, per-channel)``; else None. onnxruntime has no NCHWc
    kernel for such a broadcast."""
    if ctx.op not in ("add", "mul") or len(ctx.inputs) != 2:
        return None
    for ix, ic in ((0, 1), (1, 0)):
        x, c = ctx.inputs[ix], ctx.inputs[ic]
        if not (_float4d(x) and isinstance(c, TensorType)) or x.shape[2] * x.shape[3] <= 1:
            continue
        n, ch = x.shape[0], x.shape[1]
        if tuple(c.shape) in ((n, ch, 1, 1), (1, ch, 1, 1), (ch, 1, 1)):
            return ix, ic
    return None


def reorders(ctx: ops.OpContext, block: int) -> list[Reorder]:
    """The reorders onnxruntime adds around ``ctx`` with NCHWc block ``block`` (0: none).

    Three kinds of operator have any (the producers of an operand are those of its class,
    :attr:`tensat_py.cost.base.CostContext.producers`):

    * a ``split`` along axis 1 of a 4-D float32 tensor that a ``conv2d`` (or a sum onto
      one) may produce, with a channel count divisible by ``block``: ``("output", input
      shape)`` and ``("input", part shape)`` for each part whose channels ``block``
      divides; a ``slice`` of channels likewise (:func:`_slice_reorders`: the input's
      reorder carried by the part that starts at channel 0);
    * a per-channel broadcast, ``add`` or ``mul`` of a 4-D float32 ``x[N, C, H, W]``
      (H * W > 1) and a per-channel operand (``[N, C, 1, 1]``, ``[1, C, 1, 1]`` or
      ``[C, 1, 1]``: a squeeze-excite gate, or a bias onnxruntime cannot fold): ``("output",
      shape)`` of each operand an NCHWc operator may produce (a convolution, or an
      activation onnxruntime runs in NCHWc), then ``("input", x's shape)`` for the result
      when ``x`` is such an operand (read, as in MobileNetV3 and EfficientNet, by a 1x1
      convolution). A constant operand onto a convolution without activation is folded
      into it (ConvAddFusion, ConvMulFusion) and has none.

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
        >>> gate = CostContext("mul", {}, [part, TensorType((1, 32, 1, 1), "float32")], part,
        ...                    producers=(frozenset({"hard_swish"}), frozenset({"sigmoid"})))
        >>> reorders(gate, 8)
        [('output', (1, 32, 28, 28)), ('output', (1, 32, 1, 1)), ('input', (1, 32, 28, 28))]
    """
    if block <= 0 or ctx.constant:
        return []
    if ctx.op in ("add", "mul"):
        return _broadcast_reorders(ctx)
    if ctx.op == "slice":
        return _slice_reorders(ctx, block)
    if ctx.op != "split":
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


def _slice_reorders(ctx: ops.OpContext, block: int) -> list[Reorder]:
    """:func:`reorders` of a ``slice``: for one of the channels (axis 1, step 1) of a 4-D
    float32 tensor an NCHWc operator may produce, whose channel count ``block`` divides,
    the ``("output", x's shape)`` of the tensor (carried by the slice that starts at
    channel 0, one per split) and ``("input", part's shape)`` when ``block`` divides the
    part's channels (its reader assumed an NCHWc convolution), as a ``split`` has."""
    prods = getattr(ctx, "producers", ())
    x, part = (ctx.inputs[0] if ctx.inputs else None), ctx.output
    if not (prods and _may_be_nchwc(prods[0]) and _float4d(x) and _float4d(part)):
        return []
    p = ctx.params
    if tuple(p.get("axes", ())) not in ((1,), (-3,)) or tuple(p.get("steps", ())) != (1,):
        return []
    if x.shape[1] % block:
        return []
    out: list[Reorder] = []
    if int(p["starts"][0]) in (0, -x.shape[1]):
        out.append(("output", tuple(x.shape)))
    if part.shape[1] % block == 0:
        out.append(("input", tuple(part.shape)))
    return out


def _broadcast_reorders(ctx: ops.OpContext) -> list[Reorder]:
    """:func:`reorders` of an ``add`` or ``mul``: those of a per-channel broadcast onnxruntime
    does not fold into a convolution, else none."""
    pos, prods = _per_channel(ctx), getattr(ctx, "producers", ())
    if pos is None or len(prods) != 2:
        return []
    consts = tuple(getattr(ctx, "operand_constant", ())) or (False, False)
    x_prods = prods[pos[0]]
    if consts[pos[1]] and "conv2d" in x_prods and SHARED not in x_prods:
        return []  # folded into the convolution's bias or weights

    def nchwc(i: int) -> bool:  # an initializer, or a tensor not 4-D, is never NCHWc
        return not consts[i] and len(ctx.inputs[i].shape) == 4 and _may_be_nchwc(prods[i])

    out: list[Reorder] = [("output", tuple(ctx.inputs[i].shape)) for i in pos if nchwc(i)]
    if nchwc(pos[0]):
        out.append(("input", tuple(ctx.inputs[pos[0]].shape)))
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
    """The NCHWc block size onnxruntime uses on this CPU (MLAS's: 8 with AVX2, 16 with
    AVX-512), or 0 where it runs no NCHWc.

    Measured, not read from the CPU's flags: onnxruntime optimises (``ORT_ENABLE_ALL``) a
    1x1 convolution of :data:`BLOCKS` [0] channels, and the block is the output-channel count
    its ``com.microsoft.nchwc`` convolution's reordered weights are padded to (a
    convolution of 8 channels also runs NCHWc with 16-channel blocks, padded).

    Example:
        >>> nchwc_block() in (0, 8, 16)
        True
    """
    import tempfile
    from pathlib import Path

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "optimised.onnx"
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(path)
        so.intra_op_num_threads = threads
        so.log_severity_level = 3  # the "hardware specific" warning of saving it
        ort.InferenceSession(
            _conv_model(BLOCKS[0]).SerializeToString(), so, providers=["CPUExecutionProvider"]
        )
        graph = onnx.load(str(path)).graph
    weights = {i.name: list(i.dims) for i in graph.initializer}
    for node in graph.node:
        if node.domain == NCHWC_DOMAIN and node.op_type == "Conv":
            dims = weights.get(node.input[1])
            return int(dims[0]) if dims else BLOCKS[0]
    return 0


def _reorder_model(kind: str, x_shape: Sequence[int], shape: Sequence[int]) -> Any:
    """A one-node model of the NCHWc copy ``(kind, shape)`` (:data:`Reorder`) of an input
    of ``x_shape``: a ``ReorderInput``, a ``ReorderOutput`` (of an NCHWc tensor of
    ``shape[1]`` logical channels) or an ``Upsample`` (nearest, asymmetric, as
    onnxruntime's ``TransformResize`` writes it)."""
    from onnx import helper

    if kind == "upsample":
        scales = [1, 1, int(shape[4]), int(shape[5])]
        node = helper.make_node(
            "Upsample",
            ["x"],
            ["y"],
            domain=NCHWC_DOMAIN,
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            scales=scales,
        )
    elif kind == "output":
        node = helper.make_node(
            "ReorderOutput", ["x"], ["y"], domain=NCHWC_DOMAIN, channels=int(shape[1])
        )
    else:
        node = helper.make_node("ReorderInput", ["x"], ["y"], domain=NCHWC_DOMAIN)
    graph = helper.make_graph(
        [node],
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
    """Times one NCHWc copy ``(kind, shape)`` (:data:`Reorder`: a ``Reorder{Input,Output}``
    of float32 NCHW ``shape``, or an ``Upsample``) alone on onnxruntime, with the
    backend's ``session`` and ``bound_call`` and :func:`~tensat_py.cost.profile.
    time_callable`'s ``timing`` options; returns its ``Measurement``. The input of a
    ``ReorderOutput`` or ``Upsample`` is an NCHWc tensor, its channels padded to
    ``block`` (onnxruntime refuses any other; 0: taken as aligned); the values do not
    matter to the copy.

    Raises:
        ValueError: ``kind`` is none of ``"input"``, ``"output"``, ``"upsample"``.
    """
    from tensat_py.cost.profile import time_callable

    if kind not in ("input", "output", "upsample"):
        raise ValueError(f"NCHWc copy kind {kind!r} is not input, output or upsample")
    if len(shape) != (6 if kind == "upsample" else 4):
        raise ValueError(f"NCHWc {kind} of shape {tuple(shape)}: an NCHWc tensor is 4-D")
    x_shape = tuple(int(d) for d in shape[:4])
    if kind != "input":
        x_shape = (x_shape[0], _padded(x_shape[1], block), *x_shape[2:])
    x = np.random.default_rng(0).uniform(0.5, 1.5, x_shape).astype(np.float32)
    sess = session(_reorder_model(kind, x_shape, shape))
    return time_callable(bound_call(sess, {"x": x}), **timing)


def adjust(
    costs: Sequence[float],
    ctxs: Sequence[ops.OpContext],
    block: int,
    price: Callable[[str, tuple[int, ...]], float],
) -> list[float]:
    """``costs`` (seconds) with the reorders of each of ``ctxs`` (:func:`reorders` at
    ``block``) added at ``price(kind, shape)`` seconds each, and the figure of each with an
    :func:`nchwc_kernel` replaced by that kernel's price (kept when it is 0: unknown);
    unpriced (0) entries stay 0."""
    out = list(costs)
    if block <= 0:
        return out
    for k, c in enumerate(ctxs):
        if out[k] <= 0.0:
            continue
        kernel = nchwc_kernel(c, block)
        if kernel is not None:
            out[k] = price(*kernel) or out[k]
        out[k] += sum(price(kind, shape) for kind, shape in reorders(c, block))
    return out


class ReorderCurves:
    """Reorder prices for a model that does not measure (``learned``): per kind, a power
    law ``seconds = c * bytes ** e`` (bytes of the copy's output) fitted by least squares
    on the logarithms of the copies the profile cache holds (those above ``floor``), at
    least ``floor`` seconds. With one size of a kind cached, ``e`` is 1 (the median seconds
    per byte); ``e`` is clipped to [0, 1.5]. An ``"upsample"`` with none cached is priced
    on the ``"input"`` reorders' curve (both write the NCHWc tensor once).

    Why a power law: a large reorder runs on several threads and a small one pays fixed
    costs, so the seconds per byte fall with size. On this machine's cache (2026-11-26,
    211 ``output`` and 180 ``input`` reorders) the fitted exponents were 0.44 and 0.35; the
    median error of a copy above 30 kB was a factor 1.23-1.30, against 1.48-1.58 at one
    rate per byte, which priced the 112 small reorders that PP-LCNet's one-operator
    convolution figures hold at 492 us, against their 1,238 us measured.

    Args:
        points: per kind (``"input"``, ``"output"``, ``"upsample"``), ``(bytes, seconds)``
            measurements.
        floor: the least a reorder costs (the per-node cost), seconds.
        exact: seconds of copies measured exactly, by :func:`reorder_signature`: they
            price those copies instead of the curve (``learned`` with the cache's own
            figures).

    Example:
        >>> r = ReorderCurves({"input": [(1000, 2e-6), (4000, 6e-6)]}, floor=1e-6)
        >>> round(r.price("input", (1, 8, 10, 10)) * 1e6, 2)   # 2 us x 3.2 ** 0.79
        5.03
        >>> r.price("output", (1, 8, 10, 10))   # nothing cached for that kind
        0.0
    """

    def __init__(
        self,
        points: Mapping[str, Sequence[tuple[int, float]]],
        floor: float = 0.0,
        exact: Mapping[str, float] | None = None,
    ):
        #: Per kind, ``(c, e)`` of ``seconds = c * bytes ** e``.
        self.curves = {k: _power_law(v, floor) for k, v in points.items() if v}
        self.floor = floor
        self.exact = dict(exact or {})

    def price(self, kind: str, shape: Sequence[int]) -> float:
        """Seconds for one copy ``(kind, shape)`` of float32 (:data:`Reorder`): its exact
        figure when held, else the curve's; 0 when no curve is known."""
        got = self.exact.get(reorder_signature(kind, shape)) if self.exact else None
        if got is not None:
            return got
        curve = self.curves.get(kind)
        if curve is None and kind == "upsample":
            curve = self.curves.get("input")
        if curve is None:
            return 0.0
        c, e = curve
        return max(c * float(4 * int(np.prod(shape))) ** e, self.floor)

    @classmethod
    def from_records(
        cls, records: Sequence[Any], call: float, floor: float, exact: bool = False
    ) -> ReorderCurves:
        """From profile cache ``records`` (``tensat_py.cost.database.Record``): the
        reorder measurements among them, less the session call overhead ``call``; with
        ``exact``, each also prices its own copy (:attr:`exact`)."""
        from tensat_py.cost.profile import figure

        points: dict[str, list[tuple[int, float]]] = {}
        held: dict[str, float] = {}
        kinds = {reorder_op(k): k for k in ("input", "output", "upsample")}
        for r in records:
            if r.op not in kinds:
                continue
            nbytes = 4 * int(np.prod(json.loads(r.signature)["shape"]))
            seconds = figure(r.low, call, floor)
            points.setdefault(kinds[r.op], []).append((nbytes, seconds))
            held[r.signature] = seconds
        return cls(points, floor, held if exact else None)


def _power_law(points: Sequence[tuple[int, float]], floor: float) -> tuple[float, float]:
    """``(c, e)`` of ``seconds = c * bytes ** e`` fitted on ``points`` (least squares on
    the logarithms of those above ``floor``; ``e`` clipped to [0, 1.5]); with fewer than
    two sizes, ``e`` = 1 and ``c`` the median seconds per byte."""
    rate = float(np.median([t / b for b, t in points]))
    fit = [(b, t) for b, t in points if t > floor and b > 0]
    if len({b for b, _ in fit}) < 2:
        return rate, 1.0
    x = np.log([b for b, _ in fit])
    y = np.log([t for _, t in fit])
    e, _ = np.polyfit(x, y, 1)
    e = float(min(max(e, 0.0), 1.5))
    return float(np.exp(np.mean(y - e * x))), e
