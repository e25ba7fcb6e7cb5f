"""Knossos programs whole: every ``.ks`` file of a knossos-ksc checkout, optimised.

For each ``.ks`` file under ``test/ksc/``, ``examples/`` and ``src/runtime/prelude.ks`` of
the knossos-ksc directory given by ``--ksc`` (loaded with ``src/runtime/prelude.ks`` as its
prelude, the prelude itself without one), this script optimises every def
(:func:`tensat_py.optimize`: the pipeline's function stage, RLO's cost model), checks each def
of the result against the original with the evaluator on random arguments, saves the
program as ``.ks``, loads it again and compares, and writes a markdown table:

    python bench/knossos_programs.py --ksc /tmp/ksc --out bench/knossos_programs.md

Columns: defs; optimised (went through saturation and extraction: ``optimised`` or
``unchanged``); verified (the evaluator ran the original and the kept def on the same
random arguments and they agree); opaque (sub-terms kept as ``ks_opaque`` nodes, summed
over the defs); cost before/after (RLO units, summed over the priced defs); round trip
(load -> save -> load gives the same program); seconds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import tensat_py
from tensat_py.frontends.knossos import load, save
from tensat_py.frontends.knossos.evaluate import compare_defs
from tensat_py.frontends.knossos.lower import Untranslatable, lower, opaque_count, signatures

FIELDS = ("defs", "optimised", "verified", "opaque", "before", "after")


def ks_files(root: Path) -> list[Path]:
    """The survey's files: ``test/ksc/**.ks``, ``examples/**.ks`` and the prelude."""
    out = sorted((root / "test" / "ksc").rglob("*.ks")) + sorted((root / "examples").rglob("*.ks"))
    prelude = root / "src" / "runtime" / "prelude.ks"
    return out + ([prelude] if prelude.exists() else [])


def survey_file(path: Path, prelude: Path | None, **limits: float) -> dict[str, object]:
    """One file's row (see the module docstring); ``error`` when it does not load."""
    start = time.perf_counter()
    row: dict[str, object] = {"file": str(path)}
    try:
        prog = load(path, prelude=prelude if prelude is not None and path != prelude else None)
    except (ValueError, OSError) as e:
        row["error"] = str(e).splitlines()[0]
        return row
    pre = prog.meta.get("prelude")
    p = prog.program
    res = tensat_py.optimize(prog, **limits)
    new = res.graph.program
    sigs = signatures(p, pre)
    row["defs"] = len(p.defs)
    row["optimised"] = sum(d.status in ("optimised", "unchanged") for d in res.defs)
    verified = opaque = 0
    for old, kept in zip(p.defs, new.defs, strict=True):
        ok, msg = compare_defs(p, old, kept, prelude=pre)
        verified += ok and msg == "verified"
        try:
            opaque += opaque_count(lower(old, sigs)[0])
        except Untranslatable:
            pass
    row["verified"] = verified
    row["opaque"] = opaque
    row["before"] = res.cost_before
    row["after"] = res.cost_after
    reasons = [f"{d.name}: {d.status} {d.message}" for d in res.defs if d.status not in
               ("optimised", "unchanged")]  # fmt: skip
    row["notes"] = "; ".join(reasons)[:200]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / path.name
        try:
            save(res.graph, out)
            again = load(out).program
            row["round_trip"] = again.code() == new.code()
        except ValueError as e:
            row["round_trip"] = False
            row["notes"] = f"reload: {e}"
    row["seconds"] = time.perf_counter() - start
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ksc", type=Path, required=True, help="a knossos-ksc checkout")
    ap.add_argument("--out", type=Path, default=Path("bench/knossos_programs.md"))
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per program")
    ap.add_argument("--node-limit", type=int, default=5000)
    ap.add_argument("--iter-limit", type=int, default=6)
    args = ap.parse_args(argv)
    prelude = args.ksc / "src" / "runtime" / "prelude.ks"
    limits = {
        "time_limit": args.time_limit,
        "node_limit": args.node_limit,
        "iter_limit": args.iter_limit,
    }
    rows = []
    for f in ks_files(args.ksc):
        row = survey_file(f, prelude if prelude.exists() else None, **limits)
        row["file"] = str(f.relative_to(args.ksc))
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    tot = {k: sum(float(r.get(k, 0)) for r in rows) for k in FIELDS}  # type: ignore[arg-type]
    n = tot["defs"] or 1
    lines = [
        "# Knossos programs whole",
        "",
        "Every `.ks` file of knossos-ksc's `test/ksc/`, `examples/` and",
        "`src/runtime/prelude.ks`, each loaded with the prelude (the prelude itself without),",
        "optimised def by def under RLO's cost model, every def checked against the",
        "original with the evaluator, saved and loaded again. Produced by",
        "",
        "```",
        "python bench/knossos_programs.py --ksc /tmp/ksc --out bench/knossos_programs.md"
        + (f" --time-limit {args.time_limit:g}" if args.time_limit != 20.0 else ""),
        "```",
        "",
        "(`/tmp/ksc`: a knossos-ksc checkout; the files are not in this repository.) "
        "optimised: the def went through saturation and extraction (a body with nothing "
        "cheaper counts); verified: the evaluator ran the original and the kept def on "
        "the same random arguments and they agree; opaque: sub-terms kept as `ks_opaque` "
        "nodes; costs in RLO units (priced defs); round trip: load -> save -> load gives "
        "the same program.",
        "",
        f"**Totals**: {len(rows)} files, {int(tot['defs'])} defs, "
        f"{int(tot['optimised'])} optimised ({100 * tot['optimised'] / n:.1f} %), "
        f"{int(tot['verified'])} verified ({100 * tot['verified'] / n:.1f} %), "
        f"{int(tot['opaque'])} opaque sub-terms, cost {tot['before']:.1f} -> "
        f"{tot['after']:.1f}; files that fail to load: "
        f"{sum('error' in r for r in rows)}, round trip failures: "
        f"{sum(r.get('round_trip') is False for r in rows)}.",
        "",
        "| file | defs | optimised | verified | opaque | cost before | cost after "
        "| round trip | seconds | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['file']} | | | | | | | no | | {r['error']} |")
            continue
        notes = str(r.get("notes", "")).replace("|", "\\|")
        lines.append(
            f"| {r['file']} | {r['defs']} | {r['optimised']} | {r['verified']} | "
            f"{r['opaque']} | {r['before']:.1f} | {r['after']:.1f} | "
            f"{'yes' if r['round_trip'] else 'no'} | {r['seconds']:.1f} | {notes} |"
        )
    args.out.write_text("\n".join(lines) + "\n")
    print(next(line for line in lines if line.startswith("**Totals**")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
