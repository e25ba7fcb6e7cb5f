"""BERT attention stack as Tensat evaluates it (Yang et al., MLSys 2021, section 6).

Structure (per layer, input ``x`` of shape ``[seq, hidden]``):

* ``q, k, v = x @ Wq, x @ Wk, x @ Wv`` — three matmuls sharing ``x`` (the paper's
  Figure 7: Tensat merges them into one matmul against a concatenated weight);
* each reshaped to ``[seq, heads, hidden/heads]`` and transposed (``1_0_2``) to
  ``[heads, seq, d_k]``;
* ``logits = q @ k``, ``out = logits @ v``, transposed back and reshaped to
  ``[seq, hidden]``: this layer's attention output;
* the next layer's input is ``x @ W_linear``.

The graph's outputs are every layer's attention output, then the last layer's next input
(Tensat joins them with ``noop``). The input passes through ``relu`` first.

Like Tensat, ``logits = q @ k`` multiplies ``k`` as transposed with ``1_0_2``; this only
type-checks when ``seq == hidden / heads`` (64 = 1024 / 16 by default). For other sizes
``k`` is transposed with ``1_2_0`` (``[heads, d_k, seq]``), the usual ``q @ k^T``.
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["bert"]


def _attention(b: GraphBuilder, x: Tensor, seq: int, hidden: int, heads: int, layer: int):
    d_k = hidden // heads
    wq, wk, wv = (b.weight((hidden, hidden), name=f"l{layer}_w{n}") for n in "qkv")
    q, k, v = (b.matmul(x, w) for w in (wq, wk, wv))
    q, k, v = (b.reshape(t, (seq, heads, d_k)) for t in (q, k, v))
    q = b.transpose(q, (1, 0, 2))
    k = b.transpose(k, (1, 0, 2) if seq == d_k else (1, 2, 0))
    v = b.transpose(v, (1, 0, 2))
    logits = b.matmul(q, k)
    out = b.matmul(logits, v)
    out = b.transpose(out, (1, 0, 2))
    out = b.reshape(out, (seq, hidden))
    lin = b.weight((hidden, hidden), name=f"l{layer}_wo")
    return b.matmul(x, lin), out


def bert(seq: int = 64, hidden: int = 1024, heads: int = 16, layers: int = 8) -> Graph:
    """The BERT benchmark graph (defaults: Tensat's 64 x 1024, 16 heads, 8 layers).

    Raises:
        ValueError: ``hidden`` is not a multiple of ``heads`` or a size is not positive.
    """
    if min(seq, hidden, heads, layers) < 1 or hidden % heads:
        raise ValueError(f"bert: need positive sizes and heads | hidden, got {hidden}/{heads}")
    b = GraphBuilder()
    x = b.relu(b.input((seq, hidden), name="x"))
    outs = []
    for i in range(layers):
        x, out = _attention(b, x, seq, hidden, heads, i)
        outs.append(out)
    return b.finish([*outs, x])
