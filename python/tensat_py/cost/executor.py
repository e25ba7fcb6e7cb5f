"""How XLA's CPU runtime runs a program's regions side by side: its thunk executor.

XLA CPU compiles a program into *thunks*, one per region of the optimised entry
computation (a loop fusion, a dot, a library fusion, a convolution, a copy), and runs
them as a dataflow graph (``xla/backends/cpu/runtime/thunk_executor.cc`` in openxla/xla;
the defaults below are that file's and ``thunk.h``'s):

* A program of at most :data:`SEQUENTIAL_THUNKS` thunks, or whose buffers all hold at
  most :data:`SEQUENTIAL_BYTES`, runs its thunks one after the other on the calling thread:
  its time is their sum.
* Otherwise the calling thread starts with a FIFO *ready queue* holding the thunks that
  read no other thunk's result. A thread pops a thunk and runs it; the thunks that its
  completion makes ready join the back of *that thread's* queue. When, after a pop, more
  than :data:`SPLIT_THRESHOLD` thunks wait in a queue and fewer than :data:`MAX_WORKERS`
  extra workers are running, the back half of the queue goes to a new worker task on the
  intra-op thread pool (one thread per core); the calling thread does not count.

So a program's regions do not simply add up: independent regions that become ready
together in numbers (NasRNN's dots over its inputs, which all read program inputs) run
side by side, one per core, while a burst of at most eight (the eight dots of one
recurrent step, made ready by the same ``tanh``) runs one after another on one thread.
:func:`makespan` replays that policy over the regions' own times (each measured alone),
with the cores shared evenly between the thunks running at one time (a thunk that keeps
``threads`` cores busy alone, such as a loop fusion XLA splits into outer-dimension
partitions, counts that many).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Thunk",
    "makespan",
    "SPLIT_THRESHOLD",
    "MAX_WORKERS",
    "SEQUENTIAL_THUNKS",
    "SEQUENTIAL_BYTES",
]

#: Ready thunks a queue must hold, after a pop, before its back half goes to a new
#: worker (``Thunk::ExecuteSession::kSplitThreshold``).
SPLIT_THRESHOLD = 8
#: Worker tasks that may run a program's thunks besides the calling thread
#: (``Thunk::ExecuteSession::kMaxWorkers``).
MAX_WORKERS = 4
#: Programs of at most this many thunks run them in order on the calling thread
#: (``ThunkExecutorOptions::execute_sequential_num_thunks_threshold``).
SEQUENTIAL_THUNKS = 8
#: Programs whose thunks' buffers all hold at most this many bytes run in order
#: (``ThunkExecutorOptions::execute_sequential_buffer_threshold``).
SEQUENTIAL_BYTES = 512


@dataclass(frozen=True)
class Thunk:
    """One region of a compiled program.

    Attributes:
        seconds: its time run alone (seconds).
        deps: indices of the earlier thunks whose results it reads (the executor's
            data edges).
        threads: cores it keeps busy when run alone (1, or more for a region XLA runs
            on several threads of the intra-op pool).
    """

    seconds: float
    deps: tuple[int, ...] = ()
    threads: float = 1.0


@dataclass
class _Worker:
    """A thread working through its own ready queue: the calling thread, or a worker task
    on the pool (``pool``); ``running`` the thunk it runs, with ``left`` seconds of it (at
    full pace) to go."""

    queue: deque[int]
    pool: bool
    running: int | None = None
    left: float = 0.0


def makespan(thunks: Sequence[Thunk], cores: int, sequential: bool | None = None) -> float:
    """Seconds from the start of a program's run to its last thunk's end, as XLA's CPU
    thunk executor schedules ``thunks`` (in the compiled program's order) on ``cores``
    cores; see the module docstring.

    Args:
        thunks: the program's regions in program order; ``deps`` point backwards.
        cores: the machine's cores (the intra-op pool's threads).
        sequential: force (True) or forbid (False) the in-order mode; None decides it
            by :data:`SEQUENTIAL_THUNKS` (the byte threshold is the caller's to apply).

    Raises:
        ValueError: ``cores`` below 1, or a dependency that does not point backwards.

    Eleven independent 1 s thunks on two cores: the calling thread keeps six, a worker
    takes five, and they run side by side. A chain of the same thunks is their sum:

    >>> makespan([Thunk(1.0) for _ in range(11)], cores=2)
    6.0
    >>> makespan([Thunk(1.0, (k - 1,) if k else ()) for k in range(11)], cores=2)
    11.0

    Eight thunks made ready by one thunk's end stay on its thread; ten are split:

    >>> makespan([Thunk(1.0)] + [Thunk(1.0, (0,)) for _ in range(8)], cores=2)
    9.0
    >>> makespan([Thunk(1.0)] + [Thunk(1.0, (0,)) for _ in range(10)], cores=2)
    6.0
    """
    if cores < 1:
        raise ValueError(f"makespan: cores must be at least 1, got {cores}")
    n = len(thunks)
    for k, t in enumerate(thunks):
        if any(d < 0 or d >= k for d in t.deps):
            raise ValueError(f"makespan: thunk {k} depends on a thunk not before it: {t.deps}")
    if sequential is None:
        sequential = n <= SEQUENTIAL_THUNKS
    if sequential or n == 0:
        return float(sum(t.seconds for t in thunks))
    waiting = [len(set(t.deps)) for t in thunks]
    users: list[list[int]] = [[] for _ in thunks]
    for k, t in enumerate(thunks):
        for d in sorted(set(t.deps)):
            users[d].append(k)
    workers: list[_Worker] = [_Worker(deque(k for k in range(n) if not waiting[k]), pool=False)]
    pending: deque[_Worker] = deque()  # worker tasks waiting for a pool thread
    free_threads = cores
    extra = 0  # worker tasks holding a session lock
    now = 0.0

    def advance(w: _Worker) -> None:
        nonlocal extra, free_threads
        if not w.queue:
            w.running = None
            if w.pool:
                extra -= 1
                free_threads += 1
                if pending:
                    start(pending.popleft())
            return
        k = w.queue.popleft()
        while len(w.queue) > SPLIT_THRESHOLD and extra < MAX_WORKERS:
            half = len(w.queue) // 2
            tail = deque(list(w.queue)[half:])
            for _ in range(len(tail)):
                w.queue.pop()
            extra += 1
            task = _Worker(tail, pool=True)
            workers.append(task)
            if free_threads:
                start(task)
            else:
                pending.append(task)
        w.running, w.left = k, thunks[k].seconds

    def start(w: _Worker) -> None:
        nonlocal free_threads
        free_threads -= 1
        advance(w)

    advance(workers[0])
    finished = 0
    while finished < n:
        running = [w for w in workers if w.running is not None]
        if not running:
            raise ValueError("makespan: no thunk can run (a dependency cycle)")
        demand = sum(max(thunks[w.running].threads, 1) for w in running)  # type: ignore[index]
        rate = min(1.0, cores / demand)
        dt = min(w.left for w in running) / rate
        now += dt
        ended = []
        for w in running:
            w.left -= dt * rate
            if w.left <= 1e-15:
                ended.append(w)
        for w in ended:
            k = w.running
            assert k is not None
            finished += 1
            for u in users[k]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    w.queue.append(u)
            advance(w)
    return now
