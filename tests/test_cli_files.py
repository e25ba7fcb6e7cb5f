"""Output files: the umask decides their mode, errors name the user's path, `tensat bench`
writes a new folder by default and never overwrites without --force; progress display."""

from __future__ import annotations

import io
import os
import stat
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from tensat_py import models
from tensat_py.bench import default_out
from tensat_py.cli import main
from tensat_py.progress import PhaseDisplay


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o640
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_output_and_dump_follow_the_umask(tmp_path: Path, umask_027: int) -> None:
    out, dump = tmp_path / "n.onnx", tmp_path / "n.json"
    args = ["optimize", "nasrnn", "--extractor", "greedy", "--node-limit", "300", "-q"]
    res = CliRunner().invoke(main, [*args, "-o", str(out), "--dump-egraph", str(dump)])
    assert res.exit_code == 0, res.output
    assert _mode(out) == umask_027 and _mode(dump) == umask_027


def test_missing_output_folder_names_the_users_path(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "x.onnx"
    res = CliRunner().invoke(main, ["optimize", "nasrnn", "-o", str(target)])
    assert res.exit_code == 2
    assert f"error: {target}: folder {target.parent} does not exist" in res.output
    assert ".tmp" not in res.output and not target.parent.exists()


def test_unwritable_folder_names_the_users_path(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    res = CliRunner().invoke(main, ["optimize", "nasrnn", "-q", "-o", str(ro / "x.onnx")])
    assert res.exit_code == 2 and f"{ro / 'x.onnx'}: cannot write" in res.output
    assert ".tmp" not in res.output


@pytest.fixture
def tiny_zoo(monkeypatch):
    monkeypatch.setitem(models.ZOO, "nasrnn", lambda: models.nasrnn(steps=2, hidden=8))


def _bench(args: list[str]):
    base = ["bench", "--models", "nasrnn", "--k-multi", "1", "--tables", "1"]
    return CliRunner().invoke(main, [*base, "--solver", "highs", "--no-progress", *args])


def test_bench_writes_a_new_folder_by_default(tiny_zoo, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = _bench([])
    assert res.exit_code == 0, res.output
    (made,) = list(tmp_path.glob("tensat-bench-*"))
    assert (made / "report.md").is_file()
    assert default_out() != made.relative_to(tmp_path)  # the next default is new again


def test_bench_never_overwrites_without_force(tiny_zoo, tmp_path) -> None:
    out = tmp_path / "results"
    out.mkdir()
    (out / "report.md").write_text("committed results")
    res = _bench(["--out", str(out)])
    assert res.exit_code == 2 and f"{out}: folder exists and holds files" in res.output
    assert (out / "report.md").read_text() == "committed results"
    res = _bench(["--out", str(out), "--force"])
    assert res.exit_code == 0, res.output
    assert (out / "report.md").read_text() != "committed results"


def _terminal() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=80), buf


def test_progress_shows_a_slow_phase_and_its_seconds() -> None:
    console, buf = _terminal()
    display = PhaseDisplay(True, delay=0.05, console=console)
    with display.phase("extraction"):
        time.sleep(0.3)
    assert "extraction: 0.3 s" in buf.getvalue()


def test_progress_is_silent_for_quick_phases_and_when_off() -> None:
    console, buf = _terminal()
    with PhaseDisplay(True, delay=0.5, console=console).phase("exploration"):
        pass
    with PhaseDisplay(False, delay=0.0, console=console).phase("verification"):
        time.sleep(0.05)
    assert buf.getvalue() == ""


def test_json_output_is_one_object_without_progress_lines() -> None:
    res = CliRunner().invoke(main, ["optimize", "vgg19", "--extractor", "greedy", "--json"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("\n") == 1 and res.stdout.startswith("{")
    assert "verification" not in res.stderr
