"""A TASO-like graph builder.

>>> b = GraphBuilder()
>>> x = b.input((1, 3, 8, 8), name="x")
>>> y = b.conv2d(x, b.weight((4, 3, 3, 3)), stride=(1, 1), padding="same", act="relu")
>>> b.finish([y]).type_of(y.id).shape
(1, 4, 8, 8)

Every call type-checks through the Rust analysis and raises
:class:`tensat_py.graph.GraphError` (a ``ValueError``) naming the operator and shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tensat_py.graph import Graph, GraphError, TensorType

__all__ = ["ACTIVATIONS", "PADDINGS", "GraphBuilder", "Tensor", "act_code", "pad_code"]

#: Activation names to the language's codes (TASO ``ActiMode``).
ACTIVATIONS = {"none": 0, "sigmoid": 1, "relu": 2, "tanh": 3}
#: Padding names to the language's codes (TASO ``PaddingMode``).
PADDINGS = {"same": 0, "valid": 1}


def act_code(act: str | int | None) -> int:
    """``"relu"`` -> 2; accepts a code 0..3 or None (none). Raises ``ValueError``."""
    if act is None:
        return 0
    if isinstance(act, int):
        if act in ACTIVATIONS.values():
            return act
    elif act.lower() in ACTIVATIONS:
        return ACTIVATIONS[act.lower()]
    raise ValueError(f"unknown activation {act!r}; use one of {list(ACTIVATIONS)} or 0..3")


def pad_code(padding: str | int) -> int:
    """``"same"`` -> 0, ``"valid"`` -> 1; accepts the codes too. Raises ``ValueError``."""
    if isinstance(padding, int):
        if padding in (0, 1):
            return padding
    elif padding.lower() in PADDINGS:
        return PADDINGS[padding.lower()]
    raise ValueError(f"unknown padding {padding!r}; use 'same' or 'valid'")


def _pair(v: int | Sequence[int], what: str) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    t = tuple(int(x) for x in v)
    if len(t) != 2:
        raise ValueError(f"{what} must be an int or a pair, got {v!r}")
    return t  # type: ignore[return-value]


@dataclass(frozen=True)
class Tensor:
    """A handle to a builder node's output: its node ``id`` and :class:`TensorType`."""

    id: int
    type: TensorType

    @property
    def shape(self) -> tuple[int, ...]:
        """Output shape."""
        return self.type.shape


