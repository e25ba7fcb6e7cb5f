"""Rule files as egglog programs, and a cross-check of our e-graph engine against egglog.

`egglog <https://egglog-python.readthedocs.io>`_ is an independent e-graph engine (Rust,
with Python bindings). :func:`export_rules` writes a rule file as an egglog program:

* one sort ``Term`` with a constructor per operator of the language (``t_matmul``, ...)
  and four leaf constructors for parameters and names: ``(Num i64)``, ``(Flt String)``
  (the float's ``repr``), ``(Lst String)`` (``"1,0"``) and ``(Sym String)`` (``"x@4_8"``),
  mirroring our e-graph, where parameters are leaf e-classes too;
* a ``rewrite`` per single-pattern rule and a ``rule`` with ``union`` actions per
  multi-pattern rule, each preceded by a comment with the rule's name and line.

Rules egglog cannot express are left out and listed with the reason: rules with conditions
(they read our shape analysis, which the egglog program does not have) and rules using a
variadic operator (``opaque``). One difference remains by design: our engine does not apply
a rewrite whose right-hand side does not type-check, egglog applies every match.

:func:`tensat_equal_pairs` and :func:`egglog_equal_pairs` saturate one small program with
each engine and return which pairs of its sub-terms ended up equal (``tensat rules export
FILE --egglog OUT`` writes the program; ``tests/test_egglog_crosscheck.py`` compares).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tensat_py import _core

__all__ = [
    "EgglogExport",
    "export_rules",
    "leaf_expr",
    "program_lets",
    "egglog_equal_pairs",
    "tensat_equal_pairs",
]

_TOKEN = re.compile(r"\[[^\]]*\]|\(|\)|[^\s()]+")


@dataclass
class EgglogExport:
    """An exported rule set.

    Attributes:
        program: the egglog program text (sort, constructors, rules; no terms, no ``run``).
        rules: names of the exported rules, in file order.
        skipped: ``(name, reason)`` for each rule that could not be exported.
        dsl: the exported rules in our rule DSL (to run the same subset in our engine).
    """

    program: str
    rules: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    dsl: str = ""


def constructor(op: str) -> str:
    """The egglog constructor of operator ``op`` (``matmul`` -> ``t_matmul``)."""
    return "t_" + re.sub(r"[^A-Za-z0-9_]", "_", op)


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def leaf_expr(text: str) -> str:
    """The egglog term of a leaf of our language (an integer, float or list literal, or a
    symbol such as ``x@4_8``), parsed as the Rust core parses leaves."""
    try:
        return f"(Num {int(text)})"
    except ValueError:
        pass
    if text.startswith("["):
        inner = text.strip()[1:-1].strip()
        items = [str(int(x)) for x in inner.split(",")] if inner else []
        return f"(Lst {_string(','.join(items))})"
    if any(c in text for c in ".eE") or text.endswith("inf"):
        try:
            return f"(Flt {_string(repr(float(text)))})"
        except ValueError:
            pass
    return f"(Sym {_string(text)})"


def _parse(text: str) -> Any:
    toks = _TOKEN.findall(text)
    pos = 0

    def read() -> Any:
        nonlocal pos
        t = toks[pos]
        pos += 1
        if t == "(":
            out = []
            while toks[pos] != ")":
                out.append(read())
            pos += 1
            return tuple(out)
        return t

    return read()


def _pattern(term: Any, operators: dict[str, Any]) -> str:
    """A pattern of our DSL as an egglog pattern; raises ``KeyError`` naming an operator
    egglog cannot express."""
    if isinstance(term, tuple):
        op, args = term[0], term[1:]
        decl = operators.get(op)
        if decl is None or decl["variadic"] is not None:
            raise KeyError(op)
        inner = " ".join(_pattern(a, operators) for a in args)
        return f"({constructor(op)}{' ' + inner if inner else ''})"
    if term.startswith("?"):
        return term
    return leaf_expr(term)


def _load(rules: Any) -> tuple[_core.RuleSet, str]:
    from tensat_py.rule_files import load_rules

    rs = load_rules(rules)
    return rs, str(rules) if isinstance(rules, str | Path) else "rules"


def export_rules(rules: str | Path | _core.RuleSet) -> EgglogExport:
    """The rules of a rule file (a shipped name, a path or a parsed ``RuleSet``) as an
    egglog program (see the module documentation for the encoding).

    Raises:
        FileNotFoundError: no such rule file.
        ValueError: the rule file does not parse (``file:line:col: message``).
    """
    rs, source = _load(rules)
    operators = _core.operators()
    lines = [
        f"; {source} as an egglog program, written by `tensat rules export` (tensat-py).",
        "; Parameters and names are leaves of the one sort Term, as in tensat's e-graph.",
        "(datatype Term",
        "  (Num i64)",
        "  (Flt String)",
        "  (Lst String)",
        "  (Sym String)",
    ]
    for op, decl in sorted(operators.items()):
        if decl["variadic"] is not None:
            continue
        arity = len(decl["operands"])
        lines.append(f"  ({constructor(op)}{' Term' * arity})")
    lines[-1] += ")"
    out = EgglogExport(program="")
    dsl: list[str] = []
    seen: dict[str, str] = {}
    for index, (name, sources, targets, line) in enumerate(rs.describe()):
        conditions = rs.conditions(index)
        if conditions:
            out.skipped.append(
                (name, f"condition `{' and '.join(conditions)}` reads the shape analysis")
            )
            continue
        try:
            src = [_pattern(_parse(s), operators) for s in sources]
            tgt = [_pattern(_parse(t), operators) for t in targets]
        except KeyError as e:
            out.skipped.append((name, f"operator `{e.args[0]}` is variadic"))
            continue
        if len(src) == 1:
            text = f"(rewrite {src[0]} {tgt[0]})"
        else:
            query = " ".join(f"(= ?root{k} {p})" for k, p in enumerate(src))
            actions = " ".join(f"(union ?root{k} {p})" for k, p in enumerate(tgt))
            text = f"(rule ({query}) ({actions}))"
        if text in seen:  # egglog refuses a rule twice; the first one stands for both
            out.skipped.append((name, f"the same rewrite as `{seen[text]}` (exported once)"))
            continue
        seen[text] = name
        lines.append(f"; {name} (line {line})")
        lines.append(text)
        out.rules.append(name)
        dsl.append(f"{name}: {', '.join(sources)} => {', '.join(targets)}")
    out.program = "\n".join(lines) + "\n"
    out.dsl = "\n".join(dsl) + "\n"
    return out


def program_lets(flat: Sequence[tuple[str, Sequence[int]]]) -> str:
    """``(let $n{i} ...)`` for every node of a flat program (``Graph.to_flat()``)."""
    ops = _core.operators()
    lines = []
    for i, (op, children) in enumerate(flat):
        if not children and (op not in ops or ops[op]["operands"]):
            expr = leaf_expr(op)
        else:
            args = "".join(f" $n{c}" for c in children)
            expr = f"({constructor(op)}{args})"
        lines.append(f"(let $n{i} {expr})")
    return "\n".join(lines) + "\n"


def _operator_nodes(flat: Sequence[tuple[str, Sequence[int]]]) -> list[int]:
    ops = _core.operators()
    return [i for i, (op, ch) in enumerate(flat) if ch or (op in ops and not ops[op]["operands"])]


def egglog_equal_pairs(
    exported: EgglogExport, flat: Sequence[tuple[str, Sequence[int]]], iterations: int
) -> set[tuple[int, int]]:
    """Saturates ``flat`` with egglog for ``iterations`` iterations; returns the pairs
    ``(i, j)``, ``i < j``, of its operator nodes that ended up in one e-class.

    Raises:
        ModuleNotFoundError: the ``egglog`` package is not installed (``pip install
            'tensat-py[test]'``).
    """
    from egglog.bindings import EggSmolError, EGraph

    eg = EGraph()
    eg.run_program(*eg.parse_program(exported.program + program_lets(flat)))
    eg.run_program(*eg.parse_program(f"(run {iterations})"))
    nodes = _operator_nodes(flat)
    pairs = set()
    for a, i in enumerate(nodes):
        for j in nodes[a + 1 :]:
            try:
                eg.run_program(*eg.parse_program(f"(check (= $n{i} $n{j}))"))
            except EggSmolError:
                continue
            pairs.add((i, j))
    return pairs


def tensat_equal_pairs(
    exported: EgglogExport, flat: Sequence[tuple[str, Sequence[int]]], iterations: int
) -> tuple[set[tuple[int, int]], str]:
    """Saturates ``flat`` with our engine and the same rules (``exported.dsl``), multi-pattern
    rules in every iteration and no cycle filter (as egglog); returns the equal pairs as
    :func:`egglog_equal_pairs` and the stop reason."""
    rs = _core.RuleSet.parse(exported.dsl, "egglog-subset")
    eg = _core.EGraph(list(flat))
    stats = eg.saturate(
        rs,
        k_multi=iterations,
        node_limit=1_000_000,
        iter_limit=iterations,
        time_limit=60.0,
        cycle_filter="none",
    )
    nodes = _operator_nodes(flat)
    pairs = set()
    for a, i in enumerate(nodes):
        for j in nodes[a + 1 :]:
            if eg.equivalent(list(flat[: i + 1]), list(flat[: j + 1])):
                pairs.add((i, j))
    return pairs, str(stats["stop_reason"])
