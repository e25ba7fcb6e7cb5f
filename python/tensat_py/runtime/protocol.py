"""The runtime protocol: what measured confirmation needs of a runtime that runs programs.

A :class:`Runtime` names itself (``name``: ``"onnxruntime-cpu"``, ``"xla-cpu"``; ``version``:
the library that runs the programs), draws one set of inputs for a program
(:meth:`Runtime.inputs`) and prepares a program on them (:meth:`Runtime.prepare`): loads or
compiles it once and returns a callable that runs it once to completion, results ready.
Each :meth:`~Runtime.prepare` is a fresh session or executable, so that a second copy of the
input program timed beside the first is a true A/A control. :meth:`Runtime.clock` is the
clock timings are read from (seconds; ``time.perf_counter`` on the CPU, a device's own
timer elsewhere). :func:`tensat_py.runtime.confirm.measured_speedup` times the prepared
programs side by side through any runtime, so onnxruntime, XLA and, later, a GPU runtime
share one protocol (interleaved rounds, paired ratios and the A/A).

Two runtimes ship: :class:`OnnxRuntimeCpu` (the program exported to ONNX, run by
onnxruntime's CPU execution provider, :mod:`tensat_py.runtime.ort_exec`) and
:class:`XlaCpu` (the program printed as HLO text, compiled by jaxlib's CPU client,
:mod:`tensat_py.runtime.xla_exec`). :func:`runtime_for` picks the one a program's front end
runs on: XLA for HLO input, onnxruntime otherwise.

>>> from tensat_py.builder import GraphBuilder
>>> b = GraphBuilder()
>>> g = b.finish(b.relu(b.input((2, 3), "x")))
>>> rt = runtime_for(g)
>>> rt.name
'onnxruntime-cpu'
>>> run = rt.prepare(g, rt.inputs(g, seed=0), source=g)
>>> run() is not None
True
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tensat_py.graph import Graph

if TYPE_CHECKING:
    from tensat_py.runtime import xla_exec

__all__ = ["Runtime", "OnnxRuntimeCpu", "XlaCpu", "runtime_for"]


class Runtime(ABC):
    """A runtime that times programs for confirmation (see the module's docstring).

    Attributes:
        name: what it is, for reports: ``"onnxruntime-cpu"``, ``"xla-cpu"``.
        version: the library that runs the programs and its version (``"onnxruntime
            1.20.1"``).
    """

    name: str = ""
    version: str = ""

    def clock(self) -> float:
        """The time now, in seconds (differences only count): ``time.perf_counter``."""
        return time.perf_counter()

    @abstractmethod
    def inputs(self, graph: Graph, seed: int) -> Any:
        """The inputs (and weights) every program prepared for ``graph`` runs on: the same
        ``graph`` and ``seed``, the same values.

        Raises:
            ValueError: ``graph`` cannot be given inputs on this runtime (names the cause).
        """

    @abstractmethod
    def prepare(self, program: Graph, inputs: Any, *, source: Graph) -> Callable[[], object]:
        """``program`` loaded or compiled once, as a callable that runs it once on
        ``inputs`` (from :meth:`inputs` of ``source``) and returns when its results are
        ready. ``source`` is the input program ``program`` was optimised from (itself for
        the input): it supplies what ``program`` lacks to be written out (the module
        frame, the ONNX model's payloads).

        Raises:
            ValueError: the runtime cannot load, compile or run ``program`` (one line,
                naming the runtime and the cause).
        """

    def prepare_source(self, graph: Graph, inputs: Any) -> Callable[[], object] | None:
        """The program ``graph`` was loaded from, as it was given, prepared as by
        :meth:`prepare`; None when this runtime has no such program to time (default)."""
        return None

    @property
    def label(self) -> str:
        """``"xla-cpu (jaxlib 0.10.2)"``: the name and version, for messages."""
        return f"{self.name} ({self.version})" if self.version else self.name


class OnnxRuntimeCpu(Runtime):
    """onnxruntime's CPU execution provider (``ORT_ENABLE_ALL``, idle threads not
    spinning, so that sessions run one after the other do not take each other's cores).

    Args:
        threads: intra-op threads (0: onnxruntime's default).
    """

    name = "onnxruntime-cpu"

    def __init__(self, threads: int = 0) -> None:
        import onnxruntime

        self.threads = threads
        self.version = f"onnxruntime {onnxruntime.__version__}"

    def inputs(self, graph: Graph, seed: int) -> dict[str, Any]:
        """:func:`tensat_py.runtime.ort_exec.feeds`: inputs and weights by name."""
        from tensat_py.runtime import ort_exec

        return ort_exec.feeds(graph, seed=seed)

    def prepare(
        self, program: Graph, inputs: dict[str, Any], *, source: Graph
    ) -> Callable[[], object]:
        from tensat_py.runtime import ort_exec

        src = None if program is source else source
        sess, feeds = ort_exec.prepare(
            program, inputs, source=src, threads=self.threads, spinning=False
        )
        return lambda: sess.run(None, feeds)

    def prepare_source(self, graph: Graph, inputs: dict[str, Any]) -> Callable[[], object] | None:
        """The ONNX model ``graph`` was loaded from, as given
        (:func:`tensat_py.runtime.ort_exec.source_session`); None when there is none."""
        from tensat_py.runtime import ort_exec

        found = ort_exec.source_session(graph, inputs, threads=self.threads, spinning=False)
        if found is None:
            return None
        sess, feeds = found
        return lambda: sess.run(None, feeds)


class XlaCpu(Runtime):
    """XLA's CPU client through jaxlib: each program printed as HLO text
    (:func:`tensat_py.frontends.hlo.dumps`), compiled with XLA's full CPU pipeline (one
    fresh compilation per :meth:`prepare`), its arguments placed on the device once and
    shared by every program this runtime prepares on the same arrays
    (:class:`~tensat_py.runtime.xla_exec.Placement`: the input, its A/A copy and the
    candidate read one copy of the inputs, as a program that replaces another does, and
    each holds its own copy of its weights, :func:`weight_positions`); a run waits for
    every result buffer."""

    name = "xla-cpu"

    def __init__(self) -> None:
        import jaxlib

        from tensat_py.runtime.xla_exec import Placement

        self.version = f"jaxlib {jaxlib.__version__}"
        self.placement = Placement()

    def inputs(self, graph: Graph, seed: int) -> list[Any]:
        """:func:`tensat_py.frontends.hlo.random_args`: one array per entry parameter."""
        from tensat_py.frontends.hlo import random_args

        return random_args(graph, seed=seed)

    def prepare(self, program: Graph, inputs: list[Any], *, source: Graph) -> Callable[[], object]:
        from tensat_py.runtime.xla_exec import XlaError

        try:
            framed = _in_frame(program, source)
            text = hlo_text(framed, source)
            return _xla_runnable(text, inputs, self.placement, weight_positions(framed))
        except XlaError as e:
            raise ValueError(f"xla-cpu cannot run the program: {e}") from None


def hlo_text(program: Graph, source: Graph) -> str:
    """The HLO text of ``program``, in the module frame of ``source`` when ``program``
    has none of its own (``meta["hlo"]``; ``program`` is not changed).

    Raises:
        ValueError: neither graph came from an HLO module
            (:class:`tensat_py.frontends.hlo.HloExportError` names the cause).
    """
    from tensat_py.frontends.hlo import HloExportError, dumps

    program = _in_frame(program, source)
    try:
        return dumps(program)
    except (HloExportError, KeyError, TypeError) as e:
        raise ValueError(f"xla-cpu: the program cannot be printed as HLO: {e}") from None


def _in_frame(program: Graph, source: Graph) -> Graph:
    """``program`` in the module frame of ``source`` (``meta["hlo"]``) when it has none of
    its own: a shallow copy, ``program`` is not changed."""
    import copy

    if "hlo" not in program.meta and "hlo" in source.meta:
        program = copy.copy(program)
        program.meta = {**program.meta, "hlo": source.meta["hlo"]}
    return program


def weight_positions(program: Graph) -> list[int]:
    """Positions of ``program``'s weights among its HLO entry parameters
    (:func:`tensat_py.frontends.hlo.entry_leaves`): the arrays a program owns, placed for
    it alone (:class:`~tensat_py.runtime.xla_exec.Placement`). A module loaded from HLO
    text has none: all its parameters are inputs."""
    from tensat_py.frontends.hlo import entry_leaves

    names = {program.nodes[i].name for i in program.weights()}
    return [k for k, n in enumerate(entry_leaves(program)) if n in names]


def _xla_runnable(
    text: str,
    args: list[Any],
    placement: xla_exec.Placement | None = None,
    private: list[int] | None = None,
) -> Callable[[], object]:
    """A fresh executable of ``text`` (uncached compile) on ``args`` placed once (through
    ``placement``, shared with the other programs placed through it, except the positions
    ``private``: the program's own weights, :func:`weight_positions`); a call runs it and
    blocks until every output is ready (:func:`xla_exec.placed_call`). Raises
    ``XlaError``."""
    from tensat_py.runtime import xla_exec

    xla_exec._runnable(text)
    exe = xla_exec._compile_cached.__wrapped__(text)
    run = xla_exec.placed_call(exe, args, "input_output_alias" in text, placement, private or ())

    try:
        run()  # fails here, once, on arguments XLA refuses
    except Exception as e:  # jaxlib raises its own runtime error types
        raise xla_exec.XlaError(str(e).strip().splitlines()[0]) from None
    return run


def runtime_for(graph: Graph, model: object = None) -> Runtime:
    """The runtime ``graph``'s programs are confirmed on: :class:`XlaCpu` for a program
    loaded from HLO (``meta["hlo"]``, or its front end or verification runner saying
    ``"hlo"`` / ``"xla"``) or priced by the cost model of XLA's CPU backend (``model``
    named ``"xla"``: a prediction for XLA is confirmed on XLA), :class:`OnnxRuntimeCpu`
    otherwise."""
    meta = graph.meta
    if "hlo" in meta or meta.get("frontend") == "hlo" or meta.get("verify_runner") == "xla":
        return XlaCpu()
    if getattr(model, "name", None) == "xla":
        return XlaCpu()
    return OnnxRuntimeCpu()
