"""The examples in the package's docstrings run and print what they say (doctest)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest
import tensat_py

MODULES = sorted(m.name for m in pkgutil.walk_packages(tensat_py.__path__, "tensat_py."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:  # an optional extra (learn, GPU) that is not installed
        pytest.skip(f"{name} needs {e.name}, not installed")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed"
