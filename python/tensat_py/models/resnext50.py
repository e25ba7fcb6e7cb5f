"""ResNeXt-50 (32x4d-style, Xie et al., 2017) as TASO and Tensat evaluate it.

Input 1x3x224x224; stem 7x7/2 convolution to 64 channels (relu) and 3x3/2 max pooling;
then four stages of bottleneck blocks (3, 4, 6, 3 blocks) whose grouped 3x3 convolution
has 32 groups and widths 128, 256, 512, 1024; each block's output has twice its width.
The first block of stages 2-4 has stride 2 and a 1x1 projection shortcut. No head: the
output is the last block's feature map (1x2048x7x7), as in the Tensat benchmark.
"""

from __future__ import annotations

from tensat_py.builder import GraphBuilder
from tensat_py.graph import Graph
from tensat_py.models.resnet50 import bottleneck, stem

__all__ = ["resnext50"]


def resnext50(
    batch: int = 1,
    image: int = 224,
    groups: int = 32,
    blocks: tuple[int, ...] = (3, 4, 6, 3),
    widths: tuple[int, ...] = (128, 256, 512, 1024),
) -> Graph:
    """The ResNeXt-50 graph (defaults: Tensat's 1x3x224x224, 32 groups, 3/4/6/3 blocks).

    Raises:
        ValueError: mismatched ``blocks``/``widths``, a width not divisible by
            ``groups``, or a size that is not positive.
    """
    if len(blocks) != len(widths) or min(batch, image, groups, *blocks) < 1:
        raise ValueError("resnext50: need positive sizes and one width per stage")
    if any(w % groups for w in widths):
        raise ValueError(f"resnext50: widths {widths} must be multiples of groups={groups}")
    b = GraphBuilder()
    t = stem(b, b.input((batch, 3, image, image), name="image"))
    for stage, (n, width) in enumerate(zip(blocks, widths, strict=True)):
        for i in range(n):
            stride = 2 if (i == 0 and stage > 0) else 1
            t = bottleneck(b, t, width, stride, expansion=2, groups=groups)
    return b.finish(t)
