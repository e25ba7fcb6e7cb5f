# ruff: noqa: E501  (HLO text keeps XLA's long instruction lines)
"""The HLO printer round trip as a property (issue 42, item 8).

For every module the parser reads, generated ones (JAX programs lowered to HLO text at
shapes hypothesis draws) and those in ``bench/hlo_modules``, ``tests/fixtures/hlo`` and,
beside a development checkout, ``../shared/data/hlo``:

(a) the printed module (``print_module(parse_module(text))``) and the module the translator
    writes back (``dumps(loads(text))`` with the shortcut that returns an unrewritten
    graph's source module turned off, so every operator prints through its ``to_hlo``) are
    accepted by XLA and compute what the original text computes on the same random
    arguments (``random_args``);
(b) the candidate the optimiser builds prints to text XLA parses and runs, with the
    original's output shapes and element types.

XLA's HLO text grammar is ``xla/hlo/parser/hlo_parser.cc`` (openxla/xla). Generated modules
are lowered with 64-bit types off (as JAX does by default): running HLO through
:mod:`tensat_py.runtime.xla_exec` turns them on for the whole process.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax

import tensat_py  # noqa: E402
from tensat_py.frontends.hlo import (  # noqa: E402
    dumps,
    loads,
    parse_module,
    print_module,
    random_args,
)
from tensat_py.runtime import xla_exec  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench" / "hlo_modules"
FIXTURES = REPO / "tests" / "fixtures" / "hlo"
SHARED = REPO.parent / "shared" / "data" / "hlo"  # beside a development checkout only
BIG = "efficientnet"  # batch 250 at 300x300: printed and compiled, never run here
#: Seconds the optimiser gets per module in (b): enough to build a candidate.
CANDIDATE_SECONDS = 1.0
S = jax.ShapeDtypeStruct
f32, i32, u32 = jnp.float32, jnp.int32, jnp.uint32


# ------------------------------------------------------------------------ the checks
def _same(ref: list[np.ndarray], out: list[np.ndarray], what: str) -> None:
    """Equal leaves: exactly for integers and booleans, to a few ulps for floats."""
    assert len(out) == len(ref), f"{what}: {len(out)} results, expected {len(ref)}"
    for k, (a, b) in enumerate(zip(ref, out, strict=True)):
        assert (b.shape, b.dtype) == (a.shape, a.dtype), f"{what}: result {k}"
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(b, a, err_msg=f"{what}: result {k}")
        else:
            tol = 1e-4 if a.dtype.itemsize >= 4 else 3e-2
            np.testing.assert_allclose(
                b.astype(np.float64),
                a.astype(np.float64),
                rtol=tol,
                atol=tol,
                equal_nan=True,
                err_msg=f"{what}: result {k}",
            )


def _translated(text: str, file: str) -> str:
    """``dumps(loads(text))`` through the operators' ``to_hlo`` (not the source module that
    an unrewritten graph prints as)."""
    g = loads(text, file)
    g.meta["hlo"] = dataclasses.replace(g.meta["hlo"], program=None)
    return dumps(g)


def check_round_trip(text: str, file: str = "<hlo>", *, run: bool = True) -> list[np.ndarray]:
    """Property (a); returns the original's results (empty without ``run``)."""
    module = parse_module(text, file)
    printed = print_module(module)
    assert parse_module(printed, file) == module
    translated = _translated(text, file)
    if not run:
        xla_exec.compile_text(printed)
        xla_exec.compile_text(translated)
        return []
    args = random_args(loads(text, file))
    ref = xla_exec.run_text(text, args)
    _same(ref, xla_exec.run_text(printed, args), f"{file}: printed")
    _same(ref, xla_exec.run_text(translated, args), f"{file}: translated")
    return ref


