"""Where the data-driven tests find their files.

Two sources: the project's own fixtures in ``tests/fixtures`` (in every checkout; see
``tests/fixtures/README.md``), and the public reference data in ``../shared/data``, which
sits beside a development checkout only (a clone has none; nothing from it is copied into
the repository). Tests run on the fixtures always and on the reference files as extra
parameters when that folder is there, so a clone tests the same behaviours.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
#: ``../shared/data`` beside the checkout (absent in a clone).
SHARED = TESTS.parents[1] / "shared" / "data"


def shared(*parts: str) -> Path | None:
    """``../shared/data/<parts>`` when it exists there, else None."""
    path = SHARED.joinpath(*parts)
    return path if path.exists() else None


def fixture(*parts: str) -> Path:
    """``tests/fixtures/<parts>`` (fails loudly when a fixture is missing)."""
    path = FIXTURES.joinpath(*parts)
    assert path.exists(), f"missing fixture {path}; see tests/fixtures/README.md"
    return path


def skip_reason(what: str, folder: str, twin: str) -> str:
    """An actionable reason for a test that only the reference data can run."""
    return (
        f"needs {what} from ../shared/data/{folder} (public reference data kept beside a "
        f"development checkout, not in a clone); the same checks run on tests/fixtures/{twin}"
    )


def param(path: Path, *values: object, source: str = "fixture") -> Any:
    """``pytest.param(path, *values)`` with the id ``<source>:<file name>``."""
    return pytest.param(path, *values, id=f"{source}:{path.name}")


@cache
def egraph_facts() -> dict[str, dict[str, object]]:
    """``tests/fixtures/egraphs/optimum.json``: per fixture e-graph its node and class counts,
    whether its classes form a cycle, and its optimum DAG cost, all computed from the raw
    JSON by ``tests/fixtures/make_fixtures.py`` without tensat_py's extraction code."""
    return json.loads(fixture("egraphs", "optimum.json").read_text())


def fixture_optimum(name: str) -> float:
    """The independently computed optimum of the fixture e-graph ``name``."""
    return float(egraph_facts()[name]["optimum"])  # type: ignore[arg-type]
