"""NasNet-A (Zoph et al., 2018) as TASO and Tensat evaluate it.

Input 1x3x224x224; a 7x7/2 convolution to 64 channels (relu) and 3x3/2 max pooling
(56x56). Then three stages, each five normal cells and one reduction cell; the cell width
starts at 128 and doubles at every reduction cell (128, 256, 512; the reduction cells
output at 256, 512, 1024 per branch).

A cell takes the previous two cell outputs ``prev`` and ``cur``. ``cur`` is squeezed to
the cell width by a 1x1 convolution (relu); ``prev`` is fitted to ``cur``: a 1x1
convolution when the spatial sizes agree, else a 3x3/2 convolution (both relu). A
separable convolution is a depthwise k x k convolution (groups = channels) followed by a
pointwise 1x1 convolution. Five branch pairs are summed (``ewadd``) and the five sums
concatenated on the channel axis (one ``concat5``):

* normal cell: sep3(cur)+cur, sep3(prev)+sep3(cur), avg3(cur)+prev, avg3(prev)+avg3(prev),
  sep3(prev)+sep3(prev);
* reduction cell (stride 2): s0 = sep7/2(prev)+sep5/2(cur), s1 = max3/2(cur)+sep7/2(prev),
  avg3/2(cur)+sep5/2(prev), max3/2(cur)+sep3(s0), avg3(s0)+s1.
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["nasneta"]


def _squeeze(b: GraphBuilder, x: Tensor, channels: int) -> Tensor:
    return b.conv2d(x, (channels, x.shape[1], 1, 1), act="relu")


def _fit(b: GraphBuilder, cur: Tensor, x: Tensor) -> Tensor:
    if x.shape[2] == cur.shape[2]:
        return _squeeze(b, x, cur.shape[1])
    return b.conv2d(x, (cur.shape[1], x.shape[1], 3, 3), stride=2, act="relu")


def _sep(b: GraphBuilder, x: Tensor, channels: int, k: int, stride: int = 1) -> Tensor:
    cin = x.shape[1]
    if cin % channels:
        raise ValueError(f"nasneta: {cin} input channels are not a multiple of {channels}")
    t = b.conv2d(x, (channels, cin // channels, k, k), stride=stride)
    return b.conv2d(t, (channels, channels, 1, 1))


def _normal(b: GraphBuilder, prev: Tensor, cur: Tensor, c: int) -> Tensor:
    cur = _squeeze(b, cur, c)
    prev = _fit(b, cur, prev)
    pairs = [
        (_sep(b, cur, c, 3), cur),
        (_sep(b, prev, c, 3), _sep(b, cur, c, 3)),
        (b.poolavg(cur, 3, 1), prev),
        (b.poolavg(prev, 3, 1), b.poolavg(prev, 3, 1)),
        (_sep(b, prev, c, 3), _sep(b, prev, c, 3)),
    ]
    return b.concat(1, [b.ewadd(x, y) for x, y in pairs])


def _reduction(b: GraphBuilder, prev: Tensor, cur: Tensor, c: int) -> Tensor:
    cur = _squeeze(b, cur, c)
    prev = _fit(b, cur, prev)
    s0 = b.ewadd(_sep(b, prev, c, 7, 2), _sep(b, cur, c, 5, 2))
    s1 = b.ewadd(b.poolmax(cur, 3, 2), _sep(b, prev, c, 7, 2))
    s2 = b.ewadd(b.poolavg(cur, 3, 2), _sep(b, prev, c, 5, 2))
    s3 = b.ewadd(b.poolmax(cur, 3, 2), _sep(b, s0, c, 3))
    s4 = b.ewadd(b.poolavg(s0, 3, 1), s1)
    return b.concat(1, [s0, s1, s2, s3, s4])


def nasneta(
    batch: int = 1, image: int = 224, channels: int = 128, stages: int = 3, cells: int = 5
) -> Graph:
    """The NasNet-A graph (defaults: Tensat's 1x3x224x224, width 128 doubling, 3 x 5 cells).

    Raises:
        ValueError: a size is not positive.
    """
    if min(batch, image, channels, stages, cells) < 1:
        raise ValueError("nasneta: sizes must be positive")
    b = GraphBuilder()
    x = b.input((batch, 3, image, image), name="image")
    x = b.conv2d(x, (64, 3, 7, 7), stride=2, act="relu")
    x = b.poolmax(x, 3, 2)
    c = channels
    for _ in range(stages):
        prev = cur = x
        for _ in range(cells):
            prev, cur = cur, _normal(b, prev, cur, c)
        c *= 2
        x = _reduction(b, prev, cur, c)
    return b.finish(x)
