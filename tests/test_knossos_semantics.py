"""The knossos dialect's operators carry their semantics (``tensat_py.ops.knossos``): the
syntax evaluator and the term executor both run the constructs through them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tensat_py import ops
from tensat_py.frontends.knossos import evaluate as ev
from tensat_py.frontends.knossos.lower import lower, opaque_count, signatures
from tensat_py.frontends.knossos.syntax import parse_file, parse_text
from tensat_py.ops import OpContext
from tensat_py.ops.knossos import CONSTRUCTS, EvalError, Given, TensorN
from tensat_py.runtime.knossos_exec import run_term

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "knossos"
ERRORS = (EvalError, RecursionError, ArithmeticError, ValueError, TypeError, IndexError)


def _run(op: str, args: list[Any], **params: Any) -> Any:
    return ops.get(op).evaluate(OpContext(op, params, (), None), args)


class _Raises:
    """An operand that must not be run."""

    def value(self) -> Any:
        raise AssertionError("ran an operand the construct must not run")

    def under(self, bindings: Any) -> Any:
        raise AssertionError("ran an operand the construct must not run")


class _Body:
    """A binder's body: the value of variable ``name`` (or of all bound names)."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def value(self) -> Any:
        raise AssertionError("a body runs under its bindings")

    def under(self, bindings: Any) -> Any:
        return tuple(bindings[n] for n in self.names)


def test_every_knossos_operator_evaluates_instead_of_raising() -> None:
    decls = {n for n, op in ops.all_ops().items() if op.dialect == "knossos"}
    assert decls == set(CONSTRUCTS)
    assert _run("build", [Given(3), Given(lambda i: i * i)]) == [0, 1, 4]
    m = _run("build", [Given((2, 3)), Given(lambda ix: ix[0] * 10 + ix[1])])
    assert isinstance(m, TensorN) and m.rank == 2 and m == [[0, 1, 2], [10, 11, 12]]
    assert _run("size", [Given(m)]) == (2, 3)
    assert _run("index", [Given((1, 2)), Given(m)]) == 12
    assert _run("sumbuild", [Given((2, 2)), Given(lambda ix: float(ix[0] + ix[1]))]) == 4.0
    assert _run("sum", [Given(m)]) == 36
    assert _run("tuple", [Given(1.0), Given(2)]) == (1.0, 2)
    assert _run("get", [Given((1.0, 2, "s"))], i=3, n=3) == "s"
    assert _run("if", [Given(False), _Raises(), Given(7)]) == 7
    assert _run("let", [Given((1, 2)), _Body("a", "b")], name=("a", "b")) == (1, 2)
    f = _run("lam", [_Body("x")], name="x", type="Float")
    assert f(2.5) == (2.5,)
    with pytest.raises(EvalError, match="assertion failed"):
        _run("assert", [Given(False), _Raises()])
    with pytest.raises(EvalError, match="out of range"):
        _run("index", [Given(3), Given([1.0, 2.0])])
    with pytest.raises(EvalError, match=r"get\$3\$2"):
        _run("get", [Given((1, 2))], i=3, n=2)


def test_the_syntax_evaluator_runs_constructs_through_the_opdefs(monkeypatch: Any) -> None:
    seen: list[str] = []
    for name, fn in list(ev._EVALUATE.items()):

        def spy(ctx: OpContext, args: Any, fn: Any = fn, name: str = name) -> Any:
            seen.append(name)
            return fn(ctx, args)

        monkeypatch.setitem(ev._EVALUATE, name, spy)
    p = parse_text(
        "(def f Float ((v : Vec Float))"
        " (let (t (tuple 2.0 (size v)))"
        "  (if (gt (get$1$2 t) 0.0)"
        "      (sumbuild (get$2$2 t) (lam (i : Integer) (index i v)))"
        "      0.0)))"
    )
    assert ev.run(p, "f", [[1.0, 2.0, 4.0]]) == 7.0
    assert {"let", "tuple", "size", "if", "get", "sumbuild", "lam", "index"} <= set(seen)


def _shared_defs() -> list[tuple[Any, Any]]:
    out = []
    for f in sorted(SHARED.glob("*.ks")):
        p = parse_file(str(f))
        out += [(p, d) for d in p.defs]
    return out


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/knossos is not beside the repo")
def test_terms_run_by_the_operators_agree_with_the_evaluator_on_the_shared_programs() -> None:
    ran = agreed = opaque = 0
    for p, d in _shared_defs():
        nodes, _ = lower(d, signatures(p), opaques=[])
        args = [ev.random_value(t, np.random.default_rng(0), 3) for _, t in d.params]
        try:
            want = ev.evaluate(p, d, args)
        except ERRORS:
            continue
        ran += 1
        got = ev.evaluate_term(p, nodes, [n for n, _ in d.params], args)
        assert ev.close(want, got), (d.name, want, got)
        agreed += 1
        opaque += opaque_count(nodes) > 0
    assert ran >= 60 and agreed == ran
    assert opaque >= 5  # untranslated sub-terms run through their side table too


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/knossos is not beside the repo")
def test_optimised_defs_run_as_terms_give_the_original_results() -> None:
    import tensat_py

    src = SHARED / "test__ksc__ex3.ks"
    original = parse_file(str(src))
    res = tensat_py.optimize(str(src), time_limit=30)
    optimised = res.graph.program
    changed = 0
    for old, new in zip(original.defs, optimised.defs, strict=True):
        if new == old:
            continue
        changed += 1
        nodes, _ = lower(new, signatures(optimised), opaques=[])
        args = [ev.random_value(t, np.random.default_rng(1), 3) for _, t in old.params]
        want = ev.evaluate(original, old, args)
        assert ev.close(want, ev.evaluate_term(optimised, nodes, [n for n, _ in new.params], args))
    assert changed >= 1


def test_scalar_arithmetic_in_a_term_runs_the_tensor_operators() -> None:
    p = parse_text(
        "(def f Float ((a : Integer) (b : Integer)) (to_float (add (div a b) (mul a 2))))"
    )
    nodes, _ = lower(p.defs[0], signatures(p))
    ops_used = {op for op, _ in nodes}
    assert {"div", "add", "mul", "cast"} <= ops_used
    assert ev.evaluate_term(p, nodes, ["a", "b"], [-7, 2]) == -3.0 + -14.0  # div truncates
    with pytest.raises(EvalError, match="unbound variable `b`"):
        run_term(nodes, {"a": 1}, ev._TermProgram(ev._Interp(p)))
