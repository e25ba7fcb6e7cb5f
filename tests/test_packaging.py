"""Packaging: version, licence, typed stubs for the native module, the public surface, and a
README that links only files a user has."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import metadata
from pathlib import Path

import tensat_py
import tensat_py._core as core
from click.testing import CliRunner
from tensat_py.cli import main

ROOT = Path(__file__).resolve().parents[1]
PKG = Path(tensat_py.__file__).parent


def test_version_is_the_distributions() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert tensat_py.__version__ == project["version"] == metadata("tensat-py")["Version"]
    out = CliRunner().invoke(main, ["--version"])
    assert out.exit_code == 0 and out.output.strip() == f"tensat, version {project['version']}"


def test_licence_file_is_mit_and_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert project["urls"] and any(c.startswith("Typing") for c in project["classifiers"])


def test_core_stub_lists_the_native_modules_real_surface() -> None:
    stub = (PKG / "_core.pyi").read_text()
    public = {n for n in dir(core) if not n.startswith("_")}
    declared = set(re.findall(r"^(?:def|class) (\w+)", stub, re.M))
    assert public <= declared, public - declared
    for cls in ("EGraph", "RuleSet", "TypeChecker"):
        methods = {m for m in dir(getattr(core, cls)) if not m.startswith("_")}
        body = stub.split(f"class {cls}")[1].split("\nclass ")[0]
        assert methods <= set(re.findall(r"def (\w+)", body)), cls
    assert (PKG / "py.typed").is_file()


def test_public_surface_leaves_the_native_module_out() -> None:
    assert "_core" not in tensat_py.__all__
    for name in tensat_py.__all__:
        assert hasattr(tensat_py, name), name


def test_readme_links_only_files_a_user_has() -> None:
    text = (ROOT / "README.md").read_text()
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target
    for path in re.findall(r"`((?:docs|bench|rules|python|tests)/[\w./-]+)`", text):
        assert (ROOT / path).exists(), path
    assert (ROOT / "docs" / "design.md").is_file()
