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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensat_py.def_phases import DefResult
from tensat_py.frontends.knossos.lower import (
    Signature,
    Untranslatable,
    lower,
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
DEFAULT_RULES = "knossos_simplify+knossos_binding+fold"


@dataclass
class KsProgram:
    """A loaded ``.ks`` program (what :func:`load` returns instead of a tensor Graph).

    Attributes:
        program: the syntax tree.
        meta: front-end data (``meta["frontend"] == "knossos"``).
    """

    program: Program
    meta: dict[str, Any] = field(default_factory=lambda: {"frontend": "knossos"})


def load(
    path: str | os.PathLike[str], *, prelude: str | os.PathLike[str] | None = None, **options: Any
) -> KsProgram:
    """Parse the ``.ks`` file at ``path``.

    Args:
        prelude: a ``.ks`` file whose defs and edefs the program may call (knossos-ksc's
            ``src/runtime/prelude.ks``): its signatures type the program's calls, its
            defs are what the evaluator runs and what RLO's cost model prices for the
            edefs they define (``meta["prelude"]``, a parsed Program; never optimised
            or written back). Default: the ``TENSAT_KS_PRELUDE`` environment variable (how
            the ``tensat`` command is given one).

    Raises:
        ValueError: ``file:line:col: message`` on malformed or unsupported input.
    """
    if options:
        raise TypeError(f".ks files take only `prelude`, got {sorted(options)}")
    if prelude is None:
        prelude = os.environ.get("TENSAT_KS_PRELUDE") or None
    try:
        prog = KsProgram(parse_file(str(path)))
        if prelude is not None:
            prog.meta["prelude"] = parse_file(str(prelude))
        return prog
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


def function_costs(prog: Program, prelude: Program | None = None) -> dict[str, float]:
    """Cost of calling each function besides the call overhead and arguments, in RLO's
    way: a ``cost$f`` def with a constant body gives ``f``'s; otherwise a def's cost is
    its body's (defs priced in file order, the prelude's first, so a def calling a later
    or recursive one pays RLO's default edef cost 7 for it). Keyed by each overload's
    call symbol (:meth:`.lower.Signatures.symbol`)."""
    from tensat_py import _core

    sigs = signatures(prog, prelude)
    out: dict[str, float] = {}
    defs = [*(prelude.defs if prelude is not None else ()), *prog.defs]
    for d in defs:
        if d.name.startswith("cost$"):
            c = _constant_body(d)
            if c is not None:
                out[d.name[len("cost$") :]] = c
    for d in defs:
        sym = sigs.symbol(d.name, [t for _, t in d.params])
        if sym in out:
            continue
        try:
            nodes, _ = lower(d, sigs)
            c = _core.rlo_cost(nodes, out)
            if c != float("inf"):
                out[sym] = c
        except (Untranslatable, ValueError):
            continue
    return out


def _inline_rules(prog: Program, sigs: dict[str, Signature]) -> str:
    """One ``inline_call`` rule per non-recursive translatable def: the call becomes the
    body under lets binding fresh parameter names (``x$f``) to the arguments."""
    import re

    from tensat_py.frontends.knossos.lower import _as_sigs, _Flat, _Lower, type_text

    sigs = _as_sigs(sigs)
    lines = []
    for d in prog.defs:
        if d.name.startswith("cost$") or not d.params:
            continue
        sym = sigs.symbol(d.name, [t for _, t in d.params])
        tag = re.sub(r"[^A-Za-z0-9_$]", "_", sym)
        renamed = {p: f"{p}${tag}" for p, _ in d.params}
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
        if f"(call {sym} " in text:
            continue  # recursive
        args = " ".join(f"?a{i}" for i in range(len(d.params)))
        tgt = text
        for i, (p, _) in reversed(list(enumerate(d.params))):
            tgt = f"(let {renamed[p]} ?a{i} {tgt})"
        # The lets nest: parameter i's binder must not capture a later argument that uses
        # a variable of the same name (a let lifted out of a nested inlining, or a caller's
        # own variable named like it).
        names = [renamed[p] for p, _ in d.params]
        conds = [f"not free({names[i]}, ?a{j})" for j in range(len(names)) for i in range(j)]
        cond = f" if {' and '.join(conds)}" if conds else ""
        lines.append(f"inline_call_{len(lines)}: (call {sym} {ret} {args}) => {tgt}{cond}")
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
    time_limit: float = 60.0,
    verify: bool = True,
    only: set[str] | None = None,
    fold_constants: bool = True,
    hoist: bool = True,
    rounds: int = 3,
) -> KsOptimizeResult:
    """Optimise every def of ``prog`` (or those named in ``only``) by equality saturation
    under RLO's cost model: the pipeline's function stage
    (:func:`tensat_py.def_phases.optimize_functions`, what :func:`tensat_py.optimize` runs
    for a ``.ks`` program), returned in this front end's older result type.

    Args:
        rules: rule files (names, paths or a ``RuleSet``); default :data:`DEFAULT_RULES`.
            The per-program ``inline_call`` rules are always added.
        node_limit, iter_limit: exploration limits per def.
        time_limit: seconds for the whole program (each def explores at most
            :data:`tensat_py.def_phases.DEF_TIME_LIMIT` seconds).
        verify: evaluate original and optimised def on random arguments (:mod:`.evaluate`)
            and keep the original when they differ.
        fold_constants: with the default rules, include the Rust core's constant folding
            (``"fold"``, ``_core.RuleSet.constant_folding()``, RLO's ``cprop_*``).
        hoist: also try the extracted and the original def with loop invariants hoisted
            (:mod:`.hoist`); the cheapest candidate the evaluator accepts is kept.
        rounds: with ``hoist``, how many times the cheapest candidate is saturated and
            hoisted again.

    Returns:
        the program with optimised bodies and per-def results (costs in RLO units).
    """
    from tensat_py.budget import Budget
    from tensat_py.cost.rlo import RloCostModel
    from tensat_py.def_phases import optimize_functions
    from tensat_py.frontends.knossos.functions import KsFunctions
    from tensat_py.rule_files import load_rules

    if rules is None:
        parts = DEFAULT_RULES.split("+")
        rules = "+".join(p for p in parts if fold_constants or p != "fold")
    res = optimize_functions(
        KsFunctions(prog),
        ruleset=load_rules(rules),
        model=RloCostModel(),
        budget=Budget(time_limit),
        node_limit=node_limit,
        iter_limit=iter_limit,
        verify=verify,
        hoist=hoist,
        rounds=rounds,
        only=only,
    )
    return KsOptimizeResult(res.graph, res.defs)