def check_candidate(text: str, file: str, ref: list[np.ndarray]) -> str:
    """Property (b); returns the candidate's text."""
    g = loads(text, file)
    result = tensat_py.optimize(
        g, time_limit=CANDIDATE_SECONDS, solver="highs", verify=False, progress=False
    )
    assert result.candidate is not None, result.extraction_status
    cand = dumps(result.candidate)
    out = xla_exec.run_text(cand, random_args(g))
    assert [(o.shape, o.dtype) for o in out] == [(r.shape, r.dtype) for r in ref]
    return cand


# ------------------------------------------------------- generated modules (JAX programs)
Draw = Callable[[st.SearchStrategy[Any]], Any]
Program = tuple[Callable[..., Any], list[Any]]  # the function and its arguments' specs


def _dims(draw: Draw, rank: int, lo: int = 1, hi: int = 5) -> tuple[int, ...]:
    return tuple(draw(st.integers(lo, hi)) for _ in range(rank))


@jax.jit
def _called(x: Any) -> Any:
    """A jitted helper: its callers' HLO calls it as a computation of its own."""
    return jnp.tanh(x) * 2.0 + 1.0


def random_sampling(draw: Draw) -> Program:
    """jax.random with threefry keys (shifts, xor/or, bitcast-convert, a while loop whose
    body calls the round function); a raw ``u32[2]`` key or a typed key's data."""
    shape = _dims(draw, draw(st.integers(1, 2)))
    n = draw(st.integers(2, 4))
    kinds = draw(
        st.lists(
            st.sampled_from(
                ["normal", "uniform", "bernoulli", "randint", "truncated", "gumbel", "fold"]
            ),
            min_size=1,
            max_size=3,
        )
    )

    def f(key: Any) -> Any:
        ks = jax.random.split(key, n)
        out = []
        for i, kind in enumerate(kinds):
            k = ks[i % n]
            if kind == "normal":
                out.append(jax.random.normal(k, shape))
            elif kind == "uniform":
                out.append(jax.random.uniform(k, shape, minval=-1.0, maxval=2.0))
            elif kind == "bernoulli":
                out.append(jax.random.bernoulli(k, 0.3, shape))
            elif kind == "randint":
                out.append(jax.random.randint(k, shape, 0, 10))
            elif kind == "truncated":
                out.append(jax.random.truncated_normal(k, -1.0, 1.0, shape))
            elif kind == "gumbel":
                out.append(jax.random.gumbel(k, shape))
            else:
                out.append(jax.random.fold_in(k, 3))
        return tuple(out)

    if draw(st.booleans()):
        return f, [S((2,), u32)]
    return (lambda kd: f(jax.random.wrap_key_data(kd))), [S((2,), u32)]


def loops(draw: Draw) -> Program:
    """fori_loop and while_loop (tuple carries, a body that calls another computation,
    a data-dependent trip count) and scan."""
    shape = _dims(draw, 2)
    trips = draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["fori", "while", "scan"]))

    def f(x: Any, n: Any) -> Any:
        if kind == "fori":
            return lax.fori_loop(0, trips, lambda i, c: _called(c) * 0.5 + i, x)
        if kind == "while":

            def body(c: Any) -> Any:
                return _called(c[0]) * 0.5, c[1] + 1, c[2] ^ (c[1] << 1)

            return lax.while_loop(lambda c: c[1] < n, body, (x, 0, jnp.uint32(7)))
        return lax.scan(lambda c, r: (jnp.tanh(c + r), c.sum()), x[0], x)

    return f, [S(shape, f32), S((), i32)]


def conditionals(draw: Draw) -> Program:
    """lax.cond (boolean and integer predicates, tuple operands) and lax.switch whose
    branches call other computations."""
    shape = _dims(draw, draw(st.integers(1, 2)))
    branches = draw(st.integers(2, 4))
    use_switch = draw(st.booleans())

    def f(i: Any, x: Any) -> Any:
        if use_switch:
            fns = [jnp.sin, lambda y: -y, _called, lambda y: y * y][:branches]
            return lax.switch(i, fns, x)
        return lax.cond(
            i > 1, lambda a, b: (a * 2.0, b + 1), lambda a, b: (_called(a), b * 3), x, i
        )

    return f, [S((), i32), S(shape, f32)]


