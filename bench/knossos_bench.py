"""Knossos benchmark: equality saturation against RLO's published results.

Rows:

* every function with a ``; BEST`` line in every RLO ``.kso`` file under
  ``<ksc>/rlo/src/rlo/ksc/`` and ``<ksc>/rlo/test/rlo/test_sparser_files/`` (knossos-ksc):
  its start cost, RLO's best cost, our cost and seconds. RLO's best: each ``; BEST``
  rewrite sequence replayed at RLO's node indices with our implementation of RLO's rules
  (:mod:`tensat_py.frontends.knossos.replay`, ``rlo_rules``), verified against the
  original by the evaluator and priced; the files record sequences, not costs, so RLO's
  best cost is RLO's cost of the expression its sequence ends at, the lowest over the
  function's lines. Ours: :func:`tensat_py.frontends.knossos.optimize_program` defaults;
* every expression of RLO's simplify set (``_simplify_sequences`` in
  ``<ksc>/rlo/src/rlo/best_results.py``, where present): start cost, our cost, RLO's
  oracle cost (the RLO cost of the sequence's last expression, which best_results.py
  records as optimal), seconds.

All costs are RLO's units (``rust/src/ks_cost.rs``). Usage::

    python bench/knossos_bench.py --ksc KNOSSOS_KSC_TREE [--out bench/knossos_bench.md]

``KNOSSOS_KSC_TREE`` is a checkout (or an extracted copy) of microsoft/knossos-ksc.
"""

from __future__ import annotations

import argparse
import ast
import math
import time
from pathlib import Path

from tensat_py import _core
from tensat_py.frontends.knossos import KsProgram, optimize_program
from tensat_py.frontends.knossos.lower import Untranslatable, lower
from tensat_py.frontends.knossos.replay import best_lines, replay_all
from tensat_py.frontends.knossos.syntax import (
    BOOL,
    FLOAT,
    INTEGER,
    Call,
    Def,
    Let,
    Program,
    Var,
    parse_expr,
    parse_file,
    vec,
)

# best_results.py's `best_results_env`: the types of the free variables.
ENV = {
    "i": INTEGER, "j": INTEGER, "k": INTEGER,
    "x": FLOAT, "y": FLOAT, "z": FLOAT, "a": FLOAT, "b": FLOAT,
    "p": BOOL,
    "u": vec(FLOAT), "v": vec(FLOAT), "w": vec(FLOAT),
}  # fmt: skip
KSO_DIRS = ("rlo/src/rlo/ksc", "rlo/test/rlo/test_sparser_files")


def kso_files(ksc: Path) -> list[Path]:
    """Every ``.kso`` of RLO's published sets that has a ``; BEST`` line."""
    out = []
    for d in KSO_DIRS:
        for p in sorted((ksc / d).rglob("*.kso")):
            if best_lines(p.read_text()):
                out.append(p)
    return out


