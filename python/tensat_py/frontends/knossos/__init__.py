"""The Knossos front end: ``.ks`` programs in and out, optimised def by def.

``load(path)`` parses a ``.ks`` file (:mod:`.syntax`) into a :class:`KsProgram`;
``optimize_program`` saturates each ``def`` with the knossos rule files plus one
``inline_call`` rule per user function, extracts the cheapest body under RLO's cost model
(``_core.EGraph.extract_rlo``, ``rust/src/ks_cost.rs``) and checks it against the original
with the evaluator (:mod:`.evaluate`) on random arguments; ``save`` prints it back.

>>> prog = parse_text("(def f Float ((x : Float)) (let (y (mul x 1.0)) (add y 0.0)))")
>>> r = optimize_program(KsProgram(prog))
>>> print_expr(r.program.program.defs[0].body), r.defs[0].cost_before, r.defs[0].cost_after
('x', 3.1, 0.0)
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensat_py.frontends.knossos.lower import (
    Signature,
    Untranslatable,
    lower,
    raise_term,
    signatures,
)
from tensat_py.frontends.knossos.syntax import (
    Const,
    Def,
    KsSyntaxError,
    Program,
    Var,
    parse_file,
    parse_text,
    print_expr,
    print_program,
)

__all__ = [
    "KsProgram",
    "DefResult",
    "KsOptimizeResult",
    "load",
    "save",
    "optimize_program",
    "function_costs",
    "DEFAULT_RULES",
    "KsSyntaxError",
    "parse_text",
    "print_expr",
]

#: The rule files ``.ks`` programs are optimised with by default.
DEFAULT_RULES = "knossos_simplify+knossos_binding"


@dataclass
class KsProgram:
    """A loaded ``.ks`` program (what :func:`load` returns instead of a tensor Graph).

    Attributes:
        program: the syntax tree.
        meta: front-end data (``meta["frontend"] == "knossos"``).
    """

    program: Program
    meta: dict[str, Any] = field(default_factory=lambda: {"frontend": "knossos"})


def load(path: str | os.PathLike[str], **options: Any) -> KsProgram:
    """Parse the ``.ks`` file at ``path``.

    Raises:
        ValueError: ``file:line:col: message`` on malformed or unsupported input.
    """
    if options:
        raise TypeError(f".ks files take no options, got {sorted(options)}")
    try:
        return KsProgram(parse_file(str(path)))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}:1:1: not UTF-8 text ({e.reason})") from None


def save(prog: KsProgram, path: str | os.PathLike[str], *, source: Any = None) -> Path:
    """Write ``prog`` as ``.ks`` text to ``path`` atomically; returns the path."""
    del source
    out = Path(path)
    fd, tmp = tempfile.mkstemp(dir=out.parent or ".", suffix=".ks.tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(print_program(prog.program))
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


@dataclass
class DefResult:
    """What optimisation did to one def.

    Attributes:
        name: the def's name.
        cost_before: RLO cost of the original body (RLO units).
        cost_after: RLO cost of the kept body (``<= cost_before``).
        status: ``"optimised"``, ``"unchanged"`` (nothing cheaper), ``"untranslatable"``
            (kept as is; ``message`` says why), ``"unpriced"`` (an operator RLO's model
            does not price, such as ``tanh``; kept as is) or ``"failed-verification"``.
        seconds: exploration plus extraction time.
        stats: the Rust core's exploration statistics.
        message: a note.
    """

    name: str
    cost_before: float
    cost_after: float
    status: str
    seconds: float = 0.0
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""


@dataclass
class KsOptimizeResult:
    """The optimised program and per-def results; costs summed over the translated defs."""

    program: KsProgram
    defs: list[DefResult]

    @property
    def cost_before(self) -> float:
        """Sum of the defs' costs before."""
        return sum(d.cost_before for d in self.defs)

    @property
    def cost_after(self) -> float:
        """Sum of the defs' costs after."""
        return sum(d.cost_after for d in self.defs)

    def verify_summary(self) -> dict[str, Any] | None:
        """What the evaluator said about the changed defs (None when no def changed and
        none failed): ``runner`` ``"knossos-evaluator"``, ``passed`` (every changed def
        compared equal on random arguments), ``verified``/``unverified``/``failed`` def
        names (unverified: the evaluator could not run the original, or ``verify=False``;
        failed: every candidate differed, the def was kept)."""
        changed = [d for d in self.defs if d.status == "optimised"]
        failed = [d.name for d in self.defs if d.status == "failed-verification"]
        if not changed and not failed:
            return None
        verified = [d.name for d in changed if d.message == "verified"]
        unverified = [d.name for d in changed if d.message != "verified"]
        return {
            "runner": "knossos-evaluator",
            "passed": not failed and not unverified,
            "verified": verified,
            "unverified": unverified,
            "failed": failed,
        }

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` object: the usual keys (costs in RLO's unitless cost
        units, ``speedup`` predicted by RLO's cost model) plus ``defs``."""
        keys = ("enodes", "eclasses", "iterations", "stop_reason", "explore_seconds")
        after = self.cost_after
        return {
            "cost_model": "rlo",
            "device": "",
            "unit": "RLO cost units",
            "speedup": self.cost_before / after if after > 0 else 1.0,
            "speedup_kind": "predicted",
            "speedup_basis": "rlo cost model (knossos-ksc RLO costs), no device",
            "measured": None,
            "cost_before": self.cost_before,
            "cost_after": self.cost_after,
            "extraction_status": "greedy",
            "stats": {
                k: sum(d.stats.get(k, 0) for d in self.defs)
                for k in keys
                if k not in ("stop_reason",)
            },
            "verify": self.verify_summary(),
            "defs": [
                {
                    "name": d.name,
                    "cost_before": d.cost_before,
                    "cost_after": d.cost_after,
                    "status": d.status,
                    "seconds": d.seconds,
                    "message": d.message,
                }
                for d in self.defs
            ],
        }


def _constant_body(d: Def) -> float | None:
    return (
        float(d.body.value)
        if isinstance(d.body, Const) and not isinstance(d.body.value, (bool, str))
        else None
    )


def function_costs(prog: Program) -> dict[str, float]:
    """Cost of calling each function besides the call overhead and arguments, in RLO's
    way: a ``cost$f`` def with a constant body gives ``f``'s; otherwise a def's cost is
    its body's (defs priced in file order, so a def calling a later or recursive one
    pays RLO's default edef cost 7 for it)."""
    from tensat_py import _core

    sigs = signatures(prog)
    out: dict[str, float] = {}
    for d in prog.defs:
        if d.name.startswith("cost$"):
            c = _constant_body(d)
            if c is not None:
                out[d.name[len("cost$") :]] = c
    for d in prog.defs:
        if d.name in out:
            continue
        try:
            nodes, _ = lower(d, sigs)
            c = _core.rlo_cost(nodes, out)
            if c != float("inf"):
                out[d.name] = c
        except (Untranslatable, ValueError):
            continue
    return out


def _inline_rules(prog: Program, sigs: dict[str, Signature]) -> str:
    """One ``inline_call`` rule per non-recursive translatable def: the call becomes the
    body under lets binding fresh parameter names (``x$f``) to the arguments."""
    from tensat_py.frontends.knossos.lower import _Flat, _Lower, type_text

    lines = []
    for d in prog.defs:
        if d.name.startswith(("cost$", "[")) or not d.params:
            continue
        renamed = {p: f"{p}${d.name}" for p, _ in d.params}
        body = _rename(d.body, renamed)
        try:
            f = _Flat()
            env = {renamed[p]: t for p, t in d.params}
            root, _ = _Lower(sigs).expr(body, env, f)
            text = _flat_text(f.nodes, root)
            ret = type_text(d.ret)
            for _, t in d.params:
                type_text(t)
        except Untranslatable:
            continue
        if f"(call {d.name} " in text:
            continue  # recursive
        args = " ".join(f"?a{i}" for i in range(len(d.params)))
        tgt = text
        for i, (p, _) in reversed(list(enumerate(d.params))):
            tgt = f"(let {renamed[p]} ?a{i} {tgt})"
        lines.append(f"inline_call_{len(lines)}: (call {d.name} {ret} {args}) => {tgt}")
    return "\n".join(lines) + "\n"


def _flat_text(nodes: list[tuple[str, list[int]]], i: int) -> str:
    op, ch = nodes[i]
    if not ch:
        return op
    return "(" + " ".join([op, *(_flat_text(nodes, c) for c in ch)]) + ")"


def _rename(e: Any, names: dict[str, str]) -> Any:
    """``e`` with the free variables in ``names`` renamed (binders shadow)."""
    from tensat_py.frontends.knossos.syntax import Assert, Call, If, Lam, Let

    if not names:
        return e
    if isinstance(e, Var):
        return Var(names.get(e.name, e.name), e.pos)
    if isinstance(e, Let):
        inner = {k: v for k, v in names.items() if k not in e.vars}
        return Let(e.vars, _rename(e.rhs, names), _rename(e.body, inner), e.tupled, e.pos)
    if isinstance(e, Lam):
        inner = {k: v for k, v in names.items() if k != e.var}
        return Lam(e.var, e.type, _rename(e.body, inner), e.pos)
    if isinstance(e, If):
        return If(*(_rename(x, names) for x in (e.cond, e.then, e.other)), e.pos)
    if isinstance(e, Assert):
        return Assert(_rename(e.cond, names), _rename(e.body, names), e.pos)
    if isinstance(e, Call):
        return Call(e.name, tuple(_rename(a, names) for a in e.args), e.pos)
    return e


def optimize_program(
    prog: KsProgram,
    *,
    rules: Any = None,
    node_limit: int = 20_000,
    iter_limit: int = 12,
    time_limit: float = 8.0,
    verify: bool = True,
    only: set[str] | None = None,
    fold_constants: bool = True,
    hoist: bool = True,
    rounds: int = 3,
) -> KsOptimizeResult:
    """Optimise every def of ``prog`` (or those named in ``only``) by equality saturation
    under RLO's cost model.

    Args:
        rules: rule files (names, paths or a ``RuleSet``); default :data:`DEFAULT_RULES`.
            The per-program ``inline_call`` rules are always added.
        node_limit, iter_limit, time_limit: exploration limits per def (seconds).
        verify: evaluate original and optimised def on random arguments (:mod:`.evaluate`)
            and keep the original when they differ.
        fold_constants: add the Rust core's constant-folding rules
            (``_core.RuleSet.constant_folding()``, RLO's ``cprop_*``).
        hoist: also try the extracted and the original def with loop invariants hoisted
            (:mod:`.hoist`); the cheapest candidate the evaluator accepts is kept.
        rounds: with ``hoist``, how many times the cheapest candidate is saturated and
            hoisted again.

    Returns:
        the program with optimised bodies and per-def results (costs in RLO units).
    """
    from tensat_py import _core
    from tensat_py.frontends.knossos import evaluate
    from tensat_py.frontends.knossos.hoist import hoist_def
    from tensat_py.pipeline import load_rules

    p = prog.program
    sigs = signatures(p)
    costs = function_costs(p)
    base = load_rules(rules if rules is not None else DEFAULT_RULES)
    inline_text = _inline_rules(p, sigs)
    # Constant folding (RLO's cprop_* rules) is built into the Rust core: the folded
    # value cannot be written in the rule DSL. It is added unless disabled.
    sets = [base]
    if fold_constants:
        sets.append(_core.RuleSet.constant_folding())
    if inline_text.strip():
        sets.append(_core.RuleSet.parse(inline_text, "<inline_call>"))
    ruleset = _core.RuleSet.union(sets) if len(sets) > 1 else base
    results: list[DefResult] = []
    new_items = list(p.items)

    def saturate_extract(flat: Any) -> tuple[dict[str, Any], float, Any]:
        """Saturate ``flat`` under the rule set; its stats and RLO-cheapest term."""
        eg = _core.EGraph(flat)
        st = eg.saturate(
            ruleset,
            k_multi=0,
            node_limit=node_limit,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cycle_filter="none",
        )
        return (dict(st), *eg.extract_rlo(costs))

    for idx, item in enumerate(p.items):
        if not isinstance(item, Def) or (only is not None and item.name not in only):
            continue
        start = time.perf_counter()
        try:
            nodes, _ = lower(item, sigs)
        except Untranslatable as e:
            results.append(DefResult(item.name, 0.0, 0.0, "untranslatable", message=str(e)))
            continue
        before = _core.rlo_cost(nodes, costs)
        if before == float("inf"):
            results.append(
                DefResult(
                    item.name, 0.0, 0.0, "unpriced", message="uses an operator RLO does not price"
                )
            )
            continue

        stats, after, term = saturate_extract(nodes)
        # Candidates, cheapest first that the evaluator accepts: the extracted term, and
        # with loop invariants hoisted (hoist.py: RLO's new_bind + lift_bind) the
        # extracted term and the original.
        cands: list[tuple[float, Def]] = []
        if after < before - 1e-9:
            extracted = Def(item.name, item.ret, item.params, raise_term(term), item.line)
            cands.append((after, extracted))

        def hoisted(bases: list[Def], before: float = before) -> list[tuple[float, Def]]:
            out: list[tuple[float, Def]] = []
            for base_def, cse in [(b, c) for b in bases for c in (False, True)]:
                h = hoist_def(base_def, cse=cse)
                try:
                    hc = _core.rlo_cost(lower(h, sigs)[0], costs)
                except (Untranslatable, ValueError):
                    continue
                if hc < before - 1e-9:
                    out.append((hc, h))
            return out

        if hoist:
            cands += hoisted([item] + [d for _, d in cands])
            # Further rounds: saturate the cheapest hoisted program (lets, inlining and
            # index/size-of-build now apply to it), then hoist again.
            for _ in range(rounds):
                if not cands:
                    break
                best = min(cands, key=lambda c: c[0])[1]
                try:
                    _, c2, t2 = saturate_extract(lower(best, sigs)[0])
                    d2 = Def(item.name, item.ret, item.params, raise_term(t2), item.line)
                    if c2 < before - 1e-9:  # never a candidate costlier than the input
                        cands.append((c2, d2))
                    cands += hoisted([d2])
                except (Untranslatable, ValueError):
                    pass
        cands.sort(key=lambda c: c[0])
        seconds = time.perf_counter() - start
        if not cands:
            results.append(DefResult(item.name, before, before, "unchanged", seconds, stats))
            continue
        chosen, message, failed = None, "", ""
        for cost_c, cand in cands:
            if verify:
                ok, message = evaluate.compare_defs(p, item, cand)
                if not ok:
                    failed = failed or message
                    continue
            chosen = (cost_c, cand)
            break
        if chosen is None:
            results.append(
                DefResult(item.name, before, before, "failed-verification", seconds, stats, failed)
            )
            continue
        new_items[idx] = chosen[1]
        results.append(
            DefResult(item.name, before, chosen[0], "optimised", seconds, stats, message)
        )
    out = KsProgram(Program(new_items, p.file), dict(prog.meta))
    return KsOptimizeResult(out, results)
