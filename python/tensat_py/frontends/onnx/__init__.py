"""ONNX in, ONNX out: :func:`load` a model into a :class:`~tensat_py.graph.Graph`,
:func:`save` (or :func:`to_model`) a graph back.

The package has three parts:

* :mod:`.importer`: model loading, validation, shape inference, constants and the
  importer API that the operator modules' ONNX importers use
  (:func:`tensat_py.ops.onnx_importer`); nodes without an importer, or whose importer
  raises ``Unsupported``, become opaque;
* :mod:`.exporter`: the writer API that :attr:`tensat_py.ops.OpDef.to_onnx` uses, folding of
  weight-only sub-graphs, graph inputs and outputs;
* :mod:`.regions`: structural keys and templates recorded at import, with which the
  exporter writes what the optimiser left unchanged as the source model's own nodes;
* :mod:`.peephole`: exact export-time fusions of what ``to_onnx`` wrote (``Pad`` +
  ``Conv``, flattened ``MatMul``);
* :mod:`.payload`: :class:`OnnxOpaque`, what an opaque node keeps of its ONNX node(s)
  (sub-graphs included) and how it is evaluated (onnxruntime).

Which ONNX operators translate to which language operators is declared with the
operators (``python/tensat_py/ops/``, and ``docs/language.md``), not here.
"""

from tensat_py.frontends.onnx.common import (
    DEFAULT_IR_VERSION,
    DEFAULT_OPSET,
    DTYPE_TO_ELEM,
    ELEM_TO_DTYPE,
    MIN_OPSET,
    OnnxError,
    OnnxImportError,
)
from tensat_py.frontends.onnx.exporter import Writer, save, to_model
from tensat_py.frontends.onnx.importer import (
    Importer,
    OnnxSource,
    Unsupported,
    load,
    opaque_ops,
    opaque_reasons,
)
from tensat_py.frontends.onnx.payload import OnnxOpaque

__all__ = [
    "MIN_OPSET",
    "DEFAULT_OPSET",
    "DEFAULT_IR_VERSION",
    "ELEM_TO_DTYPE",
    "DTYPE_TO_ELEM",
    "OnnxError",
    "OnnxImportError",
    "OnnxOpaque",
    "OnnxSource",
    "Importer",
    "Writer",
    "Unsupported",
    "load",
    "save",
    "to_model",
    "opaque_ops",
    "opaque_reasons",
]
