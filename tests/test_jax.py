"""tensat_py.jax: optimize(f, *args) returns verified HLO that computes f; jit(f) runs the
optimised XLA executable once per signature, and jax.jit(f) where it could not, saying so.
The example in docs/jax.md runs."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensat_py.jax as tj
from tensat_py.runtime.xla_exec import run_text

ROOT = Path(__file__).resolve().parents[1]
RNG = np.random.default_rng(0)
#: The analytic model, so that what is optimised does not depend on this machine's
#: timings (the default for HLO on the CPU is the measured ``xla`` model, confirmed).
ANALYTIC = {"cost_model": "roofline", "confirm": False}


def _mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"], jnp.sum(h)


def _attention(q, k, v):
    s = q @ k.T / np.float32(np.sqrt(q.shape[-1]))
    return jax.nn.softmax(s, axis=-1) @ v


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _mlp_args(batch=16):
    params = {"w1": _f32(64, 128), "b1": _f32(128), "w2": _f32(128, 32), "b2": _f32(32)}
    return params, _f32(batch, 64)


def _close(got, want):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for a, b in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("f", "args"),
    [(_mlp, _mlp_args()), (_attention, (_f32(32, 16), _f32(32, 16), _f32(32, 16)))],
    ids=["mlp", "attention"],
)
def test_optimize_returns_verified_hlo_that_computes_f(f, args):
    opt = tj.optimize(f, *args, time_limit=20, **ANALYTIC)
    assert opt.optimized and opt.report is not None and opt.report.passed
    assert opt.result.device == "cpu" and opt.result.speedup > 1.0
    assert opt.hlo.startswith("HloModule") and opt.hlo != opt.input_hlo
    # The module's parameters are the flattened arguments, in order; its results the
    # flattened outputs.
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    got = run_text(opt.hlo, leaves)
    want = jax.tree_util.tree_leaves(f(*args))
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-4)
    assert "predicted" in opt.summary() and "verified" in repr(opt)


def test_optimize_leaves_the_callers_64_bit_mode_as_it_was():
    before = jax.config.read("jax_enable_x64")  # other tests ran HLO through xla_exec
    jax.config.update("jax_enable_x64", False)
    try:
        tj.optimize(_attention, _f32(8, 4), _f32(8, 4), _f32(8, 4), time_limit=10, **ANALYTIC)
        assert not jax.config.read("jax_enable_x64")
        assert jnp.asarray(1.0).dtype == jnp.float32
    finally:
        jax.config.update("jax_enable_x64", before)


def test_jit_matches_jax_jit_and_optimises_once_per_signature():
    fast = tj.jit(_mlp, time_limit=20, **ANALYTIC)
    params, x = _mlp_args()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an optimised signature warns nothing
        out = fast(params, x)
    _close(out, jax.jit(_mlp)(params, x))
    assert isinstance(out, tuple) and fast.optimizations == 1
    status = fast.status(params, x)
    assert status is not None and status.runs == "tensat" and status.reason == ""
    params2, x2 = _mlp_args()  # same signature, other values
    _close(fast(params2, x2), jax.jit(_mlp)(params2, x2))
    assert fast.optimizations == 1
    _, x3 = _mlp_args(batch=4)  # a new signature
    _close(fast(params, x3), jax.jit(_mlp)(params, x3))
    assert fast.optimizations == 2 and len(fast.signatures) == 2
    assert fast.status(params, _f32(7, 64)) is None  # never called


def test_jit_falls_back_to_jax_jit_for_a_program_kept_as_lowered():
    fast = tj.jit(_mlp, time_limit=20, min_gain=0.99, **ANALYTIC)  # nothing gains 99 %
    params, x = _mlp_args()
    with pytest.warns(RuntimeWarning, match=r"running jax.jit .*kept as lowered"):
        out = fast(params, x)
    _close(out, jax.jit(_mlp)(params, x))
    status = fast.status(params, x)
    assert status.runs == "jax.jit" and "fallback-not-cheaper" in status.reason
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per signature
        _close(fast(params, x), jax.jit(_mlp)(params, x))
    assert fast.optimizations == 1


def test_jit_falls_back_for_a_function_that_calls_back_into_python():
    def noisy(x):
        jax.debug.print("x = {}", x)
        return jnp.tanh(x) * 2.0

    fast = tj.jit(noisy, time_limit=10)
    x = _f32(3)
    with pytest.warns(RuntimeWarning, match="running jax.jit"):
        out = fast(x)
    _close(out, jax.jit(noisy)(x))
    assert fast.status(x).runs == "jax.jit" and "Python" in fast.status(x).reason


def test_the_default_cost_model_is_the_measured_xla_one_on_the_cpu():
    def lora(x, w, a, b):
        return x @ (w + 2.0 * (a @ b))

    args = (_f32(32, 256), _f32(256, 256), _f32(256, 4), _f32(4, 256))
    opt = tj.optimize(lora, *args, time_limit=20)
    assert opt.result.cost_model == "xla" and opt.result.device == "cpu"
    assert opt.report is not None and opt.report.passed
    got = run_text(opt.hlo, [np.asarray(a) for a in args])
    np.testing.assert_allclose(got[0], np.asarray(lora(*args)), rtol=1e-4, atol=1e-3)


def test_the_docs_example_runs(capsys):
    text = (ROOT / "docs" / "jax.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "docs/jax.md has no python example"
    for block in blocks:
        exec(compile(block, "docs/jax.md", "exec"), {"__name__": "docs_jax"})
    printed = capsys.readouterr().out
    assert "verified: ok" in printed
    # The program is confirmed on XLA by default: timing decides which of the two runs.
    assert printed.strip().splitlines()[-1] in ("tensat", "jax.jit")


def test_the_summary_says_when_a_kept_program_was_priced_with_estimates():
    from tensat_py.graph import Graph
    from tensat_py.result import OptimizeResult

    note = "3 operator prices are roofline cpu estimates, not measurements"
    res = OptimizeResult(Graph(), 2.0, 1.0, "optimal", message=note, cost_model="xla")
    res.device = "cpu"
    assert note not in tj.Optimized("", "", res, None, None).summary()  # all measured
    res.stats["pricing"] = {"estimated": 3}
    assert note in tj.Optimized("", "", res, None, None).summary()