def bits(draw: Draw) -> Program:
    """Bit operations on unsigned and small integers: shifts, and/or/xor/not, population
    count, count leading zeros, bitcast-convert to and from f32, big u32 constants."""
    shape = _dims(draw, draw(st.integers(1, 2)))
    small = draw(st.sampled_from([jnp.uint8, jnp.int8, jnp.uint16, jnp.int16]))
    s = draw(st.integers(1, 7))

    def f(a: Any, b: Any, x: Any, c: Any) -> Any:
        return (
            (a << s) ^ (b >> 1),
            a & b | ~a,
            lax.population_count(a),
            lax.clz(b),
            lax.shift_right_arithmetic(a.astype(i32), jnp.int32(s)),
            lax.bitcast_convert_type(x, u32) >> 9,
            lax.bitcast_convert_type((a >> 9) | jnp.uint32(0x3F800000), f32),
            a * jnp.uint32(0x9E3779B9) + jnp.uint32(3000000000),
            (c << 1) ^ c,
            c.max(),
        )

    return f, [S(shape, u32), S(shape, u32), S(shape, f32), S(shape, small)]


def reductions(draw: Draw) -> Program:
    """reduce over drawn axes (sum, max, min, prod, argmax: a variadic reduce), mean,
    logsumexp, cumulative sums (reduce-window) and windowed max."""
    shape = _dims(draw, 3, 2, 4)
    axes = tuple(sorted(draw(st.sets(st.integers(0, 2), min_size=1, max_size=3))))
    ax = draw(st.integers(0, 2))

    def f(x: Any, m: Any) -> Any:
        return (
            x.sum(axes),
            x.max(axes),
            x.min(ax),
            x.prod(ax),
            jnp.argmax(x, ax),
            jnp.mean(x, axes),
            jax.nn.logsumexp(x, ax),
            jnp.cumsum(x, ax),
            lax.reduce_window(x, -jnp.inf, lax.max, (2, 1, 2), (1, 1, 1), "SAME"),
            m.max(ax),
            m.sum(),
            (x > 0).any(ax),
        )

    return f, [S(shape, f32), S(shape, u32)]


def dots(draw: Draw) -> Program:
    """dot_general: matmul, batched with drawn contracting sizes, mixed precision."""
    b, m, k, n = _dims(draw, 4)

    def f(x: Any, y: Any, z: Any, h: Any) -> Any:
        return (
            x @ y,
            jnp.einsum("bmk,kn->bnm", x, z),
            jnp.dot(z.T, z),
            jnp.dot(h, h.T, preferred_element_type=f32),
        )

    return f, [S((b, m, k), f32), S((b, k, n), f32), S((k, n), f32), S((m, k), jnp.bfloat16)]


def convolutions(draw: Draw) -> Program:
    """conv_general_dilated at drawn strides, padding, dilations, groups and layouts."""
    groups = draw(st.integers(1, 2))
    c = groups * draw(st.integers(1, 2))
    o = groups * draw(st.integers(1, 2))
    kh, kw = _dims(draw, 2, 1, 3)
    strides = _dims(draw, 2, 1, 2)
    rd = _dims(draw, 2, 1, 2)
    # at least the dilated kernel: no zero-sized result (a graph cannot return one)
    hw = tuple(draw(st.integers((k - 1) * d + 1, 7)) for k, d in zip((kh, kw), rd, strict=True))
    pad = draw(st.sampled_from(["SAME", "VALID", ((1, 0), (0, 2))]))
    layout = draw(st.sampled_from([("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC")]))
    ld = draw(st.integers(1, 2))
    x_shape = (1, c, *hw) if layout[0] == "NCHW" else (1, *hw, c)
    w_shape = (o, c // groups, kh, kw) if layout[1] == "OIHW" else (kh, kw, c // groups, o)

    def f(x: Any, w: Any) -> Any:
        y = lax.conv_general_dilated(
            x,
            w,
            strides,
            pad,
            rhs_dilation=rd,
            dimension_numbers=layout,
            feature_group_count=groups,
        )
        z = lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (0, 1)), lhs_dilation=(ld, 1), dimension_numbers=layout,
            feature_group_count=groups,
        )  # fmt: skip
        return y, z

    return f, [S(x_shape, f32), S(w_shape, f32)]


