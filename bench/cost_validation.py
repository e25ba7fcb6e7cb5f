"""Cost models against onnxruntime: predicted speedup vs measured latency ratio.

For every zoo model (and any ``--onnx`` files and ``--real`` models of
``bench/onnx_real.py``: fetched from their PyPI wheels or exported as that script does,
loaded with its input shapes), in one run:

1. the model is exported to ONNX with random weights (seed 0), the *original*, and loaded
   back (:func:`tensat_py.frontends.onnx.load`);
2. it is optimised once under each cost model (``roofline`` with the ``cpu`` preset,
   ``profile`` and ``learned`` on the CPU through onnxruntime, and ``learned-trees``:
   ``learned`` without the cache's own figures, every operator predicted; the profile
   cache should be filled first: ``tensat profile MODEL --device cpu`` and
   ``tensat profile --train``);
   each result's *predicted* ratio is its cost before / after under its own model;
3. onnxruntime (CPUExecutionProvider, ``ORT_ENABLE_ALL``, 2 intra-op threads, spinning
   off, as ``bench/onnx_bench.py``) runs the original, a second session of the original
   (the A/A control: the noise) and each optimised model on the same inputs, rotating
   which goes first, ``--runs`` times after ``--warmup`` runs, or more rounds when one
   round takes less than ``--min-seconds`` / ``--runs``: the rounds fill at least
   ``--min-seconds`` (a 5 ms model's measured ratio moved by 6 % between runs of 30
   rounds); outputs must agree within 1e-3 relative;
4. the *measured* ratio is the original's latency over the optimised one's: the median of
   the per-round ratios (:func:`tensat_py.runtime.timing.paired_ratio`).

Writes a markdown table (``--out``), a CSV beside it and a plot (``--plot``: predicted vs
measured, one point per model and cost model, the ±3% band around the diagonal).

Usage::

    tensat profile bert nasrnn nasneta resnext50 inceptionv3 squeezenet vgg19 resnet50 \\
        --device cpu && tensat profile --train
    python bench/cost_validation.py --out bench/cost_validation.md \\
        --plot bench/cost_validation.png
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tensat_py
from tensat_py import models
from tensat_py.cost import get_cost_model
from tensat_py.frontends import onnx as tonnx
from tensat_py.runtime import ort_exec, timing

sys.path.insert(0, str(Path(__file__).resolve().parent))
import onnx_real  # noqa: E402  (bench/onnx_real.py: the real models and their feeds)
from onnx_real import random_feeds  # noqa: E402

TOLERANCE = 1e-3
COST_MODELS = ("roofline", "profile", "learned", "learned-trees")


@dataclass
class Row:
    """One model: latencies (ms) and, per cost model, predicted and measured ratios."""

    model: str
    original_ms: float
    control_ms: float
    predicted: dict[str, float] = field(default_factory=dict)
    optimized_ms: dict[str, float] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    optimize_s: dict[str, float] = field(default_factory=dict)
    #: Original / other, medians of per-round ratios: ``"control"`` and each cost model.
    ratios: dict[str, float] = field(default_factory=dict)
    #: Timed rounds of rotating runs.
    rounds: int = 0

    @property
    def control(self) -> float:
        """A/A ratio: the original over a second session of itself."""
        return self.ratios["control"]

    def measured(self, cm: str) -> float:
        """Original / optimised-under-``cm`` latency (median of per-round ratios)."""
        return self.ratios[cm]

    def error(self, cm: str) -> float:
        """Predicted / measured - 1."""
        return self.predicted[cm] / self.measured(cm) - 1.0

    def faster(self, cm: str) -> bool:
        """Whether the program ``cm`` chose is measured faster than the original by more
        than the A/A noise, counting only a program ``cm`` predicted faster (a kept input
        re-exported differs only by noise)."""
        changed = self.predicted[cm] > 1.0 + 1e-9
        return changed and self.measured(cm) - 1 > abs(self.control - 1)


def _cost_model(name: str):
    """A cost model by name; ``learned-trees`` is ``learned`` without the profile cache's
    own figures (every operator predicted: the trees alone)."""
    if name == "learned-trees":
        from tensat_py.cost.learned import LearnedCostModel

        return LearnedCostModel.for_device("cpu", measured=False)
    return get_cost_model(name, "cpu")


def canonical(model) -> bytes:
    """``model`` serialised with its tensor and node names replaced by their order of
    first appearance (and doc strings dropped): equal for two exports of one program."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model))
    g = m.graph
    names: dict[str, str] = {}

    def name(n: str) -> str:
        return n if not n else names.setdefault(n, f"t{len(names)}")

    for v in (*g.input, *g.initializer):
        v.name = name(v.name)
    for k, node in enumerate(g.node):
        node.name, node.doc_string = f"n{k}", ""
        node.input[:] = [name(n) for n in node.input]
        node.output[:] = [name(n) for n in node.output]
    for v in (*g.output, *g.value_info):
        v.name = name(v.name)
    g.name, m.doc_string, m.producer_name, m.producer_version = "g", "", "", ""
    del g.value_info[:]
    return m.SerializeToString(deterministic=True)


