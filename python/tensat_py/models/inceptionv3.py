"""Inception-v3 (Szegedy et al., 2016) as the Tensat evaluation's graph has it.

Input 1x3x299x299. Every convolution has a fused relu (batch norm folded). The stem is
3x3/2 VALID (149), 3x3 VALID (147), 3x3 SAME to 64 (147), 3x3/2 max pool (73), 1x1 to
80, 3x3 VALID to 192 (71), 3x3/2 max pool (35). Then modules A (x3, pool features 32,
64, 64), B, C (x4, 7x7 channels 128, 160, 160, 192), D, E (x2) and a global 8x8 average
pool (output 1x2048x1x1, no classifier).

Branch joins follow Tensat's serialised graph (``inceptionv3.model``): modules A and C
join their four branches as two pairwise concats and a concat of the pairs; module B
pairs its two convolution branches and then adds the pooled branch; module D uses one
3-way concat; module E concatenates its split 1x3/3x1 branches pairwise and joins the
four branches with one 4-way concat. The pooled branch is an average pool in A, B and C
and a max pool in D and E, as in that graph. Counts: 94 convolutions, 30 concats,
5 max pools, 9 average pools.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["inceptionv3"]


def _conv(
    b: GraphBuilder,
    x: Tensor,
    out: int,
    kernel: Sequence[int] = (1, 1),
    stride: int = 1,
    padding: str = "same",
) -> Tensor:
    return b.conv2d(x, (out, x.shape[1], *kernel), stride=stride, padding=padding, act="relu")


def _pair_concat(b: GraphBuilder, branches: list[Tensor]) -> Tensor:
    left = b.concat(1, branches[:2])
    right = b.concat(1, branches[2:])
    return b.concat(1, [left, right])


def _module_a(b: GraphBuilder, x: Tensor, pool_features: int) -> Tensor:
    b1 = _conv(b, x, 64)
    b5 = _conv(b, _conv(b, x, 48), 64, (5, 5))
    b3 = _conv(b, _conv(b, _conv(b, x, 64), 96, (3, 3)), 96, (3, 3))
    bp = _conv(b, b.poolavg(x, 3, 1), pool_features)
    return _pair_concat(b, [b1, b5, b3, bp])


def _module_b(b: GraphBuilder, x: Tensor) -> Tensor:
    b3 = _conv(b, x, 384, (3, 3), stride=2, padding="valid")
    bd = _conv(b, _conv(b, x, 64), 96, (3, 3))
    bd = _conv(b, bd, 96, (3, 3), stride=2, padding="valid")
    bp = b.poolavg(x, 3, 2, padding="valid")
    return b.concat(1, [bp, b.concat(1, [b3, bd])])


def _module_c(b: GraphBuilder, x: Tensor, c7: int) -> Tensor:
    b1 = _conv(b, x, 192)
    b7 = _conv(b, _conv(b, _conv(b, x, c7), c7, (1, 7)), 192, (7, 1))
    bd = _conv(b, x, c7)
    for out, k in ((c7, (7, 1)), (c7, (1, 7)), (c7, (7, 1)), (192, (1, 7))):
        bd = _conv(b, bd, out, k)
    bp = _conv(b, b.poolavg(x, 3, 1), 192)
    return _pair_concat(b, [b1, b7, bd, bp])


def _module_d(b: GraphBuilder, x: Tensor) -> Tensor:
    b3 = _conv(b, _conv(b, x, 192), 320, (3, 3), stride=2, padding="valid")
    b7 = _conv(b, _conv(b, _conv(b, x, 192), 192, (1, 7)), 192, (7, 1))
    b7 = _conv(b, b7, 192, (3, 3), stride=2, padding="valid")
    bp = b.poolmax(x, 3, 2, padding="valid")
    return b.concat(1, [b3, b7, bp])


def _module_e(b: GraphBuilder, x: Tensor) -> Tensor:
    b1 = _conv(b, x, 320)
    t = _conv(b, x, 384)
    b3 = b.concat(1, [_conv(b, t, 384, (1, 3)), _conv(b, t, 384, (3, 1))])
    t = _conv(b, _conv(b, x, 448), 384, (3, 3))
    bd = b.concat(1, [_conv(b, t, 384, (1, 3)), _conv(b, t, 384, (3, 1))])
    bp = _conv(b, b.poolmax(x, 3, 1), 192)
    return b.concat(1, [b1, b3, bd, bp])


def inceptionv3(batch: int = 1, image: int = 299) -> Graph:
    """The Inception-v3 graph (defaults: 1x3x299x299).

    Raises:
        ValueError: ``batch`` is not positive or ``image`` is under 75 pixels.
        GraphError: the stem's VALID convolutions do not fit the image.
    """
    if batch < 1 or image < 75:
        raise ValueError(f"inceptionv3: need batch >= 1 and image >= 75, got {batch}, {image}")
    b = GraphBuilder()
    x = b.input((batch, 3, image, image), name="image")
    x = _conv(b, x, 32, (3, 3), stride=2, padding="valid")
    x = _conv(b, x, 32, (3, 3), padding="valid")
    x = _conv(b, x, 64, (3, 3))
    x = b.poolmax(x, 3, 2, padding="valid")
    x = _conv(b, x, 80)
    x = _conv(b, x, 192, (3, 3), padding="valid")
    x = b.poolmax(x, 3, 2, padding="valid")
    for pf in (32, 64, 64):
        x = _module_a(b, x, pf)
    x = _module_b(b, x)
    for c7 in (128, 160, 160, 192):
        x = _module_c(b, x, c7)
    x = _module_d(b, x)
    x = _module_e(b, x)
    x = _module_e(b, x)
    _, _, h, w = x.shape
    return b.finish(b.poolavg(x, (h, w), 1, padding="valid"))