class GraphBuilder:
    """Builds a :class:`~tensat_py.graph.Graph` with TASO's operator vocabulary."""

    def __init__(self) -> None:
        self.graph = Graph()
        self._n_in = 0
        self._n_w = 0

    # ------------------------------------------------------------------ helpers
    def _t(self, nid: int) -> Tensor:
        return Tensor(nid, self.graph.type_of(nid))

    def _id(self, t: Tensor | int) -> int:
        return t.id if isinstance(t, Tensor) else int(t)

    def _op(self, op: str, params: dict, inputs: Sequence[Tensor | int], name=None) -> Tensor:
        return self._t(self.graph.add_node(op, params, [self._id(t) for t in inputs], name))

    # ------------------------------------------------------------------ leaves
    def input(
        self, shape: Sequence[int], name: str | None = None, dtype: str = "float32"
    ) -> Tensor:
        """A runtime input of ``shape`` and ``dtype``; default names ``input_0``, ..."""
        if name is None:
            name = f"input_{self._n_in}"
            self._n_in += 1
        return self._t(self.graph.add_input(name, shape, dtype))

    def weight(
        self, shape: Sequence[int], name: str | None = None, dtype: str = "float32"
    ) -> Tensor:
        """A trained parameter of ``shape`` and ``dtype``; default names ``w_0``, ..."""
        if name is None:
            name = f"w_{self._n_w}"
            self._n_w += 1
        return self._t(self.graph.add_weight(name, shape, dtype))

    # ------------------------------------------------------------------ any operator
    def op(self, name: str, *inputs: Tensor, **params: Any) -> Tensor:
        """Apply any operator of the language by its name (``docs/language.md``).

        ``inputs`` are its tensor operands in signature order, ``params`` its parameters by
        operand name (lists as sequences of ints). Every operator declared in the Rust core
        and ``tensat_py.ops`` is reachable this way without a builder method of its own.

        >>> b = GraphBuilder()
        >>> x = b.input((2, 3), name="x")
        >>> b.op("reduce_sum", x, axes=[1], keepdims=0).shape
        (2,)

        Raises:
            GraphError: unknown operator, wrong parameters, or a type error.
        """
        return self._op(name, dict(params), list(inputs))

    # ------------------------------------------------------------------ operators
    def matmul(self, a: Tensor, b: Tensor, act: str | int = "none") -> Tensor:
        """``act(a @ b)`` over the last two axes; equal leading (batch) axes."""
        return self._op("matmul", {"act": act_code(act)}, [a, b])

    def conv2d(
        self,
        x: Tensor,
        w: Tensor | Sequence[int],
        stride: int | Sequence[int] = (1, 1),
        padding: str | int = "same",
        act: str | int = "none",
    ) -> Tensor:
        """2-D convolution, NCHW input, OIHW weight, groups = C // I.

        ``w`` may be a shape, in which case a new weight is created.
        """
        if not isinstance(w, Tensor):
            w = self.weight(w)
        sh, sw = _pair(stride, "stride")
        p = {"stride_h": sh, "stride_w": sw, "pad": pad_code(padding), "act": act_code(act)}
        return self._op("conv2d", p, [x, w])

    def relu(self, x: Tensor) -> Tensor:
        """Element-wise ``max(x, 0)``."""
        return self._op("relu", {}, [x])

    def tanh(self, x: Tensor) -> Tensor:
        """Element-wise tanh."""
        return self._op("tanh", {}, [x])

    def sigmoid(self, x: Tensor) -> Tensor:
        """Element-wise logistic sigmoid."""
        return self._op("sigmoid", {}, [x])

    def dropout(self, x: Tensor) -> Tensor:
        """Identity at inference."""
        return self._op("dropout", {}, [x])

    def ewadd(self, a: Tensor, b: Tensor) -> Tensor:
        """Element-wise sum of equal shapes."""
        return self._op("ewadd", {}, [a, b])

    def ewmul(self, a: Tensor, b: Tensor) -> Tensor:
        """Element-wise product of equal shapes."""
        return self._op("ewmul", {}, [a, b])

    add = ewadd
    mul = ewmul

    def _pool(self, op, x, kernel, stride, padding, act) -> Tensor:
        kh, kw = _pair(kernel, "kernel")
        sh, sw = _pair(stride, "stride")
        p = {
            "kernel_h": kh,
            "kernel_w": kw,
            "stride_h": sh,
            "stride_w": sw,
            "pad": pad_code(padding),
            "act": act_code(act),
        }
        return self._op(op, p, [x])

    def poolmax(
        self,
        x: Tensor,
        kernel: int | Sequence[int],
        stride: int | Sequence[int],
        padding: str | int = "same",
        act: str | int = "none",
    ) -> Tensor:
        """Max pooling over ``kernel`` windows (NCHW); SAME pads with -inf."""
        return self._pool("poolmax", x, kernel, stride, padding, act)

    def poolavg(
        self,
        x: Tensor,
        kernel: int | Sequence[int],
        stride: int | Sequence[int],
        padding: str | int = "same",
        act: str | int = "none",
    ) -> Tensor:
        """Average pooling (NCHW), dividing by the count of non-padding elements."""
        return self._pool("poolavg", x, kernel, stride, padding, act)

    def concat(self, axis: int, tensors: Sequence[Tensor]) -> Tensor:
        """Join 2..5 tensors along ``axis`` (more are nested to the right)."""
        ts = list(tensors)
        if len(ts) < 2:
            raise GraphError(f"concat needs at least 2 tensors, got {len(ts)}")
        if len(ts) > 5:
            tail = self.concat(axis, ts[4:])
            ts = ts[:4] + [tail]
        op = {2: "concat", 3: "concat3", 4: "concat4", 5: "concat5"}[len(ts)]
        ndim = len(self.graph.type_of(self._id(ts[0])).shape)
        return self._op(op, {"axis": int(axis), "ndim": ndim}, ts)

    def split(
        self, x: Tensor, axis: int, sizes: Sequence[int] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Split a concat result along ``axis`` where that concat joined its inputs.

        ``sizes`` (optional) is checked against the position the analysis recorded.
        Raises ``GraphError`` when ``x``'s axis was not produced by a concat or the sizes
        differ.
        """
        s = self.graph.add_node("split", {"axis": int(axis)}, [self._id(x)])
        a = self._op("split_0", {}, [s])
        b = self._op("split_1", {}, [s])
        if sizes is not None:
            got = (a.shape[axis], b.shape[axis])
            if tuple(int(v) for v in sizes) != got:
                raise GraphError(f"split: sizes {tuple(sizes)} differ from the concat's {got}")
        return a, b

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """Permute axes: output axis i is input axis ``perm[i]``."""
        return self._op("transpose", {"perm": tuple(int(p) for p in perm)}, [x])

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """Row-major reshape to ``shape`` (same element count)."""
        return self._op("reshape", {"shape": tuple(int(d) for d in shape)}, [x])

    def batchnorm(
        self,
        x: Tensor,
        scale: Tensor | None = None,
        bias: Tensor | None = None,
        mean: Tensor | None = None,
        var: Tensor | None = None,
    ) -> Tensor:
        """Inference batch norm on axis 1, eps 1e-5; missing parameters become ``[C]`` weights."""
        c = x.shape[1] if len(x.shape) > 1 else 1
        ps = [p if p is not None else self.weight((c,)) for p in (scale, bias, mean, var)]
        return self._op("batchnorm", {}, [x, *ps])

    def enlarge(self, w: Tensor, ref: Tensor) -> Tensor:
        """Zero-pad kernel ``w`` (OIHW) to ``ref``'s kernel size, centred."""
        return self._op("enlarge", {}, [w, ref])

    def merge(self, w: Tensor, count: int) -> Tensor:
        """TASO MergeGConv: weight ``[O, I, kh, kw]`` -> ``[O, I*count, kh, kw]``."""
        return self._op("merge", {"count": int(count)}, [w])

    def finish(self, outputs: Tensor | Sequence[Tensor]) -> Graph:
        """Set the outputs (in order) and return the graph."""
        outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        if not outs:
            raise GraphError("finish: a graph needs at least one output")
        self.graph.outputs = [self._id(t) for t in outs]
        return self.graph