def integers_and_selects(draw: Draw) -> Program:
    """Integer arithmetic (C division and remainder, sign, clamp), comparisons, select."""
    shape = _dims(draw, draw(st.integers(1, 2)))

    def f(a: Any, b: Any, x: Any, y: Any) -> Any:
        return (
            a // (b + 1),
            a % (b + 1),
            lax.div(a - 2, b + 1),
            lax.rem(a - 2, b + 1),
            jnp.sign(a - 2),
            jnp.clip(a, 1, 2),
            jnp.maximum(a, b) * a - b,
            jnp.where(x > y, x, y * 2),
            jnp.where(a != b, 1.0, 0.0),
            (x >= 0) & (y < 1),
            lax.clamp(-0.5, x, 0.5),
            x.astype(i32),
            a.astype(f32) / 3,
        )

    return f, [S(shape, i32), S(shape, i32), S(shape, f32), S(shape, f32)]


def indexing(draw: Draw) -> Program:
    """iota, dynamic_slice / dynamic_update_slice, gather and scatter (add, set, max, mul),
    sort and top_k, pad, reverse, concatenate."""
    r, c = _dims(draw, 2, 3, 6)
    k = draw(st.integers(1, 3))

    def f(x: Any, i: Any, idx: Any) -> Any:
        ar = jnp.arange(c, dtype=f32)[None, :] * x
        s = lax.dynamic_slice(ar, (i, 1), (2, c - 1))
        return (
            lax.dynamic_update_slice(ar, s * 2, (i, 0)),
            jnp.arange(r * c).reshape(r, c),
            x[idx],
            x.at[idx].add(1.0),
            x.at[idx, 1].set(0.0),
            x.at[idx].max(0.5),
            jnp.take_along_axis(x, jnp.zeros((r, 1), i32) + 1, axis=1),
            jnp.sort(x, axis=1),
            lax.top_k(x, k),
            jnp.pad(x, ((1, 2), (0, 1))),
            lax.pad(x, 0.0, ((1, 1, 1), (0, 0, 0))),
            x[::-1],
            jnp.concatenate([x, x * 2], 1),
        )

    return f, [S((r, c), f32), S((), i32), S((k,), i32)]


def unusual_types(draw: Draw) -> Program:
    """Element types the language lacks inside the program (complex: FFT, f8, s4) and a
    zero-sized intermediate: regions of opaque HLO between graph values."""
    n = draw(st.integers(2, 6))

    def f(x: Any, i: Any) -> Any:
        z = lax.complex(x, x * 2)
        return (
            jnp.abs(jnp.fft.fft(x)) + 1.0,
            jnp.real(z * z),
            x.astype(jnp.float8_e4m3fn).astype(f32) * 2,
            (i.astype(jnp.int4) + jnp.int4(1)).astype(i32),
            x[:0].sum() + x,
        )

    return f, [S((2 * n,), f32), S((n,), i32)]


def linear_algebra(draw: Draw) -> Program:
    """LAPACK custom calls (Cholesky, LU solve) with non-default layouts."""
    n = draw(st.integers(2, 4))

    def f(a: Any) -> Any:
        spd = a @ a.T + n * jnp.eye(n)
        return jnp.linalg.cholesky(spd), jnp.linalg.solve(spd, a[0])

    return f, [S((n, n), f32)]


