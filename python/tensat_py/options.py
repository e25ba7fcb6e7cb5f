"""Argument validation shared by :func:`tensat_py.optimize` and the ``tensat`` command.

Every option of an optimisation is checked here, once, before any work starts: limits are
non-negative integers (or a positive, finite number of seconds), names are one of the known
values, and an unknown name gets a "did you mean" suggestion (``difflib``). The command line
calls the same functions, so ``tensat optimize bert --k-multi -1`` and
``optimize(graph, k_multi=-1)`` fail with the same one-line message.

>>> check_count("k_multi", -1)
Traceback (most recent call last):
...
ValueError: k_multi: must be a non-negative integer, got -1
>>> suggest("greedy_dag", EXTRACTORS)
" (did you mean 'greedy-dag'?)"
"""

from __future__ import annotations

import contextvars
import difflib
import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, get_args

__all__ = [
    "CycleFilter",
    "Extractor",
    "Solver",
    "OrderVars",
    "Device",
    "CostModelName",
    "EXTRACTORS",
    "SOLVERS",
    "CYCLE_FILTERS",
    "ORDER_VARS",
    "DEVICES",
    "COST_MODELS",
    "suggest",
    "check_choice",
    "check_count",
    "check_explores",
    "check_fraction",
    "check_seconds",
    "check_zoo_name",
    "cli_spelling",
    "option_name",
    "spell",
    "GPU_ALIASES",
    "validate_optimize_options",
]

Extractor = Literal["ilp", "greedy", "greedy-dag", "beam"]
"""Extraction algorithm (``docs/extraction.md``)."""
Solver = Literal["cbc", "highs"]
"""ILP solver."""
CycleFilter = Literal["efficient", "vanilla", "none"]
"""Cycle filtering during exploration (``docs/exploration.md``)."""
OrderVars = Literal["real", "int"]
"""The ILP's topological-order variables when ``cycle_filter="none"``."""
Device = Literal["t4", "a100", "h100", "cpu", "gpu", "cuda"]
"""The device a cost model prices for: a roofline preset (``t4``, ``a100``, ``h100``,
``cpu``), or, for the measured models (``profile``, ``learned``, ``xla``), ``cpu`` (this
machine's CPU) or a GPU: ``gpu``/``cuda`` (GPU 0 through CuPy) or a GPU preset's name."""
CostModelName = Literal["roofline", "profile", "learned", "rlo", "xla"]
"""Cost models known by name (:func:`tensat_py.cost.get_cost_model`)."""

EXTRACTORS: tuple[str, ...] = get_args(Extractor)
SOLVERS: tuple[str, ...] = get_args(Solver)
CYCLE_FILTERS: tuple[str, ...] = get_args(CycleFilter)
ORDER_VARS: tuple[str, ...] = get_args(OrderVars)
DEVICES: tuple[str, ...] = get_args(Device)
COST_MODELS: tuple[str, ...] = get_args(CostModelName)

#: Device names that mean "the GPU at hand" (measured models only, never a roofline preset).
GPU_ALIASES: tuple[str, ...] = ("gpu", "cuda")

#: Largest count accepted for a limit (the Rust core takes 64-bit sizes).
MAX_COUNT = 2**63 - 1

#: True while the ``tensat`` command runs: messages then spell options as its flags.
_CLI: contextvars.ContextVar[bool] = contextvars.ContextVar("tensat_cli", default=False)

#: Command-line flags (and their value's form) of Python keywords whose flag is not
#: ``--kebab-case`` of the keyword or whose value needs describing.
_FLAGS = {"input_shapes": ("--input-shape", "NAME=D0,D1,... (once per input)")}


@contextmanager
def cli_spelling() -> Iterator[None]:
    """Within the block, :func:`spell` writes options as the ``tensat`` command's flags."""
    token = _CLI.set(True)
    try:
        yield
    finally:
        _CLI.reset(token)


def option_name(option: str) -> str:
    """The name the user gave ``option`` by, where the call came from: the keyword
    (``node_limit``) from Python, the flag (``--node-limit``) from the ``tensat`` command.

    >>> option_name("node_limit")
    'node_limit'
    >>> with cli_spelling():
    ...     option_name("node_limit")
    '--node-limit'
    """
    if not _CLI.get():
        return option
    return _FLAGS[option][0] if option in _FLAGS else "--" + option.replace("_", "-")


