"""The ``tensat`` command.

``tensat optimize TARGET`` optimises a zoo model or a graph file and prints a table (or one
JSON object under ``--json``); ``tensat extract FILE.json`` extracts from an
egraph-serialize e-graph; ``tensat rules list`` shows the rules of a rule file and
``tensat rules export FILE --egglog OUT`` writes them as an egglog program.

Exit status: 0 on success; 2 on a user error (``error: ...`` in one line naming the file,
option or operator, never a traceback); 3 under ``tensat optimize --strict`` when the
extracted program failed verification (the input was kept). Options are checked by
:mod:`tensat_py.options`, the same code :func:`tensat_py.optimize` runs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tensat_py import options
from tensat_py.cli_shapes import input_shape_option, input_shapes

__all__ = ["main"]


#: Exit status of ``tensat optimize --strict`` when the candidate failed verification.
EXIT_UNVERIFIED = 3

#: The errors a user can cause (bad file, bad option); printed as one line, status 2.
USER_ERRORS = (ValueError, TypeError, OSError)


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def _one_line(e: BaseException) -> str:
    """An exception's message on one line (the first; a file's name stays in it)."""
    text = str(e).strip() or type(e).__name__
    if isinstance(e, OSError) and e.filename and str(e.filename) not in text:
        text = f"{e.filename}: {e.strerror or text}"
    return text.splitlines()[0] if text else type(e).__name__


def _known(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def _format_defaults() -> str:
    """``".model: taso, .onnx: taso+tensor+..."``: each front end's default rules."""
    from tensat_py.frontends import frontends

    return ", ".join(f"{'/'.join(fe.suffixes)}: {fe.default_rules}" for fe in frontends().values())


