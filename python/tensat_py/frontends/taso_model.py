"""Loader for TASO-serialised ``.model`` graphs (the files Tensat evaluates).

Format (TASO ``Graph::export_to_file``): four lines per operator:

1. guid (integer);
2. op code (TASO ``OpType``; see :data:`OP_NAMES`);
3. inputs: comma list of ``guid:output_index`` (``10:0`` / ``11:0`` for inputs / weights,
   which have no producer);
4. parameters: comma list of integers, laid out per operator:

   =============== ==========================================================
   Input, Weight   the dimensions
   Conv (3)        input dims (4), weight dims (4), stride_h, stride_w,
                   padding (0 SAME, 1 VALID), activation, pad_h, pad_w
   MaxPool (6),    input dims (4), op type, kernel_h, kernel_w, stride_h,
   AveragePool (7) stride_w, padding, activation, pad_h, pad_w
   Concat (12)     axis
   Split (13)      axis, sizes...
   Reshape (14)    output dims
   Transpose (15)  ndim, permutation (ndim values), shuffle flag; older
                   files omit the leading ndim
   Matmul (18)     activation, ndim
   MergeGConv (21) count (last value)
   others          the input dims (ignored)
   =============== ==========================================================

TASO's pooling operators take a second, placeholder "weight" operand; it carries no data
and is not part of the translated graph (a weight used only that way is not emitted).
Weights no operator reads (biases TASO's ONNX importer leaves dangling) are kept as dead
weight nodes: they appear in :meth:`Graph.weights` but no output depends on them.
Outputs are the operators no other operator consumes, in file order. Inputs are named
``input_<guid>``, weights ``w_<guid>``, other nodes ``<op>_<guid>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from tensat_py.graph import Graph, GraphError

__all__ = ["OP_NAMES", "TasoModelError", "load", "loads"]

#: TASO op codes (``taso.op_table``).
OP_NAMES = {
    0: "Input",
    1: "Weight",
    3: "Conv",
    4: "Dropout",
    6: "MaxPool",
    7: "AveragePool",
    8: "Relu",
    9: "Sigmoid",
    10: "Tanh",
    11: "BatchNormalization",
    12: "Concat",
    13: "Split",
    14: "Reshape",
    15: "Transpose",
    16: "Add",
    17: "Mul",
    18: "Matmul",
    20: "Enlarge",
    21: "MergeGConv",
    26: "Squeeze",
    27: "Unsqueeze",
    28: "Sub",
    29: "Div",
    30: "Equal",
    31: "Greater",
    32: "Less",
    33: "Max",
    34: "Min",
    35: "ArgMax",
    36: "ArgMin",
    37: "ReduceMax",
    38: "ReduceMean",
    39: "ReduceMin",
    40: "ReduceProd",
    41: "ReduceSum",
    42: "Pad",
    43: "Shape",
    44: "Size",
    45: "TopK",
    46: "Where",
    47: "Ceil",
    48: "Cast",
    49: "Exp",
    50: "Round",
    51: "Log",
    52: "Not",
    53: "Sqrt",
    55: "Slice",
    56: "Resize",
}

_UNARY = {8: "relu", 9: "sigmoid", 10: "tanh", 4: "dropout"}
_BINARY = {16: "ewadd", 17: "ewmul"}
_PLACEHOLDER_GUIDS = {10, 11}  # "producers" of Input / Weight operators


class TasoModelError(ValueError):
    """A ``.model`` file is malformed or uses an operator the language cannot express."""


@dataclass
class _Rec:
    guid: int
    code: int
    deps: list[tuple[int, int]]
    params: list[int]
    line: int  # 1-based line of the guid


def _parse(text: str, src: str) -> list[_Rec]:
    lines = text.split("\n")
    while lines and lines[-1].strip() == "":
        lines.pop()
    if len(lines) % 4:
        raise TasoModelError(
            f"{src}: truncated: {len(lines)} lines is not a multiple of 4 "
            f"(last operator starts at line {len(lines) - len(lines) % 4 + 1})"
        )
    recs: list[_Rec] = []
    for k in range(0, len(lines), 4):
        g, c, d, p = (s.strip() for s in lines[k : k + 4])
        where = f"{src}:{k + 1}"
        try:
            guid = int(g)
            code = int(c)
        except ValueError:
            raise TasoModelError(f"{where}: bad guid/op lines {g!r} / {c!r}") from None
        try:
            deps = []
            for item in filter(None, d.split(",")):
                a, b = item.split(":")
                deps.append((int(a), int(b)))
            params = [int(x) for x in filter(None, p.split(","))]
        except ValueError:
            raise TasoModelError(
                f"{where}: operator guid {guid} ({OP_NAMES.get(code, code)}): "
                f"malformed inputs {d!r} or parameters {p!r}"
            ) from None
        recs.append(_Rec(guid, code, deps, params, k + 1))
    return recs


def _order(recs: list[_Rec], src: str) -> list[_Rec]:
    """Topological order (file order when already topological); errors name the node."""
    by = {}
    for r in recs:
        if r.guid in by:
            raise TasoModelError(f"{src}:{r.line}: duplicate guid {r.guid}")
        by[r.guid] = r
    for r in recs:
        if r.code in (0, 1):
            continue
        for g, _ in r.deps:
            if g not in by:
                raise TasoModelError(
                    f"{src}:{r.line}: operator guid {r.guid} ({OP_NAMES.get(r.code, r.code)}) "
                    f"reads guid {g}, which is not in the file"
                )
    state: dict[int, int] = {}
    out: list[_Rec] = []
    for r0 in recs:
        if state.get(r0.guid) == 2:
            continue
        stack = [r0.guid]
        while stack:
            g = stack[-1]
            r = by[g]
            if state.get(g) == 2:
                stack.pop()
                continue
            deps = [] if r.code in (0, 1) else [d for d, _ in r.deps if state.get(d) != 2]
            if deps:
                state[g] = 1
                for d in deps:
                    if state.get(d) == 1:
                        raise TasoModelError(
                            f"{src}:{r.line}: cycle: operator guid {g} "
                            f"({OP_NAMES.get(r.code, r.code)}) depends on guid {d}, "
                            "which depends on it"
                        )
                    stack.append(d)
                continue
            state[g] = 2
            out.append(r)
            stack.pop()
    return out


def loads(text: str, source: str = "<string>") -> Graph:
    """Translate the text of a ``.model`` file into a :class:`Graph`.

    Raises:
        TasoModelError: truncated file, malformed line, missing input, cycle, or an
            operator the language cannot express (message names guid, op and file).
    """
    recs = _order(_parse(text, source), source)
    g = Graph()
    vals: dict[int, list[int]] = {}  # guid -> node id per output index
    weight_recs: dict[int, _Rec] = {}
    consumed: set[int] = set()
    placeholders: set[int] = set()

    def fail(r: _Rec, msg: str) -> TasoModelError:
        return TasoModelError(
            f"{source}:{r.line}: operator guid {r.guid} ({OP_NAMES.get(r.code, r.code)}): {msg}"
        )

    def arg(r: _Rec, k: int) -> int:
        if k >= len(r.deps):
            raise fail(r, f"needs input {k + 1}, has {len(r.deps)}")
        guid, idx = r.deps[k]
        consumed.add(guid)
        if guid in weight_recs and guid not in vals:
            wr = weight_recs[guid]
            vals[guid] = [g.add_weight(f"w_{guid}", wr.params)]
        outs = vals.get(guid)
        if outs is None or idx >= len(outs):
            raise fail(r, f"input {guid}:{idx} has no such output")
        return outs[idx]

    def p(r: _Rec, k: int) -> int:
        if k >= len(r.params):
            raise fail(r, f"expects at least {k + 1} parameters, has {len(r.params)}")
        return r.params[k]

    for r in recs:
        c = r.code
        name = f"{OP_NAMES.get(c, c)}_{r.guid}".lower()
        try:
            if c == 0:
                vals[r.guid] = [g.add_input(f"input_{r.guid}", r.params)]
            elif c == 1:
                weight_recs[r.guid] = r  # emitted on first real use
            elif c == 3:
                x, w = arg(r, 0), arg(r, 1)
                params = {
                    "stride_h": p(r, 8),
                    "stride_w": p(r, 9),
                    "pad": p(r, 10),
                    "act": p(r, 11),
                }
                vals[r.guid] = [g.add_node("conv2d", params, [x, w], name)]
            elif c in (6, 7):
                x = arg(r, 0)
                if len(r.deps) > 1:
                    consumed.add(r.deps[1][0])  # placeholder operand
                    placeholders.add(r.deps[1][0])
                params = {
                    "kernel_h": p(r, 5),
                    "kernel_w": p(r, 6),
                    "stride_h": p(r, 7),
                    "stride_w": p(r, 8),
                    "pad": p(r, 9),
                    "act": p(r, 10),
                }
                op = "poolmax" if c == 6 else "poolavg"
                vals[r.guid] = [g.add_node(op, params, [x], name)]
            elif c in _UNARY:
                vals[r.guid] = [g.add_node(_UNARY[c], {}, [arg(r, 0)], name)]
            elif c in _BINARY:
                vals[r.guid] = [g.add_node(_BINARY[c], {}, [arg(r, 0), arg(r, 1)], name)]
            elif c == 11:
                ins = [arg(r, k) for k in range(5)]
                vals[r.guid] = [g.add_node("batchnorm", {}, ins, name)]
            elif c == 12:
                ins = [arg(r, k) for k in range(len(r.deps))]
                vals[r.guid] = [_concat(g, p(r, 0), ins, name)]
            elif c == 14:
                shape = tuple(int(d) for d in r.params)
                vals[r.guid] = [g.add_node("reshape", {"shape": shape}, [arg(r, 0)], name)]
            elif c == 15:
                x = arg(r, 0)
                nd = g.type_of(x).ndim
                if len(r.params) == nd + 2 and r.params[0] == nd:
                    perm = r.params[1 : nd + 1]  # ndim, perm..., shuffle
                elif len(r.params) == nd + 1:
                    perm = r.params[:nd]  # perm..., shuffle (older TASO)
                else:
                    raise fail(r, f"cannot read a permutation of rank {nd} from {r.params}")
                perm = tuple(int(d) for d in perm)
                vals[r.guid] = [g.add_node("transpose", {"perm": perm}, [x], name)]
            elif c == 18:
                vals[r.guid] = [
                    g.add_node("matmul", {"act": p(r, 0)}, [arg(r, 0), arg(r, 1)], name)
                ]
            elif c == 20:
                vals[r.guid] = [g.add_node("enlarge", {}, [arg(r, 0), arg(r, 1)], name)]
            elif c == 21:
                count = p(r, len(r.params) - 1) if r.params else p(r, 0)
                vals[r.guid] = [g.add_node("merge", {"count": count}, [arg(r, 0)], name)]
            elif c == 13:
                vals[r.guid] = _split(g, r, arg(r, 0), name, fail)
            else:
                raise fail(r, "operator not expressible in the language")
        except GraphError as e:
            raise fail(r, str(e)) from None
    # Weights nothing reads (e.g. biases TASO's importer left dangling) are kept as
    # dead weight nodes so no operator of the file is dropped; pooling placeholders are not.
    for guid, wr in weight_recs.items():
        if guid not in vals and guid not in placeholders:
            try:
                vals[guid] = [g.add_weight(f"w_{guid}", wr.params)]
            except GraphError as e:
                raise fail(wr, str(e)) from None
    sinks = [r for r in recs if r.guid not in consumed and r.code not in (0, 1)]
    outs = []
    for r in sinks:
        outs.extend(vals[r.guid])
    if not outs:
        raise TasoModelError(f"{source}: no operators")
    g.outputs = outs
    return g


def _concat(g: Graph, axis: int, ins: list[int], name: str) -> int:
    if len(ins) < 2:
        raise GraphError(f"concat of {len(ins)} inputs")
    if len(ins) > 5:
        tail = _concat(g, axis, ins[4:], name + "_tail")
        ins = ins[:4] + [tail]
    op = {2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(ins)]
    nd = g.type_of(ins[0]).ndim
    return g.add_node(op, {"axis": axis, "ndim": nd}, ins, name)


def _split(g: Graph, r: _Rec, x: int, name: str, fail) -> list[int]:
    """TASO split into sizes: expressible only as the language's split of a concat."""
    axis, sizes = r.params[0], r.params[1:]
    if len(sizes) != 2:
        raise fail(r, f"split into {len(sizes)} parts; the language splits in two")
    s = g.add_node("split", {"axis": axis}, [x], name)
    a = g.add_node("split_0", {}, [s], name + "_0")
    b = g.add_node("split_1", {}, [s], name + "_1")
    got = [g.type_of(a).shape[axis], g.type_of(b).shape[axis]]
    if got != sizes:
        raise fail(r, f"split sizes {sizes} differ from the concat position {got}")
    return [a, b]


def load(path: str | PathLike[str]) -> Graph:
    """Load a TASO ``.model`` file as a :class:`Graph`.

    Raises:
        FileNotFoundError: no such file.
        TasoModelError: see :func:`loads`.
    """
    path = Path(path)
    return loads(path.read_text(), str(path))
