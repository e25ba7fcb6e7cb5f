"""VGG-19 (Simonyan and Zisserman, 2015) as the Tensat evaluation's graph has it.

Input 1x3x224x224; sixteen 3x3 SAME convolutions in five blocks (2, 2, 4, 4, 4 layers;
64, 128, 256, 512, 512 channels), each block followed by a 2x2/2 max pool; then a
reshape to ``[batch, 25088]`` and three fully connected layers (matmuls to 4096, 4096,
1000; relu and dropout after the first two).

As in Tensat's serialised graph (``vgg.model``), relus are separate operators
(``fused_relu=False``); ``fused_relu=True`` folds them into the convolutions and
matmuls. The fully connected weights are stored ``[in, out]`` (the serialised graph
stores ``[out, in]`` and transposes them, a weight-only, pre-computed step).
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder
from tensat_py.graph import Graph

__all__ = ["vgg19"]

#: (layers, channels) per block.
BLOCKS = ((2, 64), (2, 128), (4, 256), (4, 512), (4, 512))


def vgg19(batch: int = 1, image: int = 224, classes: int = 1000, fused_relu: bool = False) -> Graph:
    """The VGG-19 graph (defaults: 1x3x224x224, 1000 classes, relus unfused as in Tensat).

    Raises:
        ValueError: ``batch`` or ``classes`` not positive, or ``image`` not a multiple of 32.
    """
    if batch < 1 or classes < 1 or image < 32 or image % 32:
        raise ValueError(f"vgg19: need batch, classes >= 1 and image % 32 == 0, got {image}")
    b = GraphBuilder()
    x = b.input((batch, 3, image, image), name="image")
    act = "relu" if fused_relu else "none"
    for layers, channels in BLOCKS:
        for _ in range(layers):
            x = b.conv2d(x, (channels, x.shape[1], 3, 3), act=act)
            if not fused_relu:
                x = b.relu(x)
        x = b.poolmax(x, 2, 2)
    _, c, h, w = x.shape
    x = b.reshape(x, (batch, c * h * w))
    for i, out in enumerate((4096, 4096, classes)):
        x = b.matmul(x, b.weight((x.shape[1], out), name=f"fc{i}"), act=act if i < 2 else "none")
        if i < 2:
            if not fused_relu:
                x = b.relu(x)
            x = b.dropout(x)
    return b.finish(x)
