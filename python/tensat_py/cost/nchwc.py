"""onnxruntime's NchwcTransformer followed over a whole program: which tensors stay in the
blocked NCHWc layout, where onnxruntime puts its reorders, and which reorders the
one-operator figures of the NCHWc convolutions and pools already hold.

:func:`nchwc_plan` gives exactly the reorders of onnxruntime's optimised graph (checked on
small programs in tests/test_cost_nchwc_plan.py, and equal on the zoo's eight models,
twelve real models of ``bench/onnx_real.py`` and a NasNet-A candidate with 94 reorders);
:class:`tensat_py.cost.ort_program.OrtProgram` prices it, each reorder measured as
:mod:`tensat_py.cost.layout` measures them. Source: onnxruntime/core/optimizer/
nchwc_transformer.cc, and onnxruntime 1.32's behaviour where it differs (each difference
pinned by a test).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tensat_py.cost.base import Fusion, channel_bias
from tensat_py.cost.layout import Reorder, upsample_key
from tensat_py.graph import Graph, Node, TensorType
from tensat_py.ops import kernel_of

__all__ = ["NchwcPlan", "nchwc_plan"]

#: Activations onnxruntime's ConvActivationFusion folds into the convolution before it
#: (CPU; the convolution's output read by the activation alone), which the NCHWc
#: convolution then runs with its ``activation`` attribute.
_CONV_ACTS = frozenset(
    {"relu", "sigmoid", "tanh", "leaky_relu", "clip", "hard_sigmoid", "hard_swish"}
)
#: Activations onnxruntime runs on an NCHWc tensor as it is: ``TransformActivation``'s
#: Relu, Sigmoid and Tanh, and, in onnxruntime 1.32, HardSigmoid, HardSwish and Gelu (also
#: the erf chain it fuses into one). LeakyRelu, Clip (when not folded into the
#: convolution), Erf, Exp, Sqrt, Neg, Abs, Softplus and a binary operator with a constant
#: are not. Each was checked between two NCHWc convolutions; tests/test_cost_nchwc_plan.py
#: pins the first six and LeakyRelu, Clip, Exp and Erf.
_NCHWC_ACTS = frozenset({"relu", "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "gelu"})
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
    axis scaled by a whole factor (:func:`tensat_py.cost.layout.upsample_key`)."""
    sizes = resize.params.get("sizes", ())
    return str(resize.params.get("mode")) == "nearest" and upsample_key(shape, sizes) is not None


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
        (kernel_of(node.op) in ("add", "mul") and per_channel) or node.op == "batchnorm"
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
    if kernel_of(node.op) == "add":
        return len(shapes) == 2 and not consts and chans[0] == chans[1]
    if kernel_of(node.op) == "mul":
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