def simplify_sequences(path: Path) -> list[list[str]]:
    """``_simplify_sequences`` of best_results.py (the lists of expression strings)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_simplify_sequences" for t in node.targets
        ):
            return [list(seq) for seq, _ in ast.literal_eval(node.value)]
    raise ValueError("no _simplify_sequences in best_results.py")


def _free(e: object, bound: frozenset[str] = frozenset()) -> set[str]:
    if isinstance(e, Var):
        return set() if e.name in bound else {e.name}
    if isinstance(e, Let):
        return _free(e.rhs, bound) | _free(e.body, bound | set(e.vars))
    if isinstance(e, Call):
        return set().union(*(_free(a, bound) for a in e.args)) if e.args else set()
    return set()


def as_def(text: str, name: str) -> Def:
    """An expression of best_results.py as a def of its free variables."""
    e = parse_expr(text)
    params = tuple((v, ENV[v]) for v in sorted(_free(e)))
    return Def(name, FLOAT, params, e)


def cost(d: Def) -> float:
    nodes, _ = lower(d, {})
    return float(_core.rlo_cost(nodes, {}))


def _num(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.1f}"


def best_rows(ksc: Path, rows: list[str]) -> tuple[float, dict[str, int]]:
    """The BEST-line table; returns the slowest row's seconds and the totals."""
    tot = dict(lines=0, replayed=0, verified=0, functions=0, met=0, under10=0)
    worst = 0.0
    rows.append(
        "| file | function | BEST lines replayed, verified / all | start | RLO best "
        "| ours | ours <= RLO best | ours verified | seconds |"
    )
    rows.append("|---|---|:-:|---:|---:|---:|:-:|:-:|---:|")
    for path in kso_files(ksc):
        text = path.read_text()
        prog = parse_file(str(path))
        replayed = replay_all(prog, text, trials=2, strict=False)
        funcs = list(dict.fromkeys(r.best.function for r in replayed))
        res = {d.name: d for d in optimize_program(KsProgram(prog), only=set(funcs)).defs}
        for f in funcs:
            mine = [r for r in replayed if r.best.function == f]
            ok = [r for r in mine if r.verified]
            best = min((r.cost for r in ok), default=None)
            d = res.get(f)
            tot["lines"] += len(mine)
            tot["replayed"] += sum(r.definition is not None for r in mine)
            tot["verified"] += len(ok)
            tot["functions"] += 1
            met = d is not None and best is not None and d.cost_after <= best + 1e-6
            tot["met"] += met
            secs = d.seconds if d is not None else float("nan")
            tot["under10"] += secs < 10.0
            worst = max(worst, secs)
            rows.append(
                f"| {path.relative_to(ksc)} | {f} | {len(mine)}, {len(ok)} / {len(mine)} "
                f"| {_num(d.cost_before if d else None)} | {_num(best)} "
                f"| {_num(d.cost_after if d else None)} | {'yes' if met else 'no'} "
                f"| {'yes' if d and d.message == 'verified' else (d.message if d else '-')} "
                f"| {secs:.2f} |"
            )
    rows.append("")
    rows.append(
        f"BEST lines replayed: {tot['replayed']} / {tot['lines']}, verified by the evaluator: "
        f"{tot['verified']} / {tot['lines']}. Functions where our optimiser meets or beats "
        f"RLO's best: {tot['met']} / {tot['functions']}; under 10 s: {tot['under10']} / "
        f"{tot['functions']}."
    )
    rows.append("")
    return worst, tot


def simplify_rows(path: Path, rows: list[str]) -> float:
    """The simplify-set table; returns the slowest row's seconds."""
    seqs = simplify_sequences(path)
    rows.append("| simplify expression | start | ours | RLO oracle | ours <= RLO | seconds |")
    rows.append("|---|---:|---:|---:|:-:|---:|")
    met = 0
    worst = 0.0
    for n, seq in enumerate(seqs):
        start_def = as_def(seq[0], f"e{n}")
        oracle = cost(as_def(seq[-1], f"e{n}"))
        t = time.perf_counter()
        r = optimize_program(KsProgram(Program([start_def]))).defs[0]
        secs = time.perf_counter() - t
        worst = max(worst, secs)
        ok = r.cost_after <= oracle + 1e-9
        met += ok
        short = " ".join(seq[0].split())
        rows.append(
            f"| `{short}` | {r.cost_before:.1f} | {r.cost_after:.1f} | {oracle:.1f} "
            f"| {'yes' if ok else 'no'} | {secs:.2f} |"
        )
    rows.append("")
    rows.append(f"Simplify expressions at or below RLO's oracle cost: {met} / {len(seqs)}.")
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ksc", required=True, help="a knossos-ksc checkout or extracted tree")
    ap.add_argument("--out", default="bench/knossos_bench.md")
    args = ap.parse_args()
    ksc = Path(args.ksc)
    rows: list[str] = []
    t0 = time.perf_counter()
    worst, _ = best_rows(ksc, rows)
    best_results = ksc / "rlo/src/rlo/best_results.py"
    if best_results.is_file():
        worst = max(worst, simplify_rows(best_results, rows))
    rows.append(f"Slowest row: {worst:.2f} s. Whole run: {time.perf_counter() - t0:.1f} s.")
    text = "\n".join(rows) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    try:
        main()
    except Untranslatable as e:
        raise SystemExit(f"error: {e}") from None
