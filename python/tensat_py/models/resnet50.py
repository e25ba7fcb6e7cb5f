"""ResNet-50 (He et al., 2016) as an inference graph, batch norm folded into the convolutions.

Stem: 7x7/2 convolution to 64 channels (relu) and 3x3/2 max pooling. Then four stages of
bottleneck blocks (3, 4, 6, 3 blocks; widths 64, 128, 256, 512; each block's output has
4x its width). A block is 1x1 (relu) -> 3x3 with the stage's stride (relu) -> 1x1 to 4x
width; the shortcut is the block input, or a strided 1x1 projection when the shape
changes; the sum goes through a relu. The head is a global 7x7 average pool, a reshape to
``[batch, 2048]`` and a fully connected layer to 1000 classes (matmul).

Batch normalisation is folded into the preceding convolution's weights at inference, as
in TASO's and Tensat's graphs, so it does not appear here.
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder, Tensor
from tensat_py.graph import Graph

__all__ = ["resnet50", "bottleneck"]


def bottleneck(
    b: GraphBuilder,
    x: Tensor,
    width: int,
    stride: int,
    expansion: int = 4,
    groups: int = 1,
) -> Tensor:
    """One bottleneck block (ResNet: ``groups=1``, ``expansion=4``; ResNeXt: 32, 2).

    The middle 3x3 convolution is grouped when ``groups > 1`` (its weight is
    ``[width, width // groups, 3, 3]``).
    """
    cin = x.shape[1]
    cout = width * expansion
    t = b.conv2d(x, (width, cin, 1, 1), act="relu")
    t = b.conv2d(t, (width, width // groups, 3, 3), stride=stride, act="relu")
    t = b.conv2d(t, (cout, width, 1, 1))
    if stride > 1 or cin != cout:
        x = b.conv2d(x, (cout, cin, 1, 1), stride=stride)
    return b.relu(b.ewadd(x, t))


def stem(b: GraphBuilder, x: Tensor) -> Tensor:
    """7x7/2 convolution to 64 channels with relu, then 3x3/2 max pooling (SAME)."""
    x = b.conv2d(x, (64, x.shape[1], 7, 7), stride=2, act="relu")
    return b.poolmax(x, 3, 2)


def resnet50(
    batch: int = 1,
    image: int = 224,
    blocks: tuple[int, ...] = (3, 4, 6, 3),
    classes: int = 1000,
) -> Graph:
    """The ResNet-50 graph (defaults: 1x3x224x224, blocks 3/4/6/3, 1000 classes).

    Raises:
        ValueError: a size is not positive.
    """
    if min(batch, image, classes, *blocks) < 1:
        raise ValueError("resnet50: sizes must be positive")
    b = GraphBuilder()
    t = stem(b, b.input((batch, 3, image, image), name="image"))
    width = 64
    for stage, n in enumerate(blocks):
        for i in range(n):
            t = bottleneck(b, t, width, 2 if (i == 0 and stage > 0) else 1)
        width *= 2
    _, c, h, w = t.shape
    t = b.poolavg(t, (h, w), 1, padding="valid")
    t = b.reshape(t, (batch, c))
    return b.finish(b.matmul(t, b.weight((c, classes), name="fc")))