def elementwise(draw: Draw) -> Program:
    """Transcendental and rounding functions, 16-bit floats, tuple outputs nested."""
    shape = _dims(draw, draw(st.integers(1, 3)))

    def f(x: Any, h: Any) -> Any:
        return (
            (jnp.exp(x), jnp.log1p(jnp.abs(x))),
            (jnp.expm1(x), (jnp.floor(x), jnp.round(x))),
            jnp.arctan2(x, x + 1),
            jnp.power(jnp.abs(x), 1.5),
            jax.nn.gelu(x),
            jax.nn.relu6(x),
            lax.erf_inv(jnp.tanh(x)),
            jnp.isfinite(jnp.log(x)),
            h * 2 + 1,
            jnp.exp(h.astype(jnp.bfloat16)),
        )

    return f, [S(shape, f32), S(shape, jnp.float16)]


JAX_FAMILIES: dict[str, Callable[[Draw], Program]] = {
    f.__name__: f
    for f in (
        random_sampling,
        loops,
        conditionals,
        bits,
        reductions,
        dots,
        convolutions,
        integers_and_selects,
        indexing,
        unusual_types,
        linear_algebra,
        elementwise,
    )
}


def lower(program: Program) -> str:
    """The HLO text JAX lowers ``program`` to (64-bit types off)."""
    fn, specs = program
    with jax.enable_x64(False):
        return jax.jit(fn).lower(*specs).as_text(dialect="hlo")


# ------------------------------------------------- generated modules (HLO written here)
def tuples_and_computations(draw: Draw) -> str:
    """What JAX does not print: a tuple-shaped (nested) entry parameter, the two-branch
    ``conditional`` (true_computation/false_computation), ``select-and-scatter``
    (select=, scatter=), ``control-predecessors``, and a u64 constant beyond 2**53."""
    n = 2 * draw(st.integers(1, 4))
    r = draw(st.integers(1, 4))
    big = draw(st.integers(2**60, 2**64 - 1))
    return f"""HloModule tuples, entry_computation_layout={{(f32[{r},{n}]{{1,0}}, (f32[{n}]{{0}}, (s32[], u64[2]{{0}})))->(f32[{n},{r}]{{1,0}}, u64[2]{{0}}, f32[{n}]{{0}})}}

%t_branch (a: (f32[{n}], s32[])) -> f32[{n}] {{
  %a = (f32[{n}]{{0}}, s32[]) parameter(0)
  %v = f32[{n}]{{0}} get-tuple-element((f32[{n}]{{0}}, s32[]) %a), index=0
  ROOT %neg = f32[{n}]{{0}} negate(f32[{n}]{{0}} %v)
}}

%f_branch (b: f32[{n}]) -> f32[{n}] {{
  %b = f32[{n}]{{0}} parameter(0)
  ROOT %e = f32[{n}]{{0}} exponential(f32[{n}]{{0}} %b)
}}

%ge (x: f32[], y: f32[]) -> pred[] {{
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %c = pred[] compare(f32[] %x, f32[] %y), direction=GE
}}

%sum (x.1: f32[], y.1: f32[]) -> f32[] {{
  %x.1 = f32[] parameter(0)
  %y.1 = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %x.1, f32[] %y.1)
}}

ENTRY %main (p: f32[{r},{n}], t: (f32[{n}], (s32[], u64[2]))) -> (f32[{n},{r}], u64[2], f32[{n}]) {{
  %p = f32[{r},{n}]{{1,0}} parameter(0)
  %t = (f32[{n}]{{0}}, (s32[], u64[2]{{0}})) parameter(1)
  %v = f32[{n}]{{0}} get-tuple-element(%t), index=0
  %in = (s32[], u64[2]{{0}}) get-tuple-element(%t), index=1
  %i = s32[] get-tuple-element(%in), index=0
  %u = u64[2]{{0}} get-tuple-element(%in), index=1
  %big = u64[] constant({big})
  %bigb = u64[2]{{0}} broadcast(%big), dimensions={{}}
  %ux = u64[2]{{0}} xor(%u, %bigb)
  %tr = f32[{n},{r}]{{0,1}} transpose(%p), dimensions={{1,0}}
  %cp = f32[{n},{r}]{{1,0}} copy(%tr)
  %one = s32[] constant(1)
  %pr = pred[] compare(%i, %one), direction=GT
  %tt = (f32[{n}]{{0}}, s32[]) tuple(%v, %i)
  %cond = f32[{n}]{{0}} conditional(%pr, %tt, %v), true_computation=%t_branch, false_computation=%f_branch
  %init = f32[] constant(0)
  %src = f32[{n // 2}]{{0}} broadcast(%init), dimensions={{}}
  %ss = f32[{n}]{{0}} select-and-scatter(%cond, %src, %init), window={{size=2 stride=2}}, select=%ge, scatter=%sum, control-predecessors={{%cp}}
  ROOT %out = (f32[{n},{r}]{{1,0}}, u64[2]{{0}}, f32[{n}]{{0}}) tuple(%cp, %ux, %ss)
}}
"""


