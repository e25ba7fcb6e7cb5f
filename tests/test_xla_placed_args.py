"""Timing on XLA (``runtime.xla_exec``): a module's arguments are placed on the device once,
as a program with fixed inputs runs, so no host copy is timed with its run."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from tensat_py.runtime import xla_exec

_ADD = """HloModule add

ENTRY main {
  x = f32[64,64]{1,0} parameter(0)
  y = f32[64,64]{1,0} parameter(1)
  ROOT s = f32[64,64]{1,0} add(x, y)
}
"""


@pytest.fixture
def puts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``jax.device_put`` calls (one entry per call)."""
    seen: list[int] = []
    real = jax.device_put

    def counting(*a: object, **k: object) -> object:
        seen.append(1)
        return real(*a, **k)

    monkeypatch.setattr(jax, "device_put", counting)
    return seen


def _args() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2)]


def test_a_placed_call_copies_its_arguments_once(puts: list[int]) -> None:
    exe = xla_exec._compile_cached.__wrapped__(_ADD)
    x, y = _args()
    call = xla_exec.placed_call(exe, [x, y])
    assert len(puts) == 2
    for _ in range(5):
        out = call()
    assert len(puts) == 2
    np.testing.assert_allclose(np.asarray(out[0][0]), x + y, rtol=1e-6)
    # a module that donates its arguments gets them anew on every call
    fresh = xla_exec.placed_call(exe, [x, y], donates=True)
    fresh()
    fresh()
    assert len(puts) == 2 + 4


def test_interleaved_timing_does_not_copy_arguments_per_run(puts: list[int]) -> None:
    args = _args()
    timings = xla_exec.time_interleaved([_ADD, _ADD], args, budget_s=10.0, max_rounds=40)
    assert all(len(t.runs) == 40 for t in timings)
    # one placement shared by both modules, and per module the untimed run that fetches
    # the outputs
    assert len(puts) == len(args) + 2 * len(args)
    np.testing.assert_allclose(timings[0].outputs[0], args[0] + args[1], rtol=1e-6)


def test_programs_prepared_on_the_same_inputs_share_one_placed_copy(
    puts: list[int], tmp_path: object
) -> None:
    import tensat_py
    from tensat_py.runtime.protocol import XlaCpu, _xla_runnable

    path = tmp_path / "add.hlo"  # type: ignore[operator]
    path.write_text(_ADD)
    g = tensat_py.load(str(path))
    rt = XlaCpu()
    inputs = rt.inputs(g, seed=0)
    before = len(puts)
    runs = [rt.prepare(g, inputs, source=g) for _ in range(3)]  # input, A/A, candidate
    outs = [r() for r in runs]
    assert len(puts) - before == len(inputs)  # one placed copy for the three programs
    np.testing.assert_allclose(np.asarray(outs[2][0][0]), inputs[0] + inputs[1], rtol=1e-6)
    # without a shared placement, each program gets a copy of its own
    _xla_runnable(_ADD, inputs)
    _xla_runnable(_ADD, inputs)
    assert len(puts) - before == 3 * len(inputs)
