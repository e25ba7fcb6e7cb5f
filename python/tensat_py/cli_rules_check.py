"""``tensat rules check``: numerical soundness check of rule files.

Registered on the ``rules`` group in :mod:`tensat_py.cli`. Exit status: 0 when no rule
failed, 1 when some rule is FAIL, 2 on a user error (missing file, a rule file that does
not parse: ``error: file:line:col: message``), never a traceback.
"""

from __future__ import annotations

import json
import sys

import click

__all__ = ["check"]

#: Default search budget; equal to ``tensat_py.rules_check.ATTEMPTS`` (a test checks), kept
#: here so that ``tensat --help`` does not import NumPy and the executor.
ATTEMPTS = 3000


@click.command("check")
@click.argument("files", nargs=-1)
@click.option(
    "--samples",
    default=10,
    show_default=True,
    help="Valid random instances (shapes and inputs) evaluated per rule.",
)
@click.option(
    "--attempts",
    default=ATTEMPTS,
    show_default=True,
    help="Search budget per rule: candidate values tried for its variables (all samples "
    "together); a rule with no valid instance within it is UNTESTABLE.",
)
@click.option("--seed", default=0, show_default=True, help="Random seed.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("-v", "--verbose", is_flag=True, help="List every rule, not only the non-PASS.")
def check(
    files: tuple[str, ...], samples: int, attempts: int, seed: int, as_json: bool, verbose: bool
) -> None:
    """Check every rule of FILES (shipped names such as taso, or paths; default: all
    shipped rule files) by evaluating both sides on random inputs in float64."""
    from tensat_py.rules_check import check_files

    try:
        report = check_files(list(files), samples=samples, attempts=attempts, seed=seed)
    except (ValueError, FileNotFoundError, OSError) as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if as_json:
        click.echo(json.dumps(report.to_json()))
    else:
        for r in report.results:
            if r.status == "PASS" and not verbose:
                continue
            where = f"{r.file}:{r.line}"
            if r.status == "PASS":
                click.echo(
                    f"PASS        {r.name} ({where}): {r.instances} instances, "
                    f"max rel error {r.max_rel_error:.2g}"
                )
            elif r.status == "FAIL":
                click.echo(f"FAIL        {r.name} ({where}): {r.reason}")
                click.echo(
                    f"            instance: {r.shapes}"
                    + (f", weights {r.weights}" if r.weights else "")
                )
            else:
                click.echo(f"UNTESTABLE  {r.name} ({where}): {r.reason}")
        c = report.counts
        click.echo(
            f"{len(report.results)} rules: {c['PASS']} PASS, {c['FAIL']} FAIL, "
            f"{c['UNTESTABLE']} UNTESTABLE (float64, relative tolerance {report.tolerance:g})"
        )
    sys.exit(0 if report.ok else 1)
