"""GPT-2-small-shaped transformer stacks as ONNX models, written with ``onnx.helper``.

Per layer (pre-norm, as GPT-2): LayerNormalization; separate q, k and v projections
(MatMul + Add); Reshape/Transpose into 12 heads; scaled scores (MatMul, Mul), Softmax,
MatMul with v; Transpose/Reshape back; output projection (MatMul + Add); residual Add;
LayerNormalization; MLP with GELU (MatMul + Add, Gelu as Mul/Erf/Add/Mul, MatMul + Add);
residual Add. Shapes: T tokens x d_model (default 128 x 768, 12 heads, MLP 4 x d_model),
float32, random weights (seeded), opset 20.

    python bench/gpt_stack.py --layers 12 --out gpt12.onnx
    python bench/gpt_stack.py --layers 12 --out gpt12.hlo   # the same stack in JAX, as HLO
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def gpt_stack(
    layers: int, tokens: int = 128, d_model: int = 768, heads: int = 12, seed: int = 0
) -> onnx.ModelProto:
    """A ``layers``-deep GPT-2-style stack: input ``x`` [tokens, d_model] float32, output
    ``y`` of the same shape. Weights are random normal with std 0.02 (biases 0.01)."""
    rng = np.random.default_rng(seed)
    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    dh = d_model // heads

    def w(name: str, shape: tuple[int, ...], std: float = 0.02) -> str:
        inits.append(
            numpy_helper.from_array((rng.standard_normal(shape) * std).astype(np.float32), name)
        )
        return name

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(value, name))
        return name

    def op(kind: str, ins: list[str], out: str, **attrs: object) -> str:
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    heads_shape = const("heads_shape", np.array([tokens, heads, dh], np.int64))
    flat_shape = const("flat_shape", np.array([tokens, d_model], np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(dh), np.float32))
    half = const("half", np.array(0.5, np.float32))
    one = const("one", np.array(1.0, np.float32))
    rsqrt2 = const("rsqrt2", np.array(1.0 / math.sqrt(2.0), np.float32))
    x = "x"
    for i in range(layers):
        p = f"l{i}_"
        g1, b1 = w(p + "ln1_g", (d_model,), 1.0), w(p + "ln1_b", (d_model,))
        h = op("LayerNormalization", [x, g1, b1], p + "ln1", axis=-1, epsilon=1e-5)
        qkv = []
        for n in ("q", "k", "v"):
            m = op("MatMul", [h, w(p + f"w{n}", (d_model, d_model))], p + f"{n}_mm")
            a = op("Add", [m, w(p + f"b{n}", (d_model,), 0.01)], p + f"{n}")
            r = op("Reshape", [a, heads_shape], p + f"{n}_heads")
            perm = [1, 2, 0] if n == "k" else [1, 0, 2]
            qkv.append(op("Transpose", [r], p + f"{n}_t", perm=perm))
        s = op("MatMul", [qkv[0], qkv[1]], p + "scores")
        s = op("Mul", [s, scale], p + "scaled")
        s = op("Softmax", [s], p + "probs", axis=-1)
        c = op("MatMul", [s, qkv[2]], p + "ctx")
        c = op("Transpose", [c], p + "ctx_t", perm=[1, 0, 2])
        c = op("Reshape", [c, flat_shape], p + "ctx_flat")
        o = op("MatMul", [c, w(p + "wo", (d_model, d_model))], p + "o_mm")
        o = op("Add", [o, w(p + "bo", (d_model,), 0.01)], p + "o")
        x1 = op("Add", [x, o], p + "res1")
        g2, b2 = w(p + "ln2_g", (d_model,), 1.0), w(p + "ln2_b", (d_model,))
        h2 = op("LayerNormalization", [x1, g2, b2], p + "ln2", axis=-1, epsilon=1e-5)
        f = op("MatMul", [h2, w(p + "w1", (d_model, 4 * d_model))], p + "fc1_mm")
        f = op("Add", [f, w(p + "b1", (4 * d_model,), 0.01)], p + "fc1")
        e = op("Mul", [f, rsqrt2], p + "gelu_s")
        e = op("Erf", [e], p + "gelu_erf")
        e = op("Add", [e, one], p + "gelu_1")
        e = op("Mul", [f, e], p + "gelu_m")
        e = op("Mul", [e, half], p + "gelu")
        f2 = op("MatMul", [e, w(p + "w2", (4 * d_model, d_model))], p + "fc2_mm")
        f2 = op("Add", [f2, w(p + "b2", (d_model,), 0.01)], p + "fc2")
        x = op("Add", [x1, f2], p + "res2")
    nodes.append(helper.make_node("Identity", [x], ["y"], name="y"))
    graph = helper.make_graph(
        nodes,
        f"gpt{layers}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, d_model])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, d_model])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model


def gpt_stack_hlo(layers: int, tokens: int = 128, d_model: int = 768, heads: int = 12) -> str:
    """The same stack as :func:`gpt_stack`, written in JAX and lowered to XLA HLO text
    (``jax.jit(f).lower(...).as_text(dialect="hlo")``): ``x`` [tokens, d_model] and every
    layer's weights are entry parameters (GELU with ``erf``; LayerNorm by hand)."""
    import jax
    import jax.numpy as jnp

    dh = d_model // heads

    def layer_norm(x, g, b):  # noqa: ANN001, ANN202
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean((x - m) ** 2, axis=-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * g + b

    def block(x, p):  # noqa: ANN001, ANN202
        h = layer_norm(x, p["ln1_g"], p["ln1_b"])
        q, k, v = (
            (h @ p[f"w{n}"] + p[f"b{n}"]).reshape(tokens, heads, dh).transpose(1, 0, 2)
            for n in "qkv"
        )
        s = jax.nn.softmax(q @ k.transpose(0, 2, 1) / math.sqrt(dh), axis=-1)
        c = (s @ v).transpose(1, 0, 2).reshape(tokens, d_model)
        x = x + c @ p["wo"] + p["bo"]
        h = layer_norm(x, p["ln2_g"], p["ln2_b"])
        f = h @ p["w1"] + p["b1"]
        f = 0.5 * f * (1.0 + jax.lax.erf(f / math.sqrt(2.0)))
        return x + f @ p["w2"] + p["b2"]

    def f(x, params):  # noqa: ANN001, ANN202
        for p in params:
            x = block(x, p)
        return x

    def spec(shape: tuple[int, ...]) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, jnp.float32)

    one = {f"w{n}": spec((d_model, d_model)) for n in "qkvo"}
    one |= {f"b{n}": spec((d_model,)) for n in "qkvo"}
    one |= {k: spec((d_model,)) for k in ("ln1_g", "ln1_b", "ln2_g", "ln2_b", "b2")}
    one |= {"w1": spec((d_model, 4 * d_model)), "b1": spec((4 * d_model,))}
    one |= {"w2": spec((4 * d_model, d_model))}
    return jax.jit(f).lower(spec((tokens, d_model)), [one] * layers).as_text(dialect="hlo")


def main(argv: list[str] | None = None) -> None:
    """Write one stack (``--layers``, ``--out``)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--out", type=Path, required=True, help="a .onnx or .hlo file")
    args = ap.parse_args(argv)
    if args.layers < 1:
        ap.error("--layers must be at least 1")
    if args.out.suffix == ".hlo":
        args.out.write_text(gpt_stack_hlo(args.layers, args.tokens, args.d_model))
    else:
        onnx.save(gpt_stack(args.layers, args.tokens, args.d_model), args.out)


if __name__ == "__main__":
    main()
