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
* per program (:func:`nchwc_plan`, priced by :class:`tensat_py.cost.ort_program.
  OrtProgram`): NchwcTransformer followed over the whole program, giving exactly the
  reorders of onnxruntime's optimised graph (checked on small programs in the tests, and
  equal on the zoo's eight models, twelve real models of ``bench/onnx_real.py`` and the
  NasNet-A candidate above), and the reorders the one-operator figures of its NCHWc
  convolutions and pools already hold (measured alone, a convolution reorders its input
  in and its output out).

:func:`nchwc_block` probes the block once per device (0 where no convolution becomes an
NCHWc one). Each reorder is measured alone on onnxruntime (a one-node model in the
``com.microsoft.nchwc`` domain) and cached with the operators' figures; ``learned``
prices them at the cached seconds per byte (:class:`ReorderRates`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensat_py import ops
from tensat_py.cost.base import Fusion, channel_bias
from tensat_py.graph import Graph, Node, TensorType

__all__ = [
    "BLOCK_SIGNATURE",
    "NCHWC_DOMAIN",
    "NchwcPlan",
    "Reorder",
    "ReorderRates",
    "adjust",
    "measure_reorder",
    "nchwc_block",
    "nchwc_plan",
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


# ============================================================================ program plan
#: Activations onnxruntime's ConvActivationFusion folds into the convolution before it
#: (CPU; the convolution's output read by the activation alone), which the NCHWc
#: convolution then runs with its ``activation`` attribute.
_CONV_ACTS = frozenset(
    {"relu", "sigmoid", "tanh", "leaky_relu", "clip", "hard_sigmoid", "hard_swish"}
)
#: Activations onnxruntime runs on an NCHWc tensor as it is: ``TransformActivation``'s
#: Relu, Sigmoid and Tanh, and, in onnxruntime 1.32 (each checked between two NCHWc
#: convolutions in tests/test_cost_layout.py), HardSigmoid, HardSwish and Gelu (also the
#: erf chain it fuses into one). LeakyRelu, Clip (when not folded into the convolution),
#: Erf, Exp, Sqrt, Neg, Abs, Softplus and a binary operator with a constant are not.
_NCHWC_ACTS = frozenset({"relu", "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "gelu"})
_ADDS = frozenset({"add", "ewadd"})
_MULS = frozenset({"mul", "ewmul"})
_CONCATS = frozenset({"concat", "concat3", "concat4", "concat5"})
_POOLS = frozenset({"poolmax", "poolavg"})
_ONNX_POOLS = frozenset({"MaxPool", "AveragePool"})
#: Operators the ONNX exporter writes no node for (inference: the operand itself).
_ERASED = frozenset({"dropout", "noop"})


@dataclasses.dataclass(frozen=True)
class NchwcPlan:
    """Where onnxruntime's NchwcTransformer puts a program's tensors and reorders.

    Attributes:
        block: the NCHWc block size the plan is for (channels per block).
        nchwc: ids of the nodes whose output onnxruntime keeps in NCHWc (a node it folds
            into a convolution shares that convolution's output and is not listed).
        reorders: the reorders onnxruntime adds to the program: a ``ReorderInput`` of each
            NCHW tensor an NCHWc convolution or pool reads (one per tensor, shared by its
            readers), a ``ReorderOutput`` of each NCHWc tensor that a plain operator reads
            or that is a program output; each ``("input" | "output", NCHW shape)``.
        of: for each of ``reorders``, the id of the node whose output it copies.
        measured: the reorders a one-operator figure of each NCHWc convolution and pool
            already holds: measured alone, its input is reordered in (unless a
            convolution of fewer input channels than the block, which reads NCHW) and its
            output out again.
    """

    block: int
    nchwc: frozenset[int]
    reorders: tuple[Reorder, ...]
    of: tuple[int, ...]
    measured: tuple[Reorder, ...]


def _shape(node: Node) -> tuple[int, ...]:
    return tuple(getattr(node.type, "shape", ()) or ())


def _float4d(node: Node) -> bool:
    t = node.type
    return isinstance(t, TensorType) and t.dtype == "float32" and len(t.shape) == 4


def _conv_reads_nchw(graph: Graph, conv: Node, block: int) -> bool | None:
    """For a ``conv2d`` onnxruntime runs in NCHWc (``TransformConv``): whether it reads its
    input in plain NCHW (fewer input channels than the block, group 1); None when it does
    not run in NCHWc at all (checked on onnxruntime 1.32: group 1 with at least the block's
    input channels needs them a multiple of 4, its ``ReorderInput``'s condition)."""
    x, w = graph.nodes[conv.inputs[0]], graph.nodes[conv.inputs[1]]
    ws = _shape(w)
    if not (_float4d(x) and w.constant and len(ws) == 4 and ws[1] > 0):
        return None
    cout, cin_g = ws[0], ws[1]
    groups = _shape(x)[1] // cin_g
    if groups > 1:
        if cout % block:
            return None
        depthwise = cin_g == 1 and cout == groups
        if not depthwise and (cin_g % block or cout % groups or (cout // groups) % block):
            return None
        return False
    if cin_g < block:
        return True
    return None if cin_g % 4 else False  # onnxruntime reorders only 4-aligned channels in


def _upsample(resize: Node, shape: tuple[int, ...]) -> bool:
    """Whether a ``resize`` of a 4-D ``shape`` is one onnxruntime runs as its NCHWc
    ``Upsample`` (``TransformResize``): nearest, batch and channels kept, each spatial
    axis scaled by a whole factor."""
    sizes = tuple(int(d) for d in resize.params.get("sizes", ()))
    return (
        str(resize.params.get("mode")) == "nearest"
        and len(sizes) == 4 == len(shape)
        and sizes[:2] == shape[:2]
        and all(s > 0 and o % s == 0 for s, o in zip(shape[2:], sizes[2:], strict=True))
    )


def _pad_folds(pad: Node, reader: Node) -> bool:
    """Whether onnxruntime's PadFusion folds ``pad`` (its one reader ``reader``) into a
    convolution: a zero constant pad of the spatial axes of a ``conv2d``'s input."""
    pads = tuple(pad.params.get("pads", ()))
    return (
        reader.op == "conv2d"
        and pad.params.get("mode") == "constant"
        and float(pad.params.get("value", 0.0)) == 0.0
        and len(pads) == 8
        and not any(pads[k] for k in (0, 1, 4, 5))
    )


def _folds(node: Node, consts: list[tuple[int, ...]], out: tuple[int, ...], act: bool) -> bool:
    """Whether onnxruntime folds ``node`` (of constant operands of shapes ``consts``),
    the one reader of a convolution of output shape ``out`` that carries an activation
    already or not (``act``), into that convolution: ConvAddFusion, ConvMulFusion and
    ConvBNFusion before an activation, ConvActivationFusion once."""
    if act:
        return False
    if node.op in _CONV_ACTS:
        return True
    per_channel = all(channel_bias(c, out) for c in consts)
    return bool(consts) and (
        ((node.op in _ADDS or node.op in _MULS) and per_channel) or node.op == "batchnorm"
    )


def _stays_nchwc(node: Node, shapes: list[tuple[int, ...]], consts: bool, block: int) -> bool:
    """Whether onnxruntime runs ``node``, whose tensor operands (of ``shapes``) are all
    NCHWc and which has constant operands or not (``consts``), on NCHWc tensors."""
    chans = [s[1] for s in shapes]
    if node.op == "global_avg_pool":
        return chans[0] % block == 0
    if node.op in _NCHWC_ACTS or node.op == "batchnorm":
        return len(shapes) == 1
    if node.op == "resize":
        return _upsample(node, shapes[0])
    if node.op in _ADDS:
        return len(shapes) == 2 and not consts and chans[0] == chans[1]
    if node.op in _MULS:
        return len(shapes) == 2 and not consts and shapes[0] == shapes[1]
    if node.op in _CONCATS:
        return int(node.params.get("axis", -1)) == 1 and all(c % block == 0 for c in chans)
    return False


def nchwc_plan(graph: Graph, block: int, fusions: Mapping[int, Fusion] | None = None) -> NchwcPlan:
    """The NCHWc layout onnxruntime (CPU, ``ORT_ENABLE_ALL``) gives ``graph`` at NCHWc
    block ``block``, following its NchwcTransformer (onnxruntime/core/optimizer/
    nchwc_transformer.cc) over the nodes in order:

    * a ``conv2d`` (float32, constant 4-D weight) runs in NCHWc: with group 1 when its
      input channels are fewer than the block (it reads NCHW) or a multiple of 4
      (channels padded to the block), grouped when its output channels, and input and
      output channels per group, are multiples of the block, depthwise when its output
      channels are;
    * ``poolmax`` / ``poolavg`` (and opaque ``MaxPool`` / ``AveragePool``) when the block
      divides their channels, reordering an NCHW input in;
    * ``global_avg_pool``, the activations of :data:`_NCHWC_ACTS`, ``batchnorm`` (constant
      parameters), a nearest ``resize`` by whole factors, a channel ``concat`` of
      block-aligned parts, an ``add`` of two tensors of equal channels and a ``mul`` of two
      of equal shape, only when every tensor operand is already NCHWc;
    * everything else reads NCHW (``dropout`` and ``noop``, which the exporter erases,
      are their operand).

    What onnxruntime folds into a convolution before this pass is followed first: a
    constant per-channel ``add`` / ``mul`` and a ``batchnorm`` (ConvAddFusion,
    ConvMulFusion, ConvBNFusion, before any activation), then one activation of
    :data:`_CONV_ACTS` (ConvActivationFusion), each only while the convolution's output
    has that one reader; and a zero ``pad`` read only by a convolution (PadFusion).
    Constant nodes are initializers and take no part; nor do the nodes of a chain in
    ``fusions`` (:func:`tensat_py.cost.ort_fusion.ort_fusions`) but the one it is keyed by,
    which reads the chain's operands as its fused operator. ``block`` 0 gives an empty
    plan.

    Example (two 1x1 convolutions with an ``exp`` between them, which has no NCHWc
    kernel):
        >>> from tensat_py.builder import GraphBuilder
        >>> b = GraphBuilder()
        >>> h = b.conv2d(b.input((1, 16, 8, 8), "x"), (16, 16, 1, 1))
        >>> g = b.finish(b.conv2d(b.op("exp", h), (16, 16, 1, 1)))
        >>> plan = nchwc_plan(g, 8)
        >>> [(kind, g.nodes[n].op) for (kind, _), n in zip(plan.reorders, plan.of)]
        [('input', 'input'), ('input', 'exp'), ('output', 'conv2d'), ('output', 'conv2d')]
        >>> len(plan.measured)   # each convolution's figure holds one reorder in, one out
        4
    """
    if block <= 0:
        return NchwcPlan(block, frozenset(), (), (), ())
    nodes = list(graph.nodes)
    fusions = fusions or {}
    absorbed = {a for f in fusions.values() for a in f.absorbed}
    for nid, f in fusions.items():
        fused = {"op": f.op, "params": dict(f.params), "inputs": f.operands}
        nodes[nid] = dataclasses.replace(nodes[nid], **fused)
    live = graph.live()
    readers = [0] * len(nodes)
    reader: dict[int, Node] = {}  # the last reader of each node
    for nid, node in enumerate(nodes):
        if live[nid] and not node.constant and nid not in absorbed:
            for i in set(node.inputs):
                readers[i] += 1
                reader[i] = node
    outputs = set(graph.outputs)
    root = list(range(len(nodes)))  # a folded node's value is its convolution's
    act = {}  # convolution id -> whether an activation is folded in already
    nchwc: set[int] = set()
    nchw_use: set[int] = set()  # NCHWc tensors some plain operator reads
    reorder_in: dict[int, tuple[int, ...]] = {}
    measured: list[Reorder] = []

    def sole(i: int) -> bool:
        return readers[i] == 1 and i not in outputs

    for nid, node in enumerate(nodes):
        if not live[nid] or node.constant or nid in absorbed:
            continue
        ins = [i for i in node.inputs if not nodes[i].constant]
        consts = [i for i in node.inputs if nodes[i].constant]
        # Folds onnxruntime makes before its NCHWc pass.
        if len(ins) == 1 and root[ins[0]] in act and sole(ins[0]):
            conv = root[ins[0]]
            if _folds(node, [_shape(nodes[c]) for c in consts], _shape(nodes[conv]), act[conv]):
                root[nid] = conv
                act[conv] = act[conv] or node.op in _CONV_ACTS
                continue
        if node.op == "pad" and len(ins) == 1 and sole(nid) and _pad_folds(node, reader[nid]):
            root[nid] = root[ins[0]]
            continue
        if node.op in _ERASED and len(ins) == 1:
            root[nid] = root[ins[0]]
            continue
        srcs = [root[i] for i in ins]
        mode = "nchw"  # how this node reads its tensor operands
        if node.op == "conv2d":
            act[nid] = bool(node.params.get("act"))
            reads = _conv_reads_nchw(graph, node, block)
            if reads is not None:
                mode = "nchw" if reads else "in"
                measured += ([] if reads else [("input", _shape(nodes[srcs[0]]))]) + [
                    ("output", _shape(node))
                ]
                nchwc.add(nid)
        elif node.op in _POOLS or (
            node.op == "opaque"
            and getattr(graph.opaque_payload(nid), "op_type", "") in _ONNX_POOLS
            and len(ins) == 1
        ):
            if _float4d(nodes[ins[0]]) and _shape(nodes[ins[0]])[1] % block == 0:
                mode = "in"
                measured += [("input", _shape(nodes[srcs[0]])), ("output", _shape(node))]
                nchwc.add(nid)
        elif srcs and all(s in nchwc for s in srcs):
            if _stays_nchwc(node, [_shape(nodes[s]) for s in srcs], bool(consts), block):
                mode = "nchwc"
                nchwc.add(nid)
        for s in srcs:
            if s in nchwc and mode != "nchwc" and not (mode == "in" and s == srcs[0]):
                nchw_use.add(s)
            elif s not in nchwc and mode == "in" and s == srcs[0]:
                reorder_in.setdefault(s, _shape(nodes[s]))
    for o in outputs:
        if root[o] in nchwc:
            nchw_use.add(root[o])
    of = [*reorder_in, *sorted(nchw_use)]
    reorders = [("input", shape) for shape in reorder_in.values()]
    reorders += [("output", _shape(nodes[s])) for s in sorted(nchw_use)]
    return NchwcPlan(block, frozenset(nchwc), tuple(reorders), tuple(of), tuple(measured))
