"""Fixtures shared by the cost-model tests, and a header line on the reference data."""

from __future__ import annotations

import os

import pytest

# The cold-weight calibration streams four times the last-level cache per matrix size; a
# virtual machine that reports its host's cache (480 MiB) made one test stream 1.9 GB a
# size and hold 11 GB. The tests check the mechanism, not this machine's figure.
os.environ.setdefault("TENSAT_LLC_BYTES", str(32 << 20))


def pytest_report_header(config: pytest.Config) -> str:
    """Says whether ../shared/data (public reference data beside a development checkout) is
    there: the data-driven tests run on tests/fixtures always, on the reference files too
    when it is."""
    from reference_data import SHARED

    if SHARED.is_dir():
        return f"reference data: {SHARED} (tests also run on it)"
    return (
        "reference data: ../shared/data is absent (as in a clone); the data-driven tests run "
        "on tests/fixtures only (see tests/fixtures/README.md)"
    )


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
