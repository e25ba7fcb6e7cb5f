"""Knossos benchmark: equality saturation against RLO's published results.

Rows:

* every def of RLO's BLAS training set (``blas_train.kso``, shared data ``rlo/``): start
  cost, our cost, seconds, and RLO's best: each ``; BEST`` rewrite sequence replayed at
  RLO's node indices (:mod:`tensat_py.frontends.knossos.replay`), verified by the
  evaluator and priced in our RLO cost model; the lowest per function and per
  ``expert``/``rlo`` is shown (``-`` where the file has no such line);
* every expression of RLO's simplify set (``_simplify_sequences`` in knossos-ksc
  ``rlo/src/rlo/best_results.py``): start cost, our cost, RLO's oracle cost (the RLO cost of
  the sequence's last expression, which best_results.py records as optimal), seconds.

All costs are RLO's (``rust/src/ks_cost.rs``). Usage::

    python bench/knossos_bench.py [--data ../shared/data] [--rlo-src KNOSSOS_KSC_CHECKOUT]
        [--out bench/knossos_bench.md]

``--rlo-src`` is a git checkout of microsoft/knossos-ksc (read with ``git show HEAD:...``);
without it the simplify rows are skipped.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import time
from pathlib import Path

from tensat_py import _core
from tensat_py.frontends.knossos import KsProgram, optimize_program
from tensat_py.frontends.knossos.lower import Untranslatable, lower
from tensat_py.frontends.knossos.replay import replay_all
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


def simplify_sequences(rlo_src: Path) -> list[list[str]]:
    """``_simplify_sequences`` of best_results.py (the lists of expression strings)."""
    text = subprocess.run(
        ["git", "-C", str(rlo_src), "show", "HEAD:rlo/src/rlo/best_results.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for node in ast.parse(text).body:
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
    d = Def(name, FLOAT, params, e)
    return d


def cost(d: Def) -> float:
    nodes, _ = lower(d, {})
    return float(_core.rlo_cost(nodes, {}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--rlo-src", default=None)
    ap.add_argument("--out", default="bench/knossos_bench.md")
    args = ap.parse_args()
    rows: list[str] = []
    worst = 0.0
    blas = Path(args.data) / "rlo" / "blas_train.kso"
    if blas.is_file():
        prog = parse_file(str(blas))
        best: dict[tuple[str, str], float] = {}
        replayed = replay_all(prog, blas.read_text())
        for r in replayed:
            if not r.verified:
                raise SystemExit(f"BEST line {r.best.line}: replay fails the evaluator")
            key = (r.best.function, r.best.who)
            best[key] = min(best.get(key, float("inf")), r.cost)
        rows.append(
            "| BLAS function | start | ours | RLO best expert | RLO best rlo "
            "| ours <= RLO best | seconds |"
        )
        rows.append("|---|---:|---:|---:|---:|:-:|---:|")
        res = optimize_program(KsProgram(prog))
        met = total = 0
        for d in res.defs:
            if d.name.startswith("cost$"):
                continue
            worst = max(worst, d.seconds)
            ex, rl = best.get((d.name, "expert")), best.get((d.name, "rlo"))
            known = [c for c in (ex, rl) if c is not None]
            verdict = "-"
            if known:
                total += 1
                ok = d.cost_after <= min(known) + 1e-6
                met += ok
                verdict = "yes" if ok else "no"
            rows.append(
                f"| {d.name} | {d.cost_before:.1f} | {d.cost_after:.1f} "
                f"| {'-' if ex is None else f'{ex:.1f}'} | {'-' if rl is None else f'{rl:.1f}'} "
                f"| {verdict} | {d.seconds:.2f} |"
            )
        rows.append("")
        rows.append(
            f"BEST lines replayed and verified: {len(replayed)}. BLAS functions at or below "
            f"RLO's best: {met} / {total}."
        )
        rows.append("")
    if args.rlo_src:
        seqs = simplify_sequences(Path(args.rlo_src))
        rows.append("| simplify expression | start | ours | RLO oracle | ours <= RLO | seconds |")
        rows.append("|---|---:|---:|---:|:-:|---:|")
        met = 0
        for n, seq in enumerate(seqs):
            start_def = as_def(seq[0], f"e{n}")
            oracle = cost(as_def(seq[-1], f"e{n}"))
            prog = Program([start_def])
            t = time.perf_counter()
            res = optimize_program(KsProgram(prog))
            secs = time.perf_counter() - t
            worst = max(worst, secs)
            r = res.defs[0]
            ok = r.cost_after <= oracle + 1e-9
            met += ok
            short = " ".join(seq[0].split())
            rows.append(
                f"| `{short}` | {r.cost_before:.1f} | {r.cost_after:.1f} | {oracle:.1f} "
                f"| {'yes' if ok else 'no'} | {secs:.2f} |"
            )
        rows.append("")
        rows.append(f"Simplify expressions at or below RLO's oracle cost: {met} / {len(seqs)}.")
    rows.append(f"Slowest row: {worst:.2f} s.")
    text = "\n".join(rows) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    try:
        main()
    except Untranslatable as e:
        raise SystemExit(f"error: {e}") from None
