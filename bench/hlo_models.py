"""Dump unoptimised HLO modules of public-model-style JAX code for ``tensat bench hlo``.

Each function below is written the way Flax/Haiku/Optax code computes it (MLPs, attention,
layer norm, convolutions, pooling, optimiser steps, losses and their gradients), with
parameters as arguments so the modules hold no large constants. ``jax.jit(f).lower(...)
.as_text(dialect="hlo")`` gives the module before any XLA pass.

    python bench/hlo_models.py bench/hlo_modules
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

F = jnp.float32


def _s(*shape: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, F)


def dense(x: Any, w: Any, b: Any) -> Any:
    return x @ w + b


def layer_norm(x: Any, g: Any, b: Any, eps: float = 1e-6) -> Any:
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + eps) * g + b


def mlp_relu(x, w1, b1, w2, b2):  # noqa: ANN001, ANN201
    return dense(jax.nn.relu(dense(x, w1, b1)), w2, b2)


def mlp_gelu(x, w1, b1, w2, b2):  # noqa: ANN001, ANN201
    return dense(jax.nn.gelu(dense(x, w1, b1), approximate=True), w2, b2)


def mlp_tanh3(x, w1, w2, w3):  # noqa: ANN001, ANN201
    return jnp.tanh(jnp.tanh(x @ w1) @ w2) @ w3


def mlp_loss_grad(x, y, w1, w2):  # noqa: ANN001, ANN201
    def loss(ws):  # noqa: ANN001, ANN202
        h = jax.nn.relu(x @ ws[0])
        return jnp.mean(jnp.square(h @ ws[1] - y))

    return jax.grad(loss)((w1, w2))


def softmax_xent(logits, labels):  # noqa: ANN001, ANN201
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.sum(labels * logp, axis=-1))


def attention(q, k, v):  # noqa: ANN001, ANN201
    s = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def mha(x, wq, wk, wv, wo):  # noqa: ANN001, ANN201
    b, t, d = x.shape
    h = 4

    def split(z):  # noqa: ANN001, ANN202
        return z.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(d // h))
    o = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)
    return o.transpose(0, 2, 1, 3).reshape(b, t, d) @ wo


def transformer_block(x, g1, b1, wq, wk, wv, wo, g2, b2, w1, w2):  # noqa: ANN001, ANN201
    h = x + mha(layer_norm(x, g1, b1), wq, wk, wv, wo)
    return h + jax.nn.gelu(layer_norm(h, g2, b2) @ w1) @ w2


def layernorm_only(x, g, b):  # noqa: ANN001, ANN201
    return layer_norm(x, g, b)


def conv_nhwc(x, w, b):  # noqa: ANN001, ANN201
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    return jax.nn.relu(y + b)


def conv_nchw_stride(x, w):  # noqa: ANN001, ANN201
    return jax.lax.conv_general_dilated(x, w, (2, 2), "VALID")


def depthwise_conv(x, w):  # noqa: ANN001, ANN201
    c = x.shape[-1]
    return jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=c
    )


def conv_bn_relu6(x, w, mean, var, scale, bias):  # noqa: ANN001, ANN201
    y = jax.lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    y = (y - mean) * jax.lax.rsqrt(var + 1e-3) * scale + bias
    return jnp.clip(y, 0.0, 6.0)


def maxpool(x):  # noqa: ANN001, ANN201
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")


def avgpool(x):  # noqa: ANN001, ANN201
    s = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return s / 4.0


def resnet_block(x, w1, w2):  # noqa: ANN001, ANN201
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(jax.lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=dn))
    h = jax.lax.conv_general_dilated(h, w2, (1, 1), "SAME", dimension_numbers=dn)
    return jax.nn.relu(x + h)


def cnn_classifier(x, w1, w2, wd):  # noqa: ANN001, ANN201
    dn = ("NHWC", "HWIO", "NHWC")
    h = jax.nn.relu(jax.lax.conv_general_dilated(x, w1, (2, 2), "SAME", dimension_numbers=dn))
    h = jax.nn.relu(jax.lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=dn))
    return jax.nn.log_softmax(jnp.mean(h, axis=(1, 2)) @ wd)


def sgd_step(w, g):  # noqa: ANN001, ANN201
    return w - 0.01 * g


def momentum_step(w, m, g):  # noqa: ANN001, ANN201
    m = 0.9 * m + g
    return w - 0.01 * m, m


def adam_step(w, m, v, g):  # noqa: ANN001, ANN201
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mh = m / (1 - b1)
    vh = v / (1 - b2)
    return w - lr * mh / (jnp.sqrt(vh) + eps), m, v


def adamw_step(w, m, v, g):  # noqa: ANN001, ANN201
    b1, b2, lr, eps, wd = 0.9, 0.999, 1e-3, 1e-8, 1e-2
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * jnp.square(g)
    upd = (m / (1 - b1)) / (jnp.sqrt(v / (1 - b2)) + eps)
    return w - lr * (upd + wd * w), m, v


def rmsprop_step(w, s, g):  # noqa: ANN001, ANN201
    s = 0.9 * s + 0.1 * g * g
    return w - 0.01 * g / jnp.sqrt(s + 1e-6), s


def gru_cell(x, h, wz, uz, wr, ur, wh, uh):  # noqa: ANN001, ANN201
    z = jax.nn.sigmoid(x @ wz + h @ uz)
    r = jax.nn.sigmoid(x @ wr + h @ ur)
    hh = jnp.tanh(x @ wh + (r * h) @ uh)
    return (1 - z) * h + z * hh


def logsumexp_rows(x):  # noqa: ANN001, ANN201
    return jax.nn.logsumexp(x, axis=-1)


def l2_normalize(x):  # noqa: ANN001, ANN201
    return x / jnp.sqrt(jnp.sum(x * x, axis=-1, keepdims=True) + 1e-12)


def one_hot_xent(logits, ids):  # noqa: ANN001, ANN201
    oh = jax.nn.one_hot(ids, logits.shape[-1])
    return -jnp.sum(oh * jax.nn.log_softmax(logits), axis=-1).mean()


def swiglu(x, w1, w2, w3):  # noqa: ANN001, ANN201
    return (jax.nn.silu(x @ w1) * (x @ w2)) @ w3


def rms_norm(x, g):  # noqa: ANN001, ANN201
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def exp_log_chain(x):  # noqa: ANN001, ANN201
    return jnp.log(jnp.exp(x)) / jnp.exp(x) + jnp.power(x, 2.0) / 1.0


def linear_attention(q, k, v):  # noqa: ANN001, ANN201
    # Katharopoulos et al. 2020 ("Transformers are RNNs"), eq. 4 written as it reads:
    # similarity matrix first, then the weighted sum and its normaliser.
    fq = jax.nn.elu(q) + 1.0
    fk = jax.nn.elu(k) + 1.0
    scores = fq @ jnp.swapaxes(fk, -1, -2)
    return (scores @ v) / jnp.sum(scores, axis=-1, keepdims=True)


def lora_dense(x, w, a, b, bias):  # noqa: ANN001, ANN201
    # LoRA (Hu et al. 2021) with the low-rank update folded into the weight, W + s A B.
    return x @ (w + (a @ b) * 2.0) + bias


def gcn_layer(adj, x, w, b):  # noqa: ANN001, ANN201
    # Graph convolution (Kipf and Welling 2017), relu(A X W + b) written left to right.
    return jax.nn.relu(adj @ x @ w + b)


B, D, H, T = 32, 256, 512, 64
MODELS: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
    "mlp_relu": (mlp_relu, (_s(B, D), _s(D, H), _s(H), _s(H, D), _s(D))),
    "mlp_gelu": (mlp_gelu, (_s(B, D), _s(D, H), _s(H), _s(H, D), _s(D))),
    "mlp_tanh3": (mlp_tanh3, (_s(B, D), _s(D, D), _s(D, D), _s(D, 10))),
    "mlp_loss_grad": (mlp_loss_grad, (_s(B, D), _s(B, 10), _s(D, H), _s(H, 10))),
    "softmax_xent": (softmax_xent, (_s(B, 1000), _s(B, 1000))),
    "attention": (attention, (_s(8, T, 64), _s(8, T, 64), _s(8, T, 64))),
    "mha": (mha, (_s(4, T, D), _s(D, D), _s(D, D), _s(D, D), _s(D, D))),
    "transformer_block": (
        transformer_block,
        (
            _s(2, T, D),
            _s(D),
            _s(D),
            _s(D, D),
            _s(D, D),
            _s(D, D),
            _s(D, D),
            _s(D),
            _s(D),
            _s(D, 4 * D),
            _s(4 * D, D),
        ),
    ),
    "layernorm": (layernorm_only, (_s(B, T, D), _s(D), _s(D))),
    "conv_nhwc": (conv_nhwc, (_s(8, 32, 32, 16), _s(3, 3, 16, 32), _s(32))),
    "conv_nchw_stride": (conv_nchw_stride, (_s(8, 16, 32, 32), _s(32, 16, 3, 3))),
    "depthwise_conv": (depthwise_conv, (_s(8, 32, 32, 32), _s(3, 3, 1, 32))),
    "conv_bn_relu6": (
        conv_bn_relu6,
        (_s(8, 32, 32, 16), _s(3, 3, 16, 32), _s(32), _s(32), _s(32), _s(32)),
    ),
    "maxpool": (maxpool, (_s(8, 32, 32, 32),)),
    "avgpool": (avgpool, (_s(8, 32, 32, 32),)),
    "resnet_block": (resnet_block, (_s(4, 16, 16, 32), _s(3, 3, 32, 32), _s(3, 3, 32, 32))),
    "cnn_classifier": (
        cnn_classifier,
        (_s(8, 32, 32, 3), _s(3, 3, 3, 16), _s(3, 3, 16, 32), _s(32, 10)),
    ),
    "sgd_step": (sgd_step, (_s(D, H), _s(D, H))),
    "momentum_step": (momentum_step, (_s(D, H), _s(D, H), _s(D, H))),
    "adam_step": (adam_step, (_s(D, H), _s(D, H), _s(D, H), _s(D, H))),
    "adamw_step": (adamw_step, (_s(D, H), _s(D, H), _s(D, H), _s(D, H))),
    "rmsprop_step": (rmsprop_step, (_s(D, H), _s(D, H), _s(D, H))),
    "gru_cell": (gru_cell, (_s(B, D), _s(B, D)) + tuple(_s(D, D) for _ in range(6))),
    "logsumexp": (logsumexp_rows, (_s(B, 1000),)),
    "l2_normalize": (l2_normalize, (_s(B, D),)),
    "one_hot_xent": (one_hot_xent, (_s(B, 100), jax.ShapeDtypeStruct((B,), jnp.int32))),
    "swiglu": (swiglu, (_s(B, D), _s(D, H), _s(D, H), _s(H, D))),
    "rms_norm": (rms_norm, (_s(B, T, D), _s(D))),
    "exp_log_chain": (exp_log_chain, (_s(B, D),)),
    "linear_attention": (linear_attention, (_s(4, 1024, 64), _s(4, 1024, 64), _s(4, 1024, 64))),
    "lora_dense": (lora_dense, (_s(B, 1024), _s(1024, 1024), _s(1024, 8), _s(8, 1024), _s(1024))),
    "gcn_layer": (gcn_layer, (_s(2048, 2048), _s(2048, 256), _s(256, 32), _s(32))),
}


def dump(out: Path) -> list[Path]:
    """Write ``<name>.hlo`` for every model into ``out``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (fn, args) in MODELS.items():
        text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        p = out / f"jax_{name}.hlo"
        p.write_text(text)
        paths.append(p)
    return paths


if __name__ == "__main__":
    for p in dump(Path(sys.argv[1] if len(sys.argv) > 1 else "bench/hlo_modules")):
        print(p)
