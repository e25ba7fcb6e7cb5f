"""Export public architectures with random weights to ONNX, for ``bench/onnx_real.py``.

Needs the bench-only extra (``pip install -e .[bench]``: torch, torchvision, transformers,
onnxscript); neither the package nor its tests import this file. Every model is built
from its library's public constructor or configuration class with random weights (seed
0, nothing downloaded; tensors the library initialises to one constant, such as zero
biases and unit normalisation scales, get small random noise as a trained model has), put
in eval mode and exported with ``torch.onnx.export`` at
opset 17 with a dynamic batch axis (symbolic, so ``bench/onnx_real.py`` has to fix it
with ``input_shapes=``, as a user would).

Usage::

    python bench/onnx_export.py --out /tmp/tensat_real      # every model
    python bench/onnx_export.py --out DIR --models resnet18 bert

Models (name: architecture, input):

* ``resnet18``: torchvision ResNet-18, ``x`` [N, 3, 224, 224];
* ``mobilenet_v3_small``: torchvision MobileNetV3-Small, ``x`` [N, 3, 224, 224];
* ``efficientnet_b0``: torchvision EfficientNet-B0, ``x`` [N, 3, 224, 224];
* ``squeezenet1_1``: torchvision SqueezeNet 1.1, ``x`` [N, 3, 224, 224];
* ``bert``: transformers ``BertModel`` (4 layers, hidden 256, 4 heads), ``input_ids``
  [N, 128] int64;
* ``gpt2``: transformers ``GPT2Model`` (4 layers, hidden 256, 4 heads), ``input_ids``
  [N, 128] int64;
* ``yolo_tiny``: a YOLO-style detector defined here (Conv-BN-SiLU backbone with CSP
  blocks, an FPN neck with nearest upsampling and concatenation, a detection head
  reshaped to [N, anchors, 85]), ``x`` [N, 3, 320, 320].
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Sequence length of the language models.
SEQ = 128


def _vision(name: str) -> Callable[[], tuple[Any, tuple, list[str], dict]]:
    def build():
        import torch
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        x = torch.randn(1, 3, 224, 224)
        return model, (x,), ["x"], {"x": {0: "batch"}}

    return build


def _Hidden(inner: Any) -> Any:  # noqa: N802  (a class factory)
    """Wraps a transformers model so that it maps ``input_ids`` to the last hidden state."""
    from torch import nn

    class Hidden(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids, use_cache=False).last_hidden_state

    return Hidden()


def _bert():
    import torch
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        vocab_size=8000,
    )
    model = _Hidden(BertModel(cfg))
    ids = torch.randint(0, 8000, (1, SEQ))
    return model, (ids,), ["input_ids"], {"input_ids": {0: "batch"}}


def _gpt2():
    import torch
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_embd=256, n_layer=4, n_head=4, vocab_size=8000, n_positions=SEQ)
    model = _Hidden(GPT2Model(cfg))
    ids = torch.randint(0, 8000, (1, SEQ))
    return model, (ids,), ["input_ids"], {"input_ids": {0: "batch"}}


def _yolo():
    import torch
    from torch import nn

    class ConvBnAct(nn.Module):
        def __init__(self, cin: int, cout: int, k: int = 3, s: int = 1) -> None:
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Csp(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.a = ConvBnAct(c, c // 2, 1)
            self.b = ConvBnAct(c, c // 2, 1)
            self.m = nn.Sequential(ConvBnAct(c // 2, c // 2, 1), ConvBnAct(c // 2, c // 2, 3))
            self.out = ConvBnAct(c, c, 1)

        def forward(self, x):
            return self.out(torch.cat([self.m(self.a(x)) + self.a(x), self.b(x)], 1))

    class Yolo(nn.Module):
        def __init__(self, nc: int = 80, na: int = 3) -> None:
            super().__init__()
            self.no, self.na = nc + 5, na
            self.stem = ConvBnAct(3, 16, 3, 2)
            self.s1 = nn.Sequential(ConvBnAct(16, 32, 3, 2), Csp(32))
            self.s2 = nn.Sequential(ConvBnAct(32, 64, 3, 2), Csp(64))
            self.s3 = nn.Sequential(ConvBnAct(64, 128, 3, 2), Csp(128))
            self.s4 = nn.Sequential(ConvBnAct(128, 256, 3, 2), Csp(256))
            self.pool = nn.MaxPool2d(5, 1, 2)
            self.lat = ConvBnAct(256, 128, 1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = Csp(256)
            self.head_s = nn.Conv2d(256, na * self.no, 1)
            self.head_l = nn.Conv2d(256, na * self.no, 1)

        def forward(self, x):
            x = self.s2(self.s1(self.stem(x)))
            p3 = self.s3(x)
            p4 = self.s4(p3)
            p4 = p4 + self.pool(p4)
            f = self.fuse(torch.cat([self.up(self.lat(p4)), p3], 1))
            outs = []
            for h, t in ((self.head_l, f), (self.head_s, p4)):
                y = h(t)
                n, _, hh, ww = y.shape
                y = y.view(n, self.na, self.no, hh, ww).permute(0, 1, 3, 4, 2)
                outs.append(torch.sigmoid(y.reshape(n, -1, self.no)))
            return torch.cat(outs, 1)

    model = Yolo()
    x = torch.randn(1, 3, 320, 320)
    return model, (x,), ["x"], {"x": {0: "batch"}}


#: name -> builder returning (module, example inputs, input names, dynamic axes).
MODELS: dict[str, Callable[[], tuple[Any, tuple, list[str], dict]]] = {
    "resnet18": _vision("resnet18"),
    "mobilenet_v3_small": _vision("mobilenet_v3_small"),
    "efficientnet_b0": _vision("efficientnet_b0"),
    "squeezenet1_1": _vision("squeezenet1_1"),
    "bert": _bert,
    "gpt2": _gpt2,
    "yolo_tiny": _yolo,
}


def _unconstant(model: Any, scale: float = 0.02) -> None:
    """Adds N(0, ``scale``) noise to every floating parameter or buffer whose elements are
    all equal (the libraries initialise biases to 0, normalisation scales and running
    variances to 1): a trained model has no such tensors, and an optimiser (or the loader's
    folding) could drop an ``x + 0`` or ``x * 1`` here that it never meets in practice."""
    import torch

    with torch.no_grad():
        for t in [*model.parameters(), *model.buffers()]:
            if t.is_floating_point() and t.numel() > 1 and bool(torch.all(t == t.flatten()[0])):
                t.add_(torch.randn_like(t) * scale)


def export(name: str, out_dir: Path, opset: int = 17) -> Path:
    """Builds model ``name`` (random weights, seed 0) and exports it to
    ``out_dir/<name>.onnx``; returns the path. Raises ``KeyError`` for an unknown name."""
    import torch

    torch.manual_seed(0)
    model, args, names, dynamic = MODELS[name]()
    model.eval()
    _unconstant(model)
    path = out_dir / f"{name}.onnx"
    with torch.no_grad():
        try:
            torch.onnx.export(
                model,
                args,
                str(path),
                input_names=names,
                dynamic_axes=dynamic,
                opset_version=opset,
                dynamo=False,
            )
        except torch.onnx.errors.UnsupportedOperatorError:
            # The TorchScript exporter lacks an operator (GPT-2's mask uses aten::diff):
            # the dynamo exporter (onnxscript), static shapes, at opset 18 at least. It
            # builds opset 18 and converts down; below 18 the conversion leaves Split's
            # opset-18 ``num_outputs`` attribute in place, which onnxruntime rejects
            # ("Unrecognized attribute: num_outputs for operator Split").
            prog = torch.onnx.export(
                model, args, input_names=names, opset_version=max(opset, 18), dynamo=True
            )
            prog.save(str(path))
    import onnx

    onnx.checker.check_model(str(path), full_check=True)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the .onnx files")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        print(export(name, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
