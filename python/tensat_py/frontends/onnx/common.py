"""What the ONNX importer, exporter and payload share: the error type, the opset bounds
and the element-type table.

Element types (ONNX ``TensorProto.DataType``, onnx/onnx.proto3) map one to one to the
language's dtype names; any other element type (``UINT8``, ``STRING``, ``FLOAT8*``...) has
no dtype in the language, so an operator reading or writing one becomes opaque.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensat_py.ops.tensor import ONNX_DTYPES

__all__ = [
    "MIN_OPSET",
    "DEFAULT_OPSET",
    "DEFAULT_IR_VERSION",
    "OnnxError",
    "OnnxImportError",
    "ELEM_TO_DTYPE",
    "DTYPE_TO_ELEM",
    "dtype_of_elem",
    "elem_of_dtype",
    "dtype_of_array",
    "elem_name",
    "runnable_ir_version",
    "SPLAT_BYTES",
    "SplatConstant",
    "splat_value",
    "broadcast_base",
    "constant_of_shape_allows",
    "hold_out",
    "tensor_bytes",
    "write_model",
]

#: Oldest default-domain opset read without conversion (older models are converted).
MIN_OPSET = 13
#: Default-domain opset of models written for graphs that did not come from ONNX.
DEFAULT_OPSET = 17
#: IR version of models written for graphs that did not come from ONNX.
DEFAULT_IR_VERSION = 8

#: ONNX element type -> the language's dtype name
#: (one table: :data:`tensat_py.ops.tensor.ONNX_DTYPES`).
ELEM_TO_DTYPE: dict[int, str] = ONNX_DTYPES
#: The language's dtype name -> ONNX element type.
DTYPE_TO_ELEM: dict[str, int] = {v: k for k, v in ELEM_TO_DTYPE.items()}


class OnnxError(ValueError):
    """A model that cannot be read or written; the message names the node or value."""


class OnnxImportError(OnnxError):
    """A translator (importer) failed on one ONNX node: a bug, not an unsupported case.

    Raised when an importer raises anything but ``Unsupported``, when the Rust type
    checker rejects a node an importer built, or when the value an importer bound to an
    output disagrees with ONNX shape inference. The original exception is chained
    (``__cause__``).

    Attributes:
        model: the model file (or ``"model"`` for an in-memory ``ModelProto``).
        node_name: the ONNX node's name (may be empty in the model; the message then
            names its first output).
        op_type: the ONNX node's operator type (``domain:Op`` outside the default domain).
    """

    def __init__(self, message: str, *, model: str, node_name: str, op_type: str) -> None:
        super().__init__(message)
        self.model = model
        self.node_name = node_name
        self.op_type = op_type


def elem_name(elem: int) -> str:
    """``TensorProto.UINT8`` -> ``"UINT8"`` (for messages)."""
    try:
        return str(TensorProto.DataType.Name(int(elem)))
    except ValueError:
        return f"element type {elem}"


def dtype_of_elem(elem: int) -> str | None:
    """The dtype name of ONNX element type ``elem``, or None when the language has none."""
    return ELEM_TO_DTYPE.get(int(elem))


def elem_of_dtype(dtype: str) -> int:
    """The ONNX element type of dtype name ``dtype``.

    Raises:
        OnnxError: ``dtype`` is not one of the language's dtypes (:data:`ELEM_TO_DTYPE`).
    """
    try:
        return DTYPE_TO_ELEM[str(dtype)]
    except KeyError:
        raise OnnxError(f"dtype `{dtype}` has no ONNX element type") from None


def dtype_of_array(array: Any) -> str | None:
    """The dtype name of a NumPy array (``ml_dtypes.bfloat16`` included), or None."""
    name = np.asarray(array).dtype.name
    return name if name in DTYPE_TO_ELEM else None


#: Oldest IR version with model-local functions (ONNX IR, ``FunctionProto``).
_FUNCTIONS_IR = 8


def runnable_ir_version(model: onnx.ModelProto) -> int:
    """The IR version to run and write ``model`` under: the lowest that its opset imports
    need (``onnx.helper.find_min_ir_version_for``; 8 when it has local functions).

    Lowered from the model's own: onnxruntime refuses models whose IR version is newer than
    it knows ("Unsupported model IR version: 14, max supported IR version: 13") even when
    they use nothing of that IR; the exporter writes, and opaque payloads and shape folding
    run, models under this version instead. A model that uses a newer IR's features (new
    element types) fails ``onnx.checker`` under it: the exporter then keeps the model's own
    version.

    Raised from the model's own when that is older than its opsets allow: a model of IR 3
    (the classic model zoo: IR 3, opset 9) converted to opset 13 by the importer is run and
    written under IR 7, the IR version opset 13 was released with. From IR 4 on an
    initializer need not be a graph input (ONNX IR spec,
    https://onnx.ai/onnx/repo-docs/IR.html: before IR 4 "initializers ... must also be
    graph inputs"), which is how the importer reads an initializer (a constant), and how
    the exporter writes one; an initializer that is also a graph input means the same
    under both (an input with a default value).
    """
    own = int(model.ir_version)
    try:
        need = int(helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True))
    except Exception:  # an opset newer than this onnx knows: keep the model's own
        return own
    if len(model.functions):
        need = max(need, _FUNCTIONS_IR)
    return need


#: A constant of more than this many bytes whose elements are all equal is held as a
#: :class:`SplatConstant` by the importer and written as ``ConstantOfShape`` by the
#: exporter (the node and its shape initializer take about this much).
SPLAT_BYTES = 64

#: ``ConstantOfShape``'s ``value`` element types before opset 20 (opset 20 adds bfloat16
#: and the float8 types); https://onnx.ai/onnx/operators/onnx__ConstantOfShape.html.
_COS_ELEMS_9 = frozenset(
    {
        TensorProto.FLOAT16,
        TensorProto.FLOAT,
        TensorProto.DOUBLE,
        TensorProto.INT8,
        TensorProto.INT16,
        TensorProto.INT32,
        TensorProto.INT64,
        TensorProto.UINT8,
        TensorProto.UINT16,
        TensorProto.UINT32,
        TensorProto.UINT64,
        TensorProto.BOOL,
    }
)


def constant_of_shape_allows(elem: int, opset: int) -> bool:
    """Whether ``ConstantOfShape`` at default-domain ``opset`` can produce element type
    ``elem`` (ONNX operator spec: opset 9 the float, integer and bool types, opset 20 adds
    ``BFLOAT16``)."""
    if opset < 9:
        return False
    return int(elem) in _COS_ELEMS_9 or (opset >= 20 and int(elem) == TensorProto.BFLOAT16)


def splat_value(array: Any, min_bytes: int = SPLAT_BYTES) -> np.ndarray | None:
    """The one value of ``array`` as a 1-element array of its dtype when every element has
    the same bits (``-0.0`` and ``0.0`` differ, equal NaNs are equal) and the array holds
    more than ``min_bytes`` bytes; else None.

    A broadcast view (``np.broadcast_to``: every stride 0) answers at once; another array
    is compared element by element after a few samples (a real weight fails at the
    first), so the cost is one pass over a splat, almost none over anything else.
    """
    a = np.asarray(array)
    if a.size == 0 or a.nbytes <= min_bytes or a.dtype.hasobject:
        return None
    if all(s == 0 for s in a.strides):
        return a.reshape(-1)[:1].copy()
    bits = _bits(a)
    if bits is None:
        return None
    bits = bits.reshape(-1)
    first = bits[0]
    for k in (bits.size - 1, bits.size // 2, bits.size // 3, 1):
        if bits[k] != first:
            return None
    if not bool(np.all(bits == first)):
        return None
    return np.ascontiguousarray(a).reshape(-1)[:1].copy()


def _bits(a: np.ndarray) -> np.ndarray | None:
    """``a`` viewed as unsigned integers of its item size (bitwise comparison), or None."""
    size = a.dtype.itemsize
    if size not in (1, 2, 4, 8) or a.dtype.hasobject:
        return None
    return np.ascontiguousarray(a).view(f"u{size}")


def broadcast_base(array: Any, min_bytes: int = SPLAT_BYTES) -> np.ndarray | None:
    """The smallest array ``b`` of ``array``'s rank and dtype, each axis either
    ``array``'s or 1, with ``np.broadcast_to(b, array.shape)`` equal to ``array`` bit for
    bit, when it is smaller than ``array`` (an axis along which ``array`` does not vary:
    the weight of a convolution folded from a constant one and a per-channel scale is
    constant along all but its first axis); None when there is no such axis or
    ``array`` holds at most ``min_bytes`` bytes.

    Each axis is sampled at a few positions before it is compared in full, so an array
    that varies along every axis costs almost nothing.
    """
    a = np.asarray(array)
    if a.size == 0 or a.ndim == 0 or a.nbytes <= min_bytes:
        return None
    # axes that are broadcast already (stride 0) cost nothing to drop
    pairs = zip(a.strides, a.shape, strict=True)
    bits = _bits(a[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in pairs)])
    if bits is None:
        return None
    for d in range(bits.ndim):
        if bits.shape[d] == 1:
            continue
        first = bits.take([0], axis=d)
        flat = np.linspace(0, bits.size - 1, num=min(bits.size, 9), dtype=np.int64)
        idx = np.unravel_index(flat, bits.shape)
        at0 = tuple(np.zeros_like(i) if k == d else i for k, i in enumerate(idx))
        if not np.array_equal(bits[idx], bits[at0]):
            continue
        if np.array_equal(bits, np.broadcast_to(first, bits.shape)):
            bits = first
    if bits.size == a.size:
        return None
    return np.ascontiguousarray(bits).view(a.dtype)


@dataclass(eq=False)
class SplatConstant:
    """A constant all of whose elements are equal, held compactly: the ``ConstantOfShape``
    node that computes it (the source model's own where it had one) and the initializer
    of that node's shape input.

    The importer makes one per ``ConstantOfShape`` weight of the model (and per
    initializer whose values are all equal); the graph has a ``weight`` for it, whose
    value is :meth:`array` (a broadcast view: one element in memory), and the exporter
    writes the node and its shape back instead of a full tensor.

    Attributes:
        node: the ``ConstantOfShape`` node; ``node.output[0]`` is the constant's name,
            ``node.input[0]`` its shape's.
        shape: the shape initializer (int64, rank 1), named ``node.input[0]``.
        value: the value, a 1-element array of the constant's dtype.
    """

    node: onnx.NodeProto
    shape: TensorProto
    value: np.ndarray

    @property
    def name(self) -> str:
        """The constant's value name (the node's output)."""
        return str(self.node.output[0])

    @property
    def dims(self) -> tuple[int, ...]:
        """The constant's shape."""
        return tuple(int(d) for d in numpy_helper.to_array(self.shape).reshape(-1))

    @property
    def elem(self) -> int:
        """The constant's ONNX element type."""
        return int(helper.np_dtype_to_tensor_dtype(self.value.dtype))

    def __repr__(self) -> str:
        return f"SplatConstant({self.name!r}, {self.dims}, value={self.value[0]!r})"

    def array(self) -> np.ndarray:
        """The constant as a read-only broadcast view of :attr:`value` (shape :attr:`dims`)."""
        return np.broadcast_to(self.value.reshape(()), self.dims)

    @classmethod
    def make(cls, name: str, value: np.ndarray, dims: tuple[int, ...], shape_name: str):
        """A new ``ConstantOfShape`` node ``name`` of ``value`` (1 element) and shape
        ``dims``, reading the shape initializer ``shape_name``."""
        v = np.asarray(value).reshape(1)
        shape = numpy_helper.from_array(np.asarray(dims, dtype=np.int64), shape_name)
        node = helper.make_node(
            "ConstantOfShape", [shape_name], [name], value=numpy_helper.from_array(v)
        )
        return cls(node=node, shape=shape, value=v.copy())


def hold_out(
    model: onnx.ModelProto, names: set[str]
) -> tuple[onnx.ModelProto, list[onnx.TensorProto]]:
    """``model`` without the initializers ``names``, each listed as a graph input of its
    type instead, and those initializers (references into ``model``: the importer takes
    them as initializers beside the light model). Passes
    that need only the weights' types (ONNX shape inference, the checker, onnxslim's
    folding of what reads no held weight) then serialise kilobytes, not the weights.

    Returns:
        ``(model, [])`` when ``names`` holds none of its initializers; else a new model
        (``model`` is not changed) and the held initializers.
    """
    g = model.graph
    held = [t for t in g.initializer if t.name in names]
    if not held:
        return model, []
    gone = {t.name for t in held}
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.producer_name = model.producer_name
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    light.metadata_props.extend(model.metadata_props)
    light.graph.name = g.name
    light.graph.doc_string = g.doc_string
    light.graph.node.extend(g.node)
    light.graph.input.extend(g.input)
    light.graph.output.extend(g.output)
    light.graph.value_info.extend(g.value_info)
    light.graph.initializer.extend(t for t in g.initializer if t.name not in gone)
    light.graph.sparse_initializer.extend(g.sparse_initializer)
    for t in held:
        light.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return light, held


def tensor_bytes(t: onnx.TensorProto) -> int:
    """Bytes of an initializer's data, whichever field holds it."""
    return len(t.raw_data) if t.raw_data else t.ByteSize()


def write_model(model: onnx.ModelProto, f: Any) -> None:
    """Writes ``model`` to the binary file ``f`` as ``f.write(model.SerializeToString())``
    would, but one initializer at a time: the model's other fields first, then its graph
    with the initializers appended (protobuf encodes a message as its fields in any order,
    and a repeated field as its elements one after another; ONNX's ``ModelProto.graph`` is
    field 7 and ``GraphProto.initializer`` field 5). The serialised weights are never
    held in memory at once: for a 1.36 GB model that is 1.36 GB less at the peak.

    Raises:
        OSError: as ``f.write``.
    """
    head = _without(model, "graph")
    graph = _without(model.graph, "initializer")
    sizes = [t.ByteSize() for t in model.graph.initializer]
    init_tag = _varint((5 << 3) | 2)
    graph_len = graph.ByteSize() + sum(len(init_tag) + len(_varint(n)) + n for n in sizes)
    f.write(head.SerializeToString())
    f.write(_varint((7 << 3) | 2) + _varint(graph_len))
    f.write(graph.SerializeToString())
    for t, n in zip(model.graph.initializer, sizes, strict=True):
        f.write(init_tag + _varint(n))
        f.write(t.SerializeToString())


def _without(message: Any, skip: str) -> Any:
    """A new message of ``message``'s type holding its fields but ``skip`` (copied)."""
    out = type(message)()
    for fd, value in message.ListFields():
        if fd.name == skip:
            continue
        if fd.is_repeated:
            getattr(out, fd.name).extend(value)
        elif fd.type == fd.TYPE_MESSAGE:
            getattr(out, fd.name).CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


def _varint(n: int) -> bytes:
    """Protobuf's base-128 varint encoding of ``n >= 0``."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)
