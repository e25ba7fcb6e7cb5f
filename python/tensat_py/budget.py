"""One wall-clock time budget, handed from phase to phase of a command.

``tensat optimize`` gives the whole command one time limit: loading the program, the
optimisation's phases (setup, the reference run, exploration, extraction, refinement,
verification, confirmation) and writing the result all come out of it. A
:class:`Budget` starts when the command does; each phase reads what is left
(:meth:`Budget.left`) and is timed under its name (:meth:`Budget.phase`), so the result can
say where the time went (``stats["phase_seconds"]``).

>>> b = Budget(60.0)
>>> with b.phase("load"):
...     pass
>>> sorted(b.seconds) == ["load"] and 0.0 < b.left() <= 60.0
True
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Budget"]


class Budget:
    """``limit`` seconds of wall-clock time from now (or from ``start``, a
    ``time.perf_counter()`` reading).

    Attributes:
        start: when the budget began (``time.perf_counter()`` seconds).
        limit: its length in seconds.
        seconds: wall-clock seconds spent per named phase, in the order first timed.
    """

    def __init__(self, limit: float, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.limit = float(limit)
        self.seconds: dict[str, float] = {}

    @property
    def deadline(self) -> float:
        """``start + limit`` (``time.perf_counter()`` seconds)."""
        return self.start + self.limit

    def left(self) -> float:
        """Seconds left before the deadline (negative once it has passed)."""
        return self.deadline - time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the budget began."""
        return time.perf_counter() - self.start

    def add(self, name: str, seconds: float) -> None:
        """Counts ``seconds`` more to phase ``name``."""
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Times the ``with`` block as (more of) phase ``name``, even when it raises."""
        t = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t)