def _session(model):
    return ort_exec.session(model, threads=2, level="all", spinning=False)


def _rounds(calls, runs: int, min_seconds: float) -> int:
    """At least ``runs`` rounds, and as many as fill ``min_seconds`` at the time of one
    round (each call run once, untimed otherwise)."""
    t = time.perf_counter()
    for call in calls:
        call()
    one = time.perf_counter() - t
    return max(runs, math.ceil(min_seconds / max(one, 1e-9)))


def original_model(source):
    """The ONNX model of ``source``: a zoo Graph exported with random weights (seed 0), an
    ONNX path as given (its shapes static), or an ONNX path and its input shapes (shapes
    fixed and folded, as ``tensat_py.load`` does)."""
    if isinstance(source, tuple):
        path, shapes = source
        return tonnx.to_model(tensat_py.load(path, input_shapes=shapes))
    if isinstance(source, str | Path):
        import onnx

        return onnx.load(str(source))
    return tonnx.to_model(source, weights="random")


def optimise(loaded, model, time_limit: float):
    """``optimize`` as validated: unverified, and with ``confirm=False``, so that the cost
    model's own choice is what is measured (optimize would otherwise time it on
    onnxruntime and keep the input when it is not faster)."""
    return tensat_py.optimize(
        loaded, cost_model=model, device="cpu", time_limit=time_limit, verify=False, confirm=False
    )


def bench_model(name: str, source, cms: dict, args: argparse.Namespace) -> Row:
    """Optimise ``source`` (see :func:`original_model`) under each model and time all."""
    original = original_model(source)
    loaded = tonnx.load(original)
    sessions = {"original": _session(original), "control": _session(original)}
    predicted, status, opt_s = {}, {}, {}
    # One program, one session: an optimised model that is the original again (up to
    # names) is timed as the original, so noise between sessions is not read as a change.
    exported: dict[str, bytes] = {"original": canonical(original)}
    for cm, model in cms.items():
        t = time.perf_counter()
        res = optimise(loaded, model, args.time_limit)
        opt_s[cm] = time.perf_counter() - t
        predicted[cm] = res.speedup
        status[cm] = res.extraction_status
        out = tonnx.to_model(res.graph)
        data = canonical(out)
        same = next((k for k, v in exported.items() if v == data), None)
        exported[cm] = data
        sessions[cm] = sessions[same] if same else _session(out.SerializeToString())
    a = sessions["original"]
    feeds = random_feeds(a, {}, args.seed)
    ref = a.run(None, feeds)
    for cm in cms:
        out = sessions[cm].run(None, feeds)
        for p, q in zip(ref, out, strict=True):
            err = float(np.abs(p - q).max()) / max(float(np.abs(p).max()), 1e-30)
            if not err <= TOLERANCE:
                raise AssertionError(f"{name}/{cm}: outputs differ, relative error {err:.3g}")
    uniq = list(dict.fromkeys(sessions.values()))
    calls = [lambda s=s: s.run(None, feeds) for s in uniq]
    rounds = _rounds(calls, args.runs, args.min_seconds)
    runs = timing.rotating(calls, rounds=rounds, warmup=args.warmup)
    times = {id(s): t for s, t in zip(uniq, runs, strict=True)}
    med = {key: statistics.median(v) * 1e3 for key, v in times.items()}
    orig = times[id(sessions["original"])]
    return Row(
        model=name,
        original_ms=med[id(sessions["original"])],
        control_ms=med[id(sessions["control"])],
        predicted=predicted,
        optimized_ms={cm: med[id(sessions[cm])] for cm in cms},
        status=status,
        optimize_s=opt_s,
        ratios={k: timing.paired_ratio(times[id(s)], orig) for k, s in sessions.items()},
        rounds=rounds,
    )


