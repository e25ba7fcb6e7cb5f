"""How steady is the profile cost model's predicted speedup? Re-measures the figures it
priced a model's input and candidate with, and prices the same two programs again.

For each model (zoo names, or ``--real`` models of ``bench/onnx_real.py``, loaded as
``bench/cost_validation.py`` loads them):

1. ``optimize`` under ``profile`` (CPU, onnxruntime; the cache of ``TENSAT_CACHE_DIR``
   or the user's) gives a candidate; the *cached* prediction is cost before / after;
2. every one-operator application that prices the two programs
   (:meth:`~tensat_py.cost.profile.ProfileCostModel.applications`) is measured again
   ``--rounds`` times, the rounds in alternating order, each as the cache measures one
   pass (:func:`~tensat_py.cost.profile.time_callable`'s lower quartile);
3. for each ``--passes`` value k, ``--samples`` times: every figure is the lowest of k
   rounds drawn at random, and the two fixed programs are priced with those figures
   (:meth:`~tensat_py.cost.profile.ProfileCostModel.figures_replaced`); the table gives
   the 5th, 50th and 95th percentiles of the predicted speedup. Calibrations (call
   overhead, NCHWc reorders, the weight-bandwidth curve) keep their cached figures.

Also per model: the median and 90th percentile over the applications of the largest
over the smallest of its rounds (how much one figure moves between passes).

Usage::

    python bench/profile_noise.py --models nasrnn --real rapidocr_cls --out /tmp/noise.md
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

import numpy as np
import tensat_py
from tensat_py import models
from tensat_py.cost.profile import ProfileCostModel
from tensat_py.frontends import onnx as tonnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_real  # noqa: E402  (bench/onnx_real.py: the real models and their shapes)
from cost_validation import optimise, original_model  # noqa: E402


def load(name: str, args: argparse.Namespace) -> tensat_py.Graph:
    """A zoo model exported to ONNX with random weights and loaded back, or a real model
    with its input shapes fixed (``onnx_real/NAME``), as bench/cost_validation.py."""
    if name.startswith("onnx_real/"):
        real = name.removeprefix("onnx_real/")
        spec = onnx_real.MODELS[real]
        path = onnx_real.fetch(real, spec, args.work, args.export_python)
        return tonnx.load(original_model((path, spec.input_shapes)))
    return tonnx.load(original_model(models.get(name)))


def study(name: str, args: argparse.Namespace) -> dict:
    """The cached prediction, the spread of re-measured predictions per pass count, and
    how far single figures move between rounds."""
    graph = load(name, args)
    model = ProfileCostModel(device="cpu")
    res = optimise(graph, model, args.time_limit)
    cand = res.graph
    cached = model.graph_cost(graph) / model.graph_cost(cand)
    apps = model.applications(model.program_contexts(graph) + model.program_contexts(cand))
    sigs = list(apps)
    lows: dict[str, list[float]] = {s: [] for s in sigs}
    for r in range(args.rounds):
        for s in sigs if r % 2 == 0 else sigs[::-1]:
            lows[s].append(model.backend.measure(apps[s]).low)
    rng = random.Random(args.seed)
    spread = {}
    for k in args.passes:
        ratios = []
        for _ in range(args.samples):
            drawn = {s: min(rng.sample(lows[s], k)) for s in sigs}
            with model.figures_replaced(drawn):
                ratios.append(model.graph_cost(graph) / model.graph_cost(cand))
        spread[k] = np.percentile(ratios, [5, 50, 95]).tolist()
    moves = [max(v) / min(v) for v in lows.values()]
    return {
        "model": name,
        "applications": len(sigs),
        "cached": cached,
        "changed": res.speedup > 1.0 + 1e-9,
        "spread": spread,
        "move_median": statistics.median(moves) if moves else 1.0,
        "move_p90": float(np.percentile(moves, 90)) if moves else 1.0,
    }


def table(rows: list[dict], args: argparse.Namespace) -> str:
    """The markdown report."""
    head = "| model | applications | cached prediction | " + " | ".join(
        f"{k} pass{'es' if k > 1 else ''}: 5 / 50 / 95 %" for k in args.passes
    )
    lines = [
        f"{args.rounds} rounds per application, {args.samples} draws per pass count; "
        "predicted speedup = cost of the input / cost of the candidate under re-measured "
        "figures; a figure moves = largest / smallest of its rounds.",
        "",
        head + " | figure moves, median | 90th percentile |",
        "|---|---:|---:|" + "---:|" * len(args.passes) + "---:|---:|",
    ]
    for r in rows:
        cells = [r["model"], str(r["applications"]), f"{r['cached']:.3f}"]
        if not r["changed"]:
            cells[2] += " (input kept)"
        cells += ["{:.3f} / {:.3f} / {:.3f}".format(*r["spread"][k]) for k in args.passes]
        cells += [f"{r['move_median']:.2f}x", f"{r['move_p90']:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=[], choices=models.ZOO, help="zoo names")
    p.add_argument(
        "--real",
        nargs="*",
        default=[],
        choices=sorted(onnx_real.MODELS),
        help="models of bench/onnx_real.py",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/tensat_onnx_real"))
    p.add_argument("--export-python", default=sys.executable, help="python with the bench extra")
    p.add_argument("--rounds", type=int, default=8, help="measurements per application")
    p.add_argument("--passes", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--time-limit", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    if args.rounds < 1 or any(not 1 <= k <= args.rounds for k in args.passes):
        p.error(f"--passes must lie in 1..--rounds ({args.rounds}), got {args.passes}")
    names = [*args.models, *(f"onnx_real/{n}" for n in args.real)]
    if not names:
        p.error("name at least one model (--models or --real)")
    rows = []
    for name in names:
        rows.append(study(name, args))
        print(f"{name}: done", file=sys.stderr)
    text = table(rows, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
