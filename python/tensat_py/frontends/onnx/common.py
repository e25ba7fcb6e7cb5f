"""What the ONNX importer, exporter and payload share: the error type, the opset bounds
and the element-type table.

Element types (ONNX ``TensorProto.DataType``, onnx/onnx.proto3) map one to one to the
language's dtype names; any other element type (``UINT8``, ``STRING``, ``FLOAT8*``...) has
no dtype in the language, so an operator reading or writing one becomes opaque.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

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
    """The IR version to run ``model`` under: the lowest that its opset imports need
    (``onnx.helper.find_min_ir_version_for``; 8 when it has local functions), never above
    its own.

    onnxruntime refuses models whose IR version is newer than it knows ("Unsupported model
    IR version: 14, max supported IR version: 13") even when they use nothing of that IR;
    the exporter writes, and opaque payloads and shape folding run, models under this
    version instead. A model that uses a newer IR's features (new element types) fails
    ``onnx.checker`` under it: the exporter then keeps the model's own version.
    """
    own = int(model.ir_version)
    try:
        need = int(helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True))
    except Exception:  # an opset newer than this onnx knows: keep the model's own
        return own
    if len(model.functions):
        need = max(need, _FUNCTIONS_IR)
    return min(own, need) if own else need