# ---------------------------------------------------------------------------- tests
#: Examples per generator: 2 here (the file runs in about a minute);
#: ``TENSAT_HLO_EXAMPLES=50`` (with ``TENSAT_HLO_RANDOM=1`` for fresh draws) searches longer.
_SETTINGS = settings(
    max_examples=int(os.environ.get("TENSAT_HLO_EXAMPLES", "2")),
    deadline=None,
    derandomize=not os.environ.get("TENSAT_HLO_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("family", list(JAX_FAMILIES))
@_SETTINGS
@given(data=st.data())
def test_generated_jax_modules_round_trip_and_their_candidates_run(family: str, data) -> None:
    text = lower(JAX_FAMILIES[family](data.draw))
    ref = check_round_trip(text, f"{family}.hlo")
    check_candidate(text, f"{family}.hlo", ref)


@_SETTINGS
@given(data=st.data())
def test_generated_tuple_modules_round_trip_and_their_candidates_run(data) -> None:
    text = tuples_and_computations(data.draw)
    ref = check_round_trip(text, "tuples.hlo")
    check_candidate(text, "tuples.hlo", ref)


def _files() -> list[Any]:
    """bench/hlo_modules and tests/fixtures/hlo always; ../shared/data/hlo where present."""
    cases = [pytest.param(p, id=f"bench:{p.name}") for p in sorted(BENCH.glob("*.hlo"))]
    cases += [pytest.param(p, id=f"fixture:{p.name}") for p in sorted(FIXTURES.glob("*.hlo"))]
    if SHARED.is_dir():
        cases += [pytest.param(p, id=f"shared:{p.name}") for p in sorted(SHARED.glob("*.hlo"))]
    else:
        reason = f"{SHARED} is absent (reference data beside a development checkout only)"
        cases.append(pytest.param(None, id="shared", marks=pytest.mark.skip(reason=reason)))
    return cases


@pytest.mark.parametrize("path", _files())
def test_module_files_round_trip_and_their_candidates_run(path: Path) -> None:
    text = path.read_text()
    if BIG in path.name:  # printed and compiled only: one run takes minutes and gigabytes
        check_round_trip(text, str(path), run=False)
        return
    ref = check_round_trip(text, str(path))
    check_candidate(text, str(path), ref)


# ------------------------------------------------------------- the bugs, one by one
def test_integer_constants_print_without_a_fraction_and_big_ones_exactly() -> None:
    # The writer printed `u64[] constant(16.0)` (XLA: "expects integer"), and a u64
    # literal beyond 2**53 went through a float.
    text = """HloModule m
ENTRY e {
  p = u64[3] parameter(0)
  c = u64[] constant(16)
  b = u64[3] broadcast(c), dimensions={}
  k = u64[] constant(18446744073709551557)
  kb = u64[3] broadcast(k), dimensions={}
  m = u64[3] multiply(p, b)
  ROOT x = u64[3] xor(m, kb)
}
"""
    args = [np.array([1, 2, 3], np.uint64)]
    out = xla_exec.run_text(_translated(text, "m.hlo"), args)[0]
    np.testing.assert_array_equal(out, (args[0] * np.uint64(16)) ^ np.uint64(2**64 - 59))


def test_instructions_of_types_the_language_lacks_become_one_opaque_region() -> None:
    # c64 inside the entry was an error at load; now complex -> multiply -> real is one
    # opaque node calling a computation of its own, printed back as it was.
    text = """HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  z = c64[4] complex(a, b)
  m = c64[4] multiply(z, z)
  r = f32[4] real(m)
  ROOT n = f32[4] negate(r)
}
"""
    g = loads(text)
    assert g.op_counts() == {"input": 2, "opaque": 1, "neg": 1}
    printed = _translated(text, "m.hlo")
    assert "%r.region" in printed and "complex(" in printed
    a, b = np.float32([1, 2, 3, 4]), np.float32([0.5, -1, 2, 0])
    np.testing.assert_allclose(xla_exec.run_text(printed, [a, b])[0], -(a * a - b * b))


def test_a_weight_without_a_literal_is_an_entry_parameter_not_unparsable_text() -> None:
    # It printed `constant({...})`, which no XLA parser reads; then it was an export
    # error; now (issue 41) a weight without values is a parameter after the inputs.
    from tensat_py.frontends.hlo import entry_leaves
    from tensat_py.graph import Graph

    g = Graph()
    x = g.add_input("x", (2, 3))
    g.outputs = [g.add_node("add", {}, [x, g.add_weight("w", (2, 3))])]
    text = dumps(g)
    assert "{...}" not in text and "%w = f32[2,3] parameter(1)" in text
    assert entry_leaves(g) == ["x", "w"]
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2.5, np.float32)
    np.testing.assert_array_equal(xla_exec.run_text(text, [a, b])[0], a + b)


def test_mixed_precision_dot_is_opaque_not_an_error() -> None:
    text = """HloModule m
ENTRY e {
  a = bf16[2,3] parameter(0)
  b = bf16[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    assert loads(text).op_counts() == {"input": 2, "opaque": 1}


def test_random_normal_optimises_verifies_and_its_written_module_runs(tmp_path: Path) -> None:
    # The module: threefry (a while loop whose body calls the round function),
    # erf_inv; its candidate printed `u64[] constant(16.0)` and XLA refused it.
    text = lower((lambda k: jax.random.normal(k, (8, 16)), [S((2,), u32)]))
    g = loads(text, "rn.hlo")
    start = time.perf_counter()
    result = tensat_py.optimize(g, time_limit=10, solver="highs", progress=False)
    assert time.perf_counter() - start < 20
    key = [np.array([0, 42], np.uint32)]
    ref = xla_exec.run_text(text, key)
    with jax.enable_x64(False):
        want = np.asarray(jax.random.normal(key[0], (8, 16)))
    np.testing.assert_allclose(ref[0], want, rtol=1e-6)
    # The candidate runs in XLA and agrees in float32 (verify's XLA tolerance, 1e-5 of the
    # largest magnitude).
    cand = xla_exec.run_text(dumps(result.candidate), key)[0]
    assert np.max(np.abs(cand - ref[0])) <= 1e-5 * np.max(np.abs(ref[0]))
    # What `tensat optimize rn.hlo -o out.hlo` writes runs and computes jax.random.normal.
    out = tmp_path / "out.hlo"
    tensat_py.save(result.graph, str(out))
    np.testing.assert_allclose(xla_exec.run_text(out.read_text(), key)[0], want, rtol=1e-4)
    report = result.verify
    assert report is not None and report.runner == "xla"
    # verified in float64 although its one input is a u32 key (the NumPy executor is told
    # to compute floats in float64, numpy_exec.run(float_dtype=...))
    assert report.passed, report
    assert report.message.startswith("ok (float64 on numpy")


def test_bitcast_reads_the_operand_in_its_layouts_physical_order() -> None:
    # A bitcast of a column-major array was translated as a row-major reshape.
    text = """HloModule m
ENTRY e {
  p = f32[3,4]{1,0} parameter(0)
  c = f32[3,4]{0,1} copy(p)
  flat = f32[12]{0} bitcast(c)
  t = f32[4,3]{1,0} bitcast(c)
  ROOT out = (f32[12]{0}, f32[4,3]{1,0}) tuple(flat, t)
}
"""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    flat, t = xla_exec.run_text(_translated(text, "m.hlo"), [a])
    np.testing.assert_array_equal(flat, a.T.reshape(-1))
    np.testing.assert_array_equal(t, a.T)


def test_a_module_with_lapack_custom_calls_runs_in_a_fresh_process(tmp_path: Path) -> None:
    # jaxlib loads its LAPACK kernels when JAX lowers jnp.linalg; running such a module
    # without that (`tensat optimize solve.hlo`) crashed the process (SIGSEGV).
    path = tmp_path / "solve.hlo"
    path.write_text(lower(linear_algebra(lambda strategy: 3)))
    code = (
        "import sys, numpy as np\n"
        "from tensat_py.frontends.hlo import load, random_args\n"
        "from tensat_py.runtime.xla_exec import run_text\n"
        "g = load(sys.argv[1])\n"
        "out = run_text(open(sys.argv[1]).read(), random_args(g))\n"
        "assert np.isfinite(out[0]).all()\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]


def test_side_effects_nothing_reads_are_kept_and_python_callbacks_refused() -> None:
    # jax.debug.print inside a called computation: its custom-call's result is unused, so
    # translation left it out and every rewritten candidate lost the print; running the
    # module outside JAX crashed the process.
    @jax.jit
    def inner(x: Any) -> Any:
        jax.debug.print("x={x}", x=x)
        return x + 1

    text = lower((lambda x: inner(x) * 2, [S((3,), f32)]))
    g = loads(text, "print.hlo")
    assert [ins.opcode for ins, _ in g.meta["hlo"].effects] == ["custom-call"]
    result = tensat_py.optimize(g, time_limit=CANDIDATE_SECONDS, verify=False)
    # Priced for XLA's CPU client (HLO's default device), which cannot run it: the default
    # confirmation steps aside and says why; asked for, it is an error.
    assert (result.cost_model, result.device) == ("xla", "cpu")
    assert "calls back into Python" in result.stats["confirm_skipped"]
    assert "not confirmed" in result.message
    with pytest.raises(ValueError, match="calls back into Python"):
        tensat_py.optimize(g, time_limit=CANDIDATE_SECONDS, verify=False, confirm=True)
    for printed in (_translated(text, "print.hlo"), dumps(result.candidate)):
        assert printed.count("xla_ffi_python_cpu_callback") == 1
        xla_exec.compile_text(printed)
        with pytest.raises(xla_exec.XlaError, match="calls back into Python"):
            xla_exec.run_text(printed, [np.ones(3, np.float32)])


def test_one_hot_reshape_chain_extracts_with_cycle_filtering() -> None:
    # Cycle filtering once left the root class of this chain (jax.nn.one_hot lowers to
    # it) with every e-node filtered: an e-node filtered elsewhere became its only one.
    text = """HloModule m
ENTRY main {
  idx = s32[2,2]{1,0} parameter(0)
  s = s32[2,1]{1,0} slice(idx), slice={[0:2], [0:1]}
  a = s32[2]{0} reshape(s)
  b = s32[2,1]{1,0} reshape(a)
  c = s32[2,1]{1,0} broadcast(b), dimensions={0,1}
  d = s32[2]{0} reshape(c)
  ROOT e = s32[2,4]{1,0} broadcast(d), dimensions={0}
}
"""
    check_candidate(text, "one_hot.hlo", check_round_trip(text, "one_hot.hlo"))
