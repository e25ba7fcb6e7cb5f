"""NasRNN (Zoph & Le's searched recurrent cell) as Tensat evaluates it.

Per step, with input ``x_t`` and state ``h`` (both ``[1, hidden]``), eight "combine"
nodes ``x_t @ W1_i + h @ W2_i`` feed a fixed tree of element-wise operators::

    m0 = relu(t0) + sigmoid(t3)        m1 = sigmoid(t1) + tanh(t2)
    m2 = sigmoid(t4) * tanh(t5)        m3 = sigmoid(t6) * relu(t7)
    m4 = sigmoid(m1) + tanh(m2)        m5 = tanh(m0) * tanh(m3)
    m6 = tanh(m4) * tanh(m5)           h' = tanh(m6)

The initial state is a weight; the output is the final state. The 16 matmuls per step
share ``x_t`` (8) and ``h`` (8): Tensat merges them (the paper's largest speedup).
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["nasrnn", "cell_state"]


def _cell(b: GraphBuilder, h: Tensor, x: Tensor, hidden: int, step: int) -> Tensor:
    t = []
    for i in range(8):
        w1 = b.weight((hidden, hidden), name=f"s{step}_wx{i}")
        w2 = b.weight((hidden, hidden), name=f"s{step}_wh{i}")
        t.append(b.ewadd(b.matmul(x, w1), b.matmul(h, w2)))
    return cell_state(b, t)


def cell_state(b: GraphBuilder, t: list[Tensor]) -> Tensor:
    """The cell's new state from its eight pre-activations ``t[i] = x Wx_i + h Wh_i``
    (each ``(1, hidden)``): the NAS cell's tree of relu/sigmoid/tanh and adds/products
    (Tensat's and TASO's NasRNN)."""
    m0 = b.ewadd(b.relu(t[0]), b.sigmoid(t[3]))
    m1 = b.ewadd(b.sigmoid(t[1]), b.tanh(t[2]))
    m2 = b.ewmul(b.sigmoid(t[4]), b.tanh(t[5]))
    m3 = b.ewmul(b.sigmoid(t[6]), b.relu(t[7]))
    m4 = b.ewadd(b.sigmoid(m1), b.tanh(m2))
    m5 = b.ewmul(b.tanh(m0), b.tanh(m3))
    m6 = b.ewmul(b.tanh(m4), b.tanh(m5))
    return b.tanh(m6)


def nasrnn(steps: int = 5, hidden: int = 512) -> Graph:
    """The NasRNN benchmark graph (defaults: Tensat's 5 steps, hidden size 512).

    Raises:
        ValueError: a size is not positive.
    """
    if steps < 1 or hidden < 1:
        raise ValueError(f"nasrnn: need positive steps and hidden, got {steps}, {hidden}")
    b = GraphBuilder()
    xs = [b.input((1, hidden), name=f"x{i}") for i in range(steps)]
    h = b.weight((1, hidden), name="h0")
    for i in range(steps):
        h = _cell(b, h, xs[i], hidden, i)
    return b.finish([h])
