"""tensat-py: an e-graph-first superoptimizer for tensor programs.

>>> import tensat_py
>>> from tensat_py.builder import GraphBuilder
>>> b = GraphBuilder()
>>> x = b.input((4, 8), name="x")
>>> y = b.ewadd(b.matmul(x, b.weight((8, 3))), b.matmul(x, b.weight((8, 3))))
>>> result = tensat_py.optimize(b.finish([y]), extractor="greedy")
>>> result.cost_after <= result.cost_before
True

The flow follows Tensat (Yang et al., MLSys 2021): the program is saturated with the rules
of ``rules/*.rules`` in the Rust e-graph core and the cheapest equivalent program under a
cost model is extracted (greedy or ILP) and verified numerically against the input.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version
from typing import Any

from tensat_py import _core  # noqa: F401  (the native module, kept importable as tensat_py._core)
from tensat_py.graph import Graph, GraphError, Node, TensorType
from tensat_py.pipeline import OptimizeResult, load_rules, optimize
from tensat_py.verify import VerifyReport, verify

try:
    __version__: str = _version("tensat-py")
    """The installed distribution's version (``pyproject.toml``'s ``[project] version``)."""
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Graph",
    "GraphError",
    "Node",
    "OptimizeResult",
    "TensorType",
    "VerifyReport",
    "__version__",
    "load",
    "load_rules",
    "save",
    "optimize",
    "verify",
]


def load(target: str, **options: Any) -> Graph:
    """Loads a program: a zoo name (``"bert"``, ``"nasrnn"``, ...) or a file path.

    The file's suffix picks the front end (:mod:`tensat_py.frontends`): ``.model`` (TASO
    graphs), ``.onnx`` (see :func:`tensat_py.frontends.onnx.load`; ``input_shapes=``
    fixes symbolic dimensions), ... ``options`` go to the front end's loader. The graph
    remembers its front end (``meta["frontend"]``), whose rule files and cost model
    :func:`optimize` uses by default.

    Raises:
        FileNotFoundError: when ``target`` is neither a zoo name nor an existing file (with
            a "did you mean" suggestion among the zoo names).
        ValueError: on a malformed file (the message names the file and the node or line),
            or an unsupported file type.
        TypeError: ``target`` is not a string or path, or options given for a zoo model.
    """
    import os
    from pathlib import Path

    from tensat_py import frontends, models
    from tensat_py.options import suggest

    if not isinstance(target, str | os.PathLike):
        raise TypeError(f"load() takes a zoo name or a file path, got {type(target).__name__}")
    target = os.fspath(target)
    path = Path(target)
    if path.is_file():
        fe = frontends.for_path(path)
        try:
            graph = fe.load(path, **options)
        except UnicodeDecodeError as e:
            raise ValueError(f"{target}: not UTF-8 text ({e.reason} at byte {e.start})") from e
        except ValueError as e:  # every error names the file the user gave
            if target not in str(e) and path.name not in str(e):
                raise ValueError(f"{target}: {e}") from e
            raise
        except (TypeError, KeyError, IndexError, AttributeError, RecursionError) as e:
            # a front end tripping over a malformed file: one line naming it (the cause
            # stays chained for a bug report)
            first = (str(e).strip().splitlines() or [""])[0]
            raise ValueError(
                f"{target}: malformed {fe.name} file ({type(e).__name__}: {first})"
            ) from e
        graph.meta.setdefault("frontend", fe.name)
        return graph
    if target in models.ZOO:
        if options:
            raise TypeError(f"zoo model {target!r} takes no options, got {sorted(options)}")
        return models.get(target)
    if path.exists():
        raise ValueError(f"{target}: not a file")
    zoo = sorted(models.ZOO)
    hint = suggest(target, zoo) if not path.suffix else ""
    raise FileNotFoundError(
        f"{target!r} is neither a zoo model{hint} ({', '.join(zoo)}) nor an existing file"
    )


def save(graph: Graph, path: str, *, source: Graph | None = None) -> Any:
    """Writes ``graph`` to ``path`` in the format its suffix names (the counterpart of
    :func:`load`); ``source`` is the graph it was optimised from (its front-end data: the
    source model, weights). Writes atomically, with the mode the umask gives; returns the
    path written.

    Raises:
        ValueError: an unsupported suffix, or a format that cannot be written.
        OSError: the file cannot be written (the message names the path).
    """
    from tensat_py import frontends
    from tensat_py._files import check_writable, follow_umask

    fe = frontends.for_path(path)
    if fe.save is None:
        raise ValueError(f"{path}: {fe.name} files cannot be written")
    check_writable(path)
    try:
        written = fe.save(graph, path, source=source)
    except OSError as e:
        raise OSError(e.errno, f"{path}: cannot write ({e.strerror or e})") from None
    follow_umask(path)  # the front end's atomic write starts from a 0600 temporary file
    return written