def table(rows: list[Row], cms: list[str], args: argparse.Namespace, extra: str) -> str:
    """The markdown report."""
    head = (
        "| model | original (ms) | rounds | A/A | "
        + " | ".join(f"{cm} predicted | {cm} measured | {cm} error" for cm in cms)
        + " |"
    )
    lines = [
        f"onnxruntime CPUExecutionProvider, ORT_ENABLE_ALL, 2 intra-op threads, spinning off; "
        f"at least {args.runs} rounds of rotating runs, filling at least {args.min_seconds:g} s "
        f"(column rounds), after {args.warmup} warm-up runs (latencies: "
        "medians; ratios: medians of per-round ratios); A/A = the "
        f"original against a second session of itself (noise); predicted = cost before / "
        f"after under the model that guided the optimisation; measured = original / optimised "
        f"latency; error = predicted / measured - 1. {extra}",
        "",
        head,
        "|---|---:|---:|---:|" + "---:|---:|---:|" * len(cms),
    ]
    for r in rows:
        cells = [f"{r.model}", f"{r.original_ms:.3f}", f"{r.rounds}", f"{r.control:.3f}"]
        for cm in cms:
            cells += [f"{r.predicted[cm]:.3f}", f"{r.measured(cm):.3f}", f"{r.error(cm):+.1%}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for cm in cms:
        within = sum(abs(r.error(cm)) <= 0.03 for r in rows)
        above = sum(r.faster(cm) for r in rows)
        lines.append(
            f"- {cm}: |error| <= 3% on {within}/{len(rows)}; measured above 1 beyond the A/A "
            f"noise on {above}/{len(rows)} (programs the model changed)"
        )
    if "profile" in cms and "roofline" in cms:
        ge = sum(r.measured("profile") >= r.measured("roofline") - abs(r.control - 1) for r in rows)
        lines.append(
            f"- profile-guided measured >= roofline-guided (within A/A noise) on {ge}/{len(rows)}"
        )
    lines += [
        "",
        'Split by source (same run; "above 1" and ">=" use the A/A column as the noise, and '
        '"above 1" counts only programs the model predicted faster):',
        "",
        "| subset | cost model | \\|error\\| <= 3 % | measured above 1 beyond A/A | "
        "profile-guided >= roofline-guided |",
        "|---|---|---:|---:|---:|",
    ]
    for label, sub in (
        ("zoo", [r for r in rows if not r.model.startswith("onnx_real/")]),
        ("real", [r for r in rows if r.model.startswith("onnx_real/")]),
    ):
        if not sub:
            continue
        for cm in cms:
            within = sum(abs(r.error(cm)) <= 0.03 for r in sub)
            above = sum(r.faster(cm) for r in sub)
            ge = ""
            if cm == "profile" and "roofline" in cms:
                n = sum(
                    r.measured("profile") >= r.measured("roofline") - abs(r.control - 1)
                    for r in sub
                )
                ge = f"{n}/{len(sub)}"
            lines.append(
                f"| {label} ({len(sub)}) | {cm} | {within}/{len(sub)} | {above}/{len(sub)} | {ge} |"
            )
    return "\n".join(lines)


def plot(rows: list[Row], cms: list[str], path: Path) -> None:
    """Predicted vs measured, one point per model and cost model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 6))
    marks = {"roofline": "o", "profile": "s", "learned": "^", "learned-trees": "v"}
    vals = [v for r in rows for cm in cms for v in (r.predicted[cm], r.measured(cm))]
    lo, hi = min(vals + [0.95]) - 0.02, max(vals + [1.05]) + 0.02
    xs = np.linspace(lo, hi, 10)
    ax.plot(xs, xs, "k-", lw=0.8, label="predicted = measured")
    ax.fill_between(xs, xs / 1.03, xs * 1.03, color="0.85", label="±3%")
    for cm in cms:
        ax.scatter(
            [r.measured(cm) for r in rows],
            [r.predicted[cm] for r in rows],
            marker=marks.get(cm, "x"),
            label=cm,
        )
        for r in rows:
            ax.annotate(r.model, (r.measured(cm), r.predicted[cm]), fontsize=6, alpha=0.6)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured speedup (onnxruntime, original / optimised)")
    ax.set_ylabel("predicted speedup (cost before / after)")
    ax.set_title("cost models vs onnxruntime on this CPU")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--models",
        nargs="*",
        default=None,
        choices=models.ZOO,
        help="zoo names (default: all; none when given empty)",
    )
    p.add_argument("--onnx", nargs="*", default=[], help="ONNX files with static shapes")
    p.add_argument(
        "--real",
        nargs="*",
        default=[],
        choices=sorted(onnx_real.MODELS),
        help="models of bench/onnx_real.py (fetched or exported there; see --work)",
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/tensat_onnx_real"))
    p.add_argument("--export-python", default=sys.executable, help="python with the bench extra")
    p.add_argument("--cost-models", nargs="*", default=list(COST_MODELS))
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument(
        "--min-seconds",
        type=float,
        default=10.0,
        help="time the rounds of one model fill at least (more rounds for small models)",
    )
    p.add_argument("--time-limit", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        cms = {cm: _cost_model(cm) for cm in args.cost_models}
    except ValueError as e:  # an unknown name, or learned without a trained model
        p.error(str(e))
    extra = ""
    if "learned" in cms:
        extra = f"Learned model's stored held-out Spearman: {cms['learned'].spearman:.4f}."
    sources: list[tuple[str, object]] = [
        (n, models.get(n)) for n in (models.ZOO if args.models is None else args.models)
    ]
    sources += [(Path(f).stem, f) for f in args.onnx]
    if args.real:
        for name in args.real:
            spec = onnx_real.MODELS[name]
            path = onnx_real.fetch(name, spec, args.work, args.export_python)
            sources.append((f"onnx_real/{name}", (path, spec.input_shapes)))
    rows: list[Row] = []
    for name, src in sources:
        r = bench_model(name, src, cms, args)
        rows.append(r)
        print(
            f"{name}: A/A {r.control:.3f} "
            + " ".join(f"{cm} pred {r.predicted[cm]:.3f} meas {r.measured(cm):.3f}" for cm in cms),
            file=sys.stderr,
        )
    text = table(rows, list(cms), args, extra)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
        with args.out.with_suffix(".csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "cost_model", "predicted", "measured", "aa", "status"])
            for r in rows:
                for cm in cms:
                    w.writerow(
                        [r.model, cm, r.predicted[cm], r.measured(cm), r.control, r.status[cm]]
                    )
    if args.plot is not None:
        plot(rows, list(cms), args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
