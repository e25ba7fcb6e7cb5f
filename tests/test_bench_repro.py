"""The examples in bench/xla_repro.py's helpers (the report's bands, pace split and the
most sessions one prediction can agree with) run and print what they say (doctest)."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path

REPRO = Path(__file__).resolve().parents[1] / "bench" / "xla_repro.py"


def test_xla_repro_helpers_do_what_their_examples_say() -> None:
    spec = importlib.util.spec_from_file_location("xla_repro", REPRO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = doctest.testmod(module)
    assert result.attempted >= 7
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed"
