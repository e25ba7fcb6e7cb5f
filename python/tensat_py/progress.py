"""Feedback on long work: a spinner on stderr for a phase that runs longer than a second.

``tensat optimize`` shows one line per slow phase (exploration, extraction, verification)
with the time spent so far, and, when the phase ends, a line with its total
(``extraction: 2.2 s``), or, when Ctrl-C or an error ended it, a line saying so
(``extraction: interrupted after 2.2 s``). Phases that end
within the delay print nothing, so quick runs stay quiet. ``--quiet`` and ``--json`` turn it
off; :func:`tensat_py.optimize` shows nothing unless given ``progress=True``.

The display is drawn by `rich <https://rich.readthedocs.io>`_ from a timer thread; while the
Rust core holds Python's global interpreter lock (exploration), the spinner cannot move and
appears when the phase ends if it took more than the delay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = ["PhaseDisplay"]


class PhaseDisplay:
    """Shows each phase that outlasts ``delay`` seconds on ``console`` (stderr by default).

    Args:
        enabled: draw anything at all.
        delay: seconds a phase runs before its spinner appears.
        console: where to draw; default a stderr console.
    """

    def __init__(
        self, enabled: bool = True, delay: float = 1.0, console: Console | None = None
    ) -> None:
        self.enabled = enabled
        self.delay = delay
        self.console = console if console is not None else Console(stderr=True)

    @contextmanager
    def phase(self, label: str) -> Iterator[None]:
        """Times the ``with`` block as phase ``label`` ("exploration", ...), drawing a
        spinner once it has run ``delay`` seconds and a closing line with its seconds."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        lock = threading.Lock()
        shown: list[Progress] = []
        done = threading.Event()

        def show() -> None:
            with lock:
                if done.is_set() or not self.console.is_terminal:
                    return  # not a terminal (a log): only the closing line
                bar = Progress(
                    SpinnerColumn(),
                    TextColumn("[bold]{task.description}"),
                    TimeElapsedColumn(),
                    console=self.console,
                    transient=True,
                )
                bar.add_task(f"{label}...", total=None)
                bar.start()
                shown.append(bar)

        timer = threading.Timer(self.delay, show)
        timer.daemon = True
        timer.start()
        ending = ""
        try:
            yield
        except KeyboardInterrupt:
            ending = "interrupted after "
            raise
        except BaseException:
            ending = "stopped by an error after "
            raise
        finally:
            timer.cancel()
            with lock:
                done.set()
                for bar in shown:
                    bar.stop()
                seconds = time.perf_counter() - start
                if shown or seconds > self.delay or ending:
                    self.console.print(f"{label}: {ending}{seconds:.1f} s", highlight=False)
                shown.clear()