_EXTRACTOR_OPTION = click.option(
    "--extractor",
    default="ilp",
    show_default=True,
    help="Extraction: ilp (the paper's integer program, optimal within --time-limit), "
    "greedy (cheapest e-node per e-class by tree cost), greedy-dag (shared sub-terms "
    "counted once), beam (greedy-dag keeping the 4 best sub-DAG sets per e-class; never "
    "worse than greedy-dag). See docs/extraction.md.",
)
_SOLVER_OPTION = click.option(
    "--solver",
    default="highs",
    show_default=True,
    help="ILP solver: highs (HiGHS through highspy) or cbc (CBC through PuLP, as in the paper).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="tensat-py", prog_name="tensat")
@click.pass_context
def main(ctx: click.Context) -> None:
    """tensat-py: e-graph superoptimizer for tensor programs."""
    ctx.with_resource(options.cli_spelling())  # messages name --flags, not keywords


@main.command()
@click.argument("target")
@click.option(
    "--rules",
    default=None,
    help="Rule file name or path, or a built-in set: fold (constant folding), layout "
    "(squeeze-excite gate upsampled for onnxruntime's NCHWc layout); several joined by + "
    f"(taso+tensor). Default: the input format's (taso for zoo models; {_format_defaults()}).",
)
@click.option(
    "--k-multi",
    type=int,
    default=None,
    help="Iterations with multi-pattern rules. Default: 2 for programs (or regions) of at "
    "most 256 operators, else 1.",
)
@click.option(
    "--node-limit",
    type=int,
    default=None,
    help="E-node limit (default: 150 per operator of the program or region explored, at "
    "most 50,000).",
)
@click.option("--iter-limit", default=15, show_default=True, help="Iteration limit.")
@click.option(
    "--time-limit",
    default=60.0,
    show_default=True,
    help="Seconds for the whole command: loading, exploration, extraction, verification "
    "and writing.",
)
@click.option(
    "--cycle-filter",
    default="efficient",
    show_default=True,
    help=f"Cycle filtering: {_known(options.CYCLE_FILTERS)}.",
)
@_EXTRACTOR_OPTION
@_SOLVER_OPTION
@click.option(
    "--device",
    default=None,
    help="The device the cost model prices for: a roofline preset (t4, a100, h100, cpu); "
    "for profile and learned, cpu (this machine, onnxruntime) or gpu/cuda (CuPy); for xla, "
    "cpu. Default: the input format's (cpu for .hlo, which XLA's CPU client runs here; "
    "else t4).",
)
@click.option(
    "--cost-model",
    "cost_model",
    default=None,
    help="Cost model: roofline (FLOPs and bytes against the --device preset; predicted), "
    "profile (each operator timed on --device, cached), learned (gradient-boosted trees "
    "on the profile cache), rlo (RLO's unitless costs, Knossos .ks programs only), xla "
    "(XLA's CPU backend measured through jaxlib, its fusions included; --device cpu). "
    "Default: the input format's (rlo for .ks, xla for .hlo on --device cpu, its default; else "
    "roofline). See docs/cost-models.md.",
)
@click.option("--no-verify", is_flag=True, help="Skip numerical verification.")
@click.option(
    "--strict",
    is_flag=True,
    help=f"Exit with status {EXIT_UNVERIFIED} when the extracted program fails verification.",
)
@click.option(
    "--min-gain",
    type=float,
    default=None,
    help="Keep the input unless the optimised program is at least this fraction cheaper "
    "(default: the input format's; 0.02 for ONNX, 0 otherwise).",
)
@click.option(
    "-j",
    "--jobs",
    type=int,
    default=1,
    show_default=True,
    help="Region classes of a large program explored at once on this many local processes.",
)
@click.option(
    "--ray",
    "ray_address",
    default=None,
    help="Explore region classes as tasks of the Ray cluster at this address ('local': "
    "start one); needs the ray extra.",
)
@click.option(
    "--gap",
    type=float,
    default=1e-6,
    show_default=True,
    help="The ILP stops at this proved relative gap to its lower bound (0.01: within 1 %).",
)
@click.option(
    "--confirm/--no-confirm",
    default=None,
    help="Time input and result side by side, with an A/A, on the input's runtime "
    "(onnxruntime; XLA on the CPU for .hlo) and keep the result only if it runs at least "
    "1% faster (default: on for --cost-model profile/learned/xla on --device cpu).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress display on stderr.")
@click.option("--dump-egraph", type=click.Path(dir_okay=False), help="Write the e-graph as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--policy",
    type=click.Choice(["default", "learned", "astar"]),
    default="default",
    show_default=True,
    help="Rule choice (tensat_py.policies): learned = Tensat's schedule, then one learned "
    "multi-pattern iteration on its program, kept where cheaper; astar = A* over rewrite "
    "sequences. learned/astar need the 'learn' extra.",
)
@click.option(
    "--no-merge-trees",
    is_flag=True,
    help="Apply merges pairwise only, as Tensat does (default: also as merge trees over "
    "every group of three or more operators sharing an input, in the first iteration).",
)
@click.option(
    "--all-orders",
    is_flag=True,
    help="Apply mirror-symmetric merges to both orders of each pair of e-classes, as "
    "Tensat does (default: once per pair; `tensat rules list` marks them).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the optimised program; the suffix picks the format (.onnx: zoo and .model "
    "graphs get random weights).",
)
@click.option(
    "--prelude",
    type=click.Path(dir_okay=False),
    default=None,
    help="Knossos .ks only: a .ks file whose defs and edefs the program calls (knossos-ksc's "
    "src/runtime/prelude.ks); it types the calls, the evaluator runs its defs and RLO's cost "
    "model prices them; never optimised or written (default: $TENSAT_KS_PRELUDE).",
)
@input_shape_option()
def optimize(
    target: str,
    rules: str | None,
    k_multi: int | None,
    node_limit: int | None,
    iter_limit: int,
    time_limit: float,
    cycle_filter: str,
    extractor: str,
    solver: str,
    device: str | None,
    no_verify: bool,
    dump_egraph: str | None,
    as_json: bool,
    policy: str,
    output: str | None,
    strict: bool,
    min_gain: float | None,
    confirm: bool | None,
    quiet: bool,
    gap: float = 1e-6,
    jobs: int = 1,
    ray_address: str | None = None,
    input_shape: tuple[str, ...] = (),
    cost_model: str | None = None,
    all_orders: bool = False,
    no_merge_trees: bool = False,
    prelude: str | None = None,
) -> None:
    """Optimise TARGET: a zoo name (bert, nasrnn, nasneta, resnext50, inceptionv3,
    squeezenet, vgg19, resnet50), a TASO .model graph, an .onnx model, an XLA .hlo module
    or a Knossos .ks program.

    Prints the cost before and after as the cost model predicts it (named with its
    device), the measured speedup where confirmation timed both programs, and where the
    time went."""
    import tensat_py
    from tensat_py._files import check_writable
    from tensat_py.budget import Budget
    from tensat_py.frontends import for_path
    from tensat_py.frontends.onnx.importer import FIXED_DIMS
    from tensat_py.verify import VerificationError

    budget = Budget(time_limit)  # the whole command: loading and writing included
    try:
        options.validate_optimize_options(
            k_multi=k_multi,
            node_limit=node_limit if node_limit is not None else 1,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cycle_filter=cycle_filter,
            extractor=extractor,
            solver=solver,
            order_vars="real",
            device=device,
            cost_model=cost_model,
        )
        if node_limit is not None:
            options.check_explores("node_limit", node_limit)
        options.check_fraction("gap", gap)
        options.check_explores("jobs", jobs)
        options.check_explores("iter_limit", iter_limit)
        for path in (output, dump_egraph):
            if path:
                check_writable(path)
        if output:
            for_path(output)  # an unsupported suffix fails before the work
        shapes = input_shapes(input_shape)
        load_options: dict[str, Any] = {"input_shapes": shapes} if shapes else {}
        if prelude is not None:
            if Path(target).suffix.lower() not in (".ks", ".kso"):
                raise ValueError(f"--prelude: only Knossos .ks programs take one, not {target}")
            if not Path(prelude).is_file():
                raise FileNotFoundError(f"--prelude: no file {prelude!r}")
            load_options["prelude"] = prelude
        with budget.phase("load"):
            graph = tensat_py.load(target, **load_options)
        result = tensat_py.optimize(
            graph,
            rules=rules,
            k_multi=k_multi,
            node_limit=node_limit,
            iter_limit=iter_limit,
            time_limit=time_limit,
            cycle_filter=cycle_filter,
            extractor=extractor,
            solver=solver,
            device=device,
            cost_model=cost_model,
            verify=not no_verify,
            dump_egraph=dump_egraph,
            progress=not (quiet or as_json),
            **({"policy": policy} if policy != "default" else {}),
            **({"min_gain": min_gain} if min_gain is not None else {}),
            **({"confirm": confirm} if confirm is not None else {}),
            **({"mirror_once": False} if all_orders else {}),
            **({"merge_trees": False} if no_merge_trees else {}),
            gap=gap,
            jobs=jobs,
            ray=ray_address,
            budget=budget,
        )
        if output:
            with budget.phase("save"):
                tensat_py.save(result.graph, output, source=graph)
            _count_save(result, budget)
    except VerificationError as e:  # about the program the user gave: name it
        _fail(f"{target}: {_one_line(e)}")
        return
    except ImportError as e:  # an optional extra (learned policies) is not installed
        _fail(_one_line(e))
        return
    except USER_ERRORS as e:
        _fail(_one_line(e))
        return
    if result.defs:  # a program of functions (Knossos)
        _print_functions(result, as_json, output)
        return
    opaque = _opaque_ops(result.graph)
    fixed = graph.meta.get(FIXED_DIMS, {})
    if as_json:
        extra: dict[str, Any] = {
            "operators": {
                "before": graph.num_operators(),
                "after": result.graph.num_operators(),
                "counted": "the nodes an output needs, less inputs, weights and literals",
            }
        }
        if opaque:
            extra["opaque_operators"] = opaque
        if fixed:
            extra["fixed_dims"] = fixed
        click.echo(json.dumps({**result.to_json(), **extra}))
    else:
        _print_result(target, graph, result)
        if opaque:
            listed = ", ".join(f"{op} x{n}" for op, n in opaque.items())
            Console().print(f"opaque operators (kept as they are): {listed}")
        if fixed:
            listed = ", ".join(f"{k} {v}" for k, v in fixed.items())
            where = f"{output} has" if output else "the optimised program has"
            Console().print(
                f"symbolic input dimensions fixed by --input-shape: {listed}; {where} "
                "these static sizes",
                highlight=False,
            )
        if output:
            Console().print(f"wrote {output}")
    if strict and result.extraction_status == "fallback-unverified":
        click.echo(f"error: {result.message}", err=True)
        sys.exit(EXIT_UNVERIFIED)


def _count_save(result: Any, budget: Any) -> None:
    """Adds the time spent writing the output to the result's phases and total."""
    st = result.stats
    total = budget.elapsed()
    st["phase_seconds"]["save"] = budget.seconds.get("save", 0.0)
    st["total_seconds"] = total
    st["phase_share"] = {
        k: (v / total if total > 0 else 0.0) for k, v in st["phase_seconds"].items()
    }


def _print_functions(result: Any, as_json: bool, output: str | None) -> None:
    """``tensat optimize prog.ks``: the result of the pipeline's function stage, one row
    per def (costs in the cost model's unit, RLO cost units, predicted)."""
    if as_json:
        click.echo(json.dumps(result.to_json()))
        return
    table = Table(
        title=f"tensat optimize (Knossos; costs in {result.unit}, predicted by {result.basis})"
    )
    for col in ("def", "cost before", "cost after", "status", "seconds"):
        table.add_column(col)
    for d in result.defs:
        table.add_row(
            d.name, f"{d.cost_before:.1f}", f"{d.cost_after:.1f}", d.status, f"{d.seconds:.2f}"
        )
    table.add_row("total", f"{result.cost_before:.1f}", f"{result.cost_after:.1f}", "", "")
    console = Console()
    console.print(table)
    counts = ", ".join(f"{n} {k}" for k, n in result.stats.get("functions", {}).items())
    before, after = result.cost_before, result.cost_after
    drop = f" ({(after - before) / before * 100:+.1f} %)" if before > 0 else ""
    console.print(
        f"predicted cost {before:.1f} -> {after:.1f} {result.unit}{drop} ({result.basis}); "
        f"defs: {counts}; {result.stats['total_seconds']:.1f} s",
        highlight=False,
    )
    if result.verify is not None:
        console.print(f"verification ({result.verify.runner}): {result.verify.message}")
    if output:
        console.print(f"wrote {output}")


def _opaque_ops(graph: Any) -> dict[str, int]:
    from tensat_py.frontends.onnx import opaque_ops

    return opaque_ops(graph)


def _operators_row(before: Any, after: Any) -> str:
    """``"113 / 169 (45 weight-only)"``: operators as :meth:`Graph.num_operators` counts
    them, with the weight-only ones (pre-computed at inference, cost 0) named."""
    text = f"{before.num_operators()} / {after.num_operators()}"
    consts = [sum(g.operator_counts(weight_only=True).values()) for g in (before, after)]
    if any(consts):
        text += f" ({consts[0]} / {consts[1]} weight-only)"
    return text


def _operator_change(before: Any, after: Any) -> str:
    """What changed among the operators that run (weight-only ones left out), largest
    changes first: ``"matmul -16, split +9, split_0 +9, split_1 +9"``; ``""`` when none.
    Explains why a cheaper program can have more operators (the split and concat that
    a merged matmul needs)."""
    a = before.operator_counts(weight_only=False)
    b = after.operator_counts(weight_only=False)
    diff = {op: b.get(op, 0) - a.get(op, 0) for op in {*a, *b}}
    changed = sorted((op for op in diff if diff[op]), key=lambda op: (-abs(diff[op]), op))
    return ", ".join(f"{op} {diff[op]:+d}" for op in changed)


def _print_result(target: str, graph: Any, result: Any) -> None:
    console = Console()
    st = result.stats
    table = Table(title=f"tensat optimize {target}", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("operators before / after", _operators_row(graph, result.graph))
    change = _operator_change(graph, result.graph)
    if change:
        table.add_row("  change in operators run", change)
    table.add_row("predicted by", result.basis)
    if st.get("pricing", {}).get("described"):
        table.add_row("  priced as", st["pricing"]["described"])
    table.add_row("cost before (ms, predicted)", f"{result.cost_before * 1e3:.4f}")
    table.add_row("cost after (ms, predicted)", f"{result.cost_after * 1e3:.4f}")
    table.add_row(
        "predicted speedup", f"{result.speedup:.3f}x ({(result.speedup - 1) * 100:.1f} %)"
    )
    table.add_row("extraction status", result.extraction_status)
    table.add_row("e-nodes / e-classes", f"{st['enodes']} / {st['eclasses']}")
    table.add_row("iterations (stop reason)", f"{st['iterations']} ({st['stop_reason']})")
    table.add_row("filtered e-nodes", str(st["filtered_enodes"]))
    phases = st.get("phase_seconds", {})
    share = st.get("phase_share", {})
    for label, key in (
        ("load (s)", "load"),
        ("setup (s)", "setup"),
        ("exploration (s)", "exploration"),
        ("extraction (s)", "extraction"),
        ("refinement (s)", "refinement"),
        ("verification (s)", "verification"),
        ("confirmation (s)", "confirmation"),
        ("save (s)", "save"),
    ):
        shown = {"confirmation": "measured_speedup", "refinement": "refinement"}.get(key)
        if key in phases and (shown is None or shown in st):
            table.add_row(label, f"{phases[key]:.3f} ({share.get(key, 0.0) * 100:.0f} %)")
    if "refinement" in st:
        r = st["refinement"]
        table.add_row("refined e-classes / trials", f"{r['switched']} / {r['trials']}")
    if "measured_speedup" in st:
        table.add_row(
            f"measured speedup ({st.get('measured_on', 'onnxruntime')})",
            f"{st['measured_speedup']:.3f}x ({st.get('confirm_rounds', '?')} rounds)",
        )
        aa, aa_iv = st.get("measured_aa"), st.get("measured_aa_interval")
        if isinstance(aa, float) and aa == aa and aa_iv:
            table.add_row(
                "  A/A (input vs its copy)", f"{aa:.3f}x [{aa_iv[0]:.3f}, {aa_iv[1]:.3f}]"
            )
        if st.get("measured_runtime"):
            on = st["measured_runtime"]
            version = st.get("measured_runtime_version")
            table.add_row("  measured on", f"{on} ({version})" if version else on)
    if st.get("policy") == "learned":
        table.add_row(
            "learned second stage (s)",
            f"{st['policy_seconds']:.3f}: {st['policy_admitted']} of "
            f"{st['policy_offered']} multi-pattern matches admitted",
        )
    if "total_seconds" in st:
        table.add_row("total (s) / time limit", f"{st['total_seconds']:.3f} / {st['time_limit']:g}")
    if "regions" in st:
        r = st["regions"]
        table.add_row(
            "regions (classes explored once)",
            f"{r['regions']} ({r['classes']}): {r['explored_operators']} of {r['operators']} "
            "operators explored",
        )
    if result.verify is not None:
        v = result.verify
        table.add_row(
            f"candidate verified ({v.runner})",
            f"{'yes' if v.passed else 'NO'}: max abs {v.max_abs_error:.2e}, "
            f"max rel {v.max_rel_error:.2e}",
        )
    console.print(table)
    console.print(
        "operators: the nodes an output needs, less inputs, weights and literals; "
        "weight-only ones are pre-computed at inference (cost 0)",
        style="dim",
    )
    if result.message:
        console.print(result.message)


@main.command("extract")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_EXTRACTOR_OPTION
@_SOLVER_OPTION
@click.option("--time-limit", default=30.0, show_default=True, help="ILP seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def extract_cmd(file: str, extractor: str, solver: str, time_limit: float, as_json: bool) -> None:
    """Extract from an egraph-serialize JSON e-graph FILE."""
    from tensat_py.egraph import load_json
    from tensat_py.extract import extract

    try:
        options.check_choice("extractor", extractor, options.EXTRACTORS)
        options.check_choice("solver", solver, options.SOLVERS)
        options.check_seconds("time_limit", time_limit)
        problem = load_json(file)
        res = extract(problem, extractor=extractor, solver=solver, time_limit=time_limit)
    except USER_ERRORS as e:
        _fail(_one_line(e))
        return
    names = problem.class_names or [str(c) for c in range(problem.num_classes)]
    node_names = problem.node_names or [str(n) for n in range(problem.num_nodes)]
    choices = {names[c]: node_names[n] for c, n in sorted(res.choices.items())}
    if as_json:
        from tensat_py.pipeline import _finite

        out = {**res.to_json(), "choices": choices}
        click.echo(json.dumps(_finite(out)))
        return
    click.echo(
        f"cost {res.cost:.6g}  status {res.status}  seconds {res.seconds:.3f}  "
        f"classes {len(choices)}  {res.message}"
    )


@main.group()
def rules() -> None:
    """Inspect rule files."""


@rules.command("list")
@click.argument("file", default="taso")
def rules_list(file: str) -> None:
    """List the rules of FILE (a shipped name such as taso, or a path)."""
    from tensat_py.rule_files import load_rules

    try:
        rs = load_rules(file)
    except USER_ERRORS as e:
        _fail(_one_line(e))
        return
    once = trees = 0
    for k, (name, srcs, tgts, line) in enumerate(rs.describe()):
        mark = ""
        if rs.mirror_symmetric(k):
            once += 1
            mark = "  [mirror-symmetric: once per pair"
            if rs.merge_tree(k):
                trees += 1
                mark += "; merge tree in the first iteration"
            mark += "]"
        click.echo(f"{line:5d}  {name}: {', '.join(srcs)} => {', '.join(tgts)}{mark}")
    click.echo(
        f"{len(rs)} rules ({rs.num_multi()} multi-pattern, {once} mirror-symmetric, "
        f"{trees} with merge trees)"
    )


@rules.command("export")
@click.argument("file")
@click.option(
    "--egglog",
    "egglog_out",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the rules as an egglog program to this file.",
)
def rules_export(file: str, egglog_out: str) -> None:
    """Write the rules of FILE (a shipped name such as taso, or a path) as an egglog
    program; rules egglog cannot express are listed on stderr with the reason."""
    from tensat_py._files import atomic_write
    from tensat_py.egglog_export import export_rules

    try:
        exported = export_rules(file)
        atomic_write(egglog_out, exported.program)
    except USER_ERRORS as e:
        _fail(_one_line(e))
        return
    for name, reason in exported.skipped:
        click.echo(f"not exported: {name}: {reason}", err=True)
    click.echo(
        f"wrote {egglog_out}: {len(exported.rules)} rules exported, "
        f"{len(exported.skipped)} not exported"
    )


# -- subcommands from their own modules are registered below (one import + add_command each) --
from tensat_py.cli_bench import bench  # noqa: E402

main.add_command(bench)
from tensat_py.cli_rules_check import check  # noqa: E402

rules.add_command(check)
from tensat_py.cli_profile import profile  # noqa: E402

main.add_command(profile)


if __name__ == "__main__":
    main()