def spell(option: str, value: Any = None) -> str:
    """How the user passes ``option`` where the call came from: ``device='cpu'`` from
    Python, ``--device cpu`` from the ``tensat`` command (:func:`cli_spelling`); with no
    ``value``, the form its value takes.

    >>> spell("device", "cpu"), spell("input_shapes")
    ("device='cpu'", 'input_shapes={...}')
    >>> with cli_spelling():
    ...     spell("device", "cpu"), spell("input_shapes")
    ('--device cpu', '--input-shape NAME=D0,D1,... (once per input)')
    """
    if _CLI.get():
        form = _FLAGS[option][1] if option in _FLAGS else "VALUE"
        return f"{option_name(option)} {form if value is None else value}"
    return f"{option}={{...}}" if value is None else f"{option}={value!r}"


def suggest(value: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest of ``known`` to ``value``, else ``""``."""
    close = difflib.get_close_matches(str(value).lower(), [str(k) for k in known], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_choice(option: str, value: Any, known: Sequence[str]) -> str:
    """``value`` when it is one of ``known``.

    Raises:
        ValueError: ``"option: unknown value 'x' (did you mean 'y'?); known: a, b"``.
    """
    if isinstance(value, str) and value in known:
        return value
    raise ValueError(
        f"{option_name(option)}: unknown value {value!r}{suggest(str(value), known)}; "
        f"known: {', '.join(known)}"
    )


def check_count(option: str, value: Any) -> int:
    """``value`` when it is a non-negative integer (booleans are not counts).

    Raises:
        ValueError: ``"k_multi: must be a non-negative integer, got -1"``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ValueError(f"{option_name(option)}: must be a non-negative integer, got {value!r}")
    return value


def check_explores(option: str, value: Any) -> int:
    """``value`` when it is a count of at least 1: the command line refuses a node or
    iteration limit of 0, under which exploration can apply no rule (and 0 jobs).

    Raises:
        ValueError: ``"--iter-limit: must be at least 1, got 0 (0 explores nothing)"``.
    """
    check_count(option, value)
    if value < 1:
        raise ValueError(
            f"{option_name(option)}: must be at least 1, got {value} (0 explores nothing: no rule "
            "could be applied)"
        )
    return value


def check_fraction(option: str, value: Any) -> float:
    """``value`` as float when it is a number in ``[0, 1)``.

    Raises:
        ValueError: ``"gap: must be a number in [0, 1), got 2"``.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not 0.0 <= value < 1.0:
        raise ValueError(f"{option_name(option)}: must be a number in [0, 1), got {value!r}")
    return float(value)


def check_seconds(option: str, value: Any) -> float:
    """``value`` as float when it is a positive, finite number of seconds.

    Raises:
        ValueError: ``"time_limit: must be a positive, finite number of seconds, got 0"``.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{option_name(option)}: must be a positive, finite number of seconds, got {value!r}"
        )
    return float(value)


def check_zoo_name(name: str) -> str:
    """``name`` when it is a model of the zoo (:mod:`tensat_py.models`).

    Raises:
        ValueError: an unknown name, with a suggestion and the list of zoo models.
    """
    from tensat_py import models

    if name in models.ZOO:
        return name
    known = sorted(models.ZOO)
    raise ValueError(f"unknown zoo model {name!r}{suggest(name, known)}; known: {', '.join(known)}")


def validate_optimize_options(
    *,
    k_multi: Any,
    node_limit: Any,
    iter_limit: Any,
    time_limit: Any,
    cycle_filter: Any,
    extractor: Any,
    solver: Any,
    order_vars: Any,
    device: Any,
    cost_model: Any,
) -> None:
    """Checks every option of :func:`tensat_py.optimize` (see there for their meaning).

    ``cost_model`` may be ``None`` (the front end's default), a name, or an object with
    ``graph_cost`` and ``costs_for_export`` methods; ``device`` may be ``None`` (the front
    end's default, :func:`tensat_py.frontends.device_for`).

    Raises:
        ValueError: the first bad option, in one line naming it.
    """
    if k_multi is not None:
        check_count("k_multi", k_multi)
    check_count("node_limit", node_limit)
    check_count("iter_limit", iter_limit)
    check_seconds("time_limit", time_limit)
    check_choice("cycle_filter", cycle_filter, CYCLE_FILTERS)
    check_choice("extractor", extractor, EXTRACTORS)
    check_choice("solver", solver, SOLVERS)
    check_choice("order_vars", order_vars, ORDER_VARS)
    if device is not None:  # None: the front end's default device
        check_choice("device", device, DEVICES)
    if cost_model is None or not isinstance(cost_model, str):
        if cost_model is not None and not all(
            callable(getattr(cost_model, m, None)) for m in ("graph_cost", "costs_for_export")
        ):
            raise ValueError(
                f"cost_model: {type(cost_model).__name__} is neither a name "
                f"({', '.join(COST_MODELS)}) nor an object with graph_cost and "
                "costs_for_export methods"
            )
        return
    check_choice("cost_model", cost_model.lower(), COST_MODELS)
