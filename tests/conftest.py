"""Fixtures shared by the cost-model tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A profile cache of its own (``TENSAT_CACHE_DIR``) for one test."""
    monkeypatch.setenv("TENSAT_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def block():
    """onnxruntime's NCHWc block size on this CPU; skips where it runs no NCHWc."""
    from tensat_py.cost import layout

    b = layout.nchwc_block()
    if not b:
        pytest.skip("onnxruntime runs no NCHWc convolution on this CPU (no AVX2)")
    return b
