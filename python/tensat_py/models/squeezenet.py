"""SqueezeNet 1.1 (Iandola et al., 2016) as the Tensat evaluation's graph has it.

Input 1x3x224x224: 3x3/2 VALID convolution to 64 channels (111x111), 3x3/2 max pool;
fire modules (squeeze, expand) (16, 64) x2, max pool, (32, 128) x2, max pool,
(48, 192) x2, (64, 256) x2; dropout (identity at inference); a 1x1 convolution to 1000
classes, relu, a 13x13 average pool and a reshape to ``[batch, 1000]``.

A fire module squeezes with a 1x1 convolution, expands with a 1x1 and a 3x3 convolution
side by side and concatenates the two. As in Tensat's serialised graph
(``squeezenet.model``), relus are separate operators after each convolution
(``fused_relu=False``); ``fused_relu=True`` folds them into the convolutions.
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["squeezenet"]


def _conv_relu(
    b: GraphBuilder,
    x: Tensor,
    out: int,
    k: int,
    fused: bool,
    stride: int = 1,
    padding: str = "same",
) -> Tensor:
    w = (out, x.shape[1], k, k)
    if fused:
        return b.conv2d(x, w, stride=stride, padding=padding, act="relu")
    return b.relu(b.conv2d(x, w, stride=stride, padding=padding))


def _fire(b: GraphBuilder, x: Tensor, squeeze: int, expand: int, fused: bool) -> Tensor:
    s = _conv_relu(b, x, squeeze, 1, fused)
    return b.concat(1, [_conv_relu(b, s, expand, 1, fused), _conv_relu(b, s, expand, 3, fused)])


def squeezenet(batch: int = 1, image: int = 224, fused_relu: bool = False) -> Graph:
    """The SqueezeNet 1.1 graph (defaults: 1x3x224x224, relus unfused as in Tensat).

    Raises:
        ValueError: ``batch`` is not positive or ``image`` is under 32 pixels.
    """
    if batch < 1 or image < 32:
        raise ValueError(f"squeezenet: need batch >= 1 and image >= 32, got {batch}, {image}")
    b = GraphBuilder()
    x = b.input((batch, 3, image, image), name="image")
    x = _conv_relu(b, x, 64, 3, fused_relu, stride=2, padding="valid")
    x = b.poolmax(x, 3, 2, padding="valid")
    for i, (sq, ex) in enumerate(((16, 64), (16, 64), (32, 128), (32, 128), (48, 192))):
        if i in (2, 4):
            x = b.poolmax(x, 3, 2, padding="valid")
        x = _fire(b, x, sq, ex, fused_relu)
    for sq, ex in ((48, 192), (64, 256), (64, 256)):
        x = _fire(b, x, sq, ex, fused_relu)
    x = b.dropout(x)
    x = _conv_relu(b, x, 1000, 1, fused_relu)
    _, c, h, w = x.shape
    x = b.poolavg(x, (h, w), (h, w), padding="valid")
    return b.finish(b.reshape(x, (batch, c)))
