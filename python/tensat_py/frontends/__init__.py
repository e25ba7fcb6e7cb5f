"""Front ends: each file format to a :class:`tensat_py.graph.Graph` and back.

Every format registers one :class:`Frontend` here (its suffixes, its loader and saver, and
the defaults ``optimize`` uses for programs it loaded: the rule files and the cost model).
:func:`tensat_py.load` and ``tensat optimize FILE -o OUT`` find the front end by the file's
suffix, so adding a format touches only its own module and one :func:`register` call below.

>>> for_path("m.onnx").name
'onnx'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensat_py.graph import Graph

__all__ = ["Frontend", "register", "frontends", "for_path", "defaults_for"]


@dataclass(frozen=True)
class Frontend:
    """A file format's translation to and from :class:`Graph`.

    Attributes:
        name: short name (``"onnx"``), stored in ``Graph.meta["frontend"]`` by
            :func:`tensat_py.load`.
        suffixes: file suffixes it reads (``(".onnx",)``), lower case with the dot.
        load: ``load(path, **options) -> Graph``; raises ``ValueError`` naming the file and
            line or node on bad input.
        save: ``save(graph, path, *, source) -> Path`` writing the optimised program in this
            format atomically (``source`` is the graph it was optimised from), or None when
            the format cannot be written.
        default_rules: the rule files ``optimize`` uses for its programs (``"taso"``).
        default_cost_model: the cost model ``optimize`` uses for its programs.
        min_gain: the smallest predicted gain (fraction of the cost) for which
            ``optimize`` keeps the candidate over the input, by default.
        default_device: the device ``optimize`` prices its programs for when none is
            given: ``"t4"`` (Tensat's GPU, a roofline preset) for tensor programs,
            ``"cpu"`` for HLO (XLA's CPU client, the runtime here that runs it, so the
            speedup printed is the ``xla`` cost model's and confirmation measures it).
        device_cost_models: ``(device, cost model)`` pairs overriding
            ``default_cost_model`` on that device (HLO on ``"cpu"``: ``"xla"``, the
            measured model of the runtime the program came from).
        functions: for a format whose programs are made of functions (Knossos), a
            factory ``functions(program)`` of the object the pipeline's function stage
            optimises them through (:mod:`tensat_py.def_phases`); None for tensor programs.
    """

    name: str
    suffixes: tuple[str, ...]
    load: Callable[..., Graph]
    save: Callable[..., Path] | None
    default_rules: str = "taso"
    default_cost_model: str = "roofline"
    min_gain: float = 0.0
    default_device: str = "t4"
    device_cost_models: tuple[tuple[str, str], ...] = ()
    functions: Callable[[Any], Any] | None = None

    def cost_model_for(self, device: str) -> str:
        """The cost model ``optimize`` uses for this format's programs on ``device``.

        >>> frontends()["hlo"].cost_model_for("cpu"), frontends()["hlo"].cost_model_for("t4")
        ('xla', 'roofline')
        """
        return dict(self.device_cost_models).get(str(device).lower(), self.default_cost_model)


_REGISTRY: dict[str, Frontend] = {}


def register(fe: Frontend) -> Frontend:
    """Add a front end. Raises ``ValueError`` when its name or a suffix is taken."""
    taken = {s for f in _REGISTRY.values() for s in f.suffixes}
    if fe.name in _REGISTRY or taken & set(fe.suffixes):
        raise ValueError(f"front end `{fe.name}` or one of its suffixes is registered twice")
    _REGISTRY[fe.name] = fe
    return fe


def frontends() -> dict[str, Frontend]:
    """Every registered front end by name."""
    _load()
    return dict(_REGISTRY)


def for_path(path: str | Path) -> Frontend:
    """The front end reading files like ``path`` (by suffix).

    Raises:
        ValueError: no front end reads that suffix (the message lists the known ones).
    """
    suffix = Path(path).suffix.lower()
    for fe in frontends().values():
        if suffix in fe.suffixes:
            return fe
    known = sorted(s for f in _REGISTRY.values() for s in f.suffixes)
    raise ValueError(f"{path}: unsupported file type {suffix!r} (expected {', '.join(known)})")


def defaults_for(graph: Any) -> Frontend | None:
    """The front end ``graph`` was loaded by (its ``meta["frontend"]``), if any."""
    name = getattr(graph, "meta", {}).get("frontend")
    return frontends().get(name) if isinstance(name, str) else None


def device_for(graph: Any, device: str | None) -> str:
    """The device ``optimize`` prices ``graph`` for: ``device`` when given, else the
    :attr:`Frontend.default_device` of the front end that loaded it (``"t4"`` for a graph
    no front end loaded, a built or zoo one).

    >>> device_for(None, "a100"), device_for(None, None)
    ('a100', 't4')
    """
    if device is not None:
        return device
    fe = defaults_for(graph)
    return fe.default_device if fe is not None else "t4"


def _load_taso(path: Any, **options: Any) -> Graph:
    from tensat_py.frontends.taso_model import load

    return load(path, **options)


def _load_onnx(path: Any, **options: Any) -> Graph:
    from tensat_py.frontends.onnx import load

    return load(path, **options)


def _save_onnx(graph: Graph, path: Any, *, source: Graph | None = None) -> Path:
    from tensat_py.frontends.onnx import save

    src = source if source is not None else graph
    weights = None if "onnx" in src.meta else "random"
    return save(graph, path, source=source, weights=weights)


def _ks_functions(prog: Any) -> Any:
    from tensat_py.frontends.knossos.functions import KsFunctions

    return KsFunctions(prog)


def _load_ks(path: Any, **options: Any) -> Any:
    from tensat_py.frontends.knossos import load

    return load(path, **options)


def _load_hlo(path: Any, **options: Any) -> Graph:
    from tensat_py.frontends.hlo import load

    return load(path, **options)


def _save_ks(program: Any, path: Any, *, source: Any = None) -> Path:
    from tensat_py.frontends.knossos import save

    return save(program, path, source=source)


def _save_hlo(graph: Graph, path: Any, *, source: Graph | None = None) -> Path:
    from tensat_py.frontends.hlo import save

    return save(graph, path, source=source)


_loaded = False


def _ks_default_rules() -> str:
    from tensat_py.frontends.knossos import DEFAULT_RULES

    return DEFAULT_RULES


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    register(Frontend("taso", (".model",), _load_taso, None, "taso"))
    # onnxruntime fuses operators the cost models do not see: a predicted gain under 2 %
    # is within their error (bench/onnx_real.md), so the input is kept. ``fold`` and
    # ``layout`` are the Rust core's built-in sets (docs/rules.md): constant folding, and a
    # squeeze-excite gate upsampled so that onnxruntime keeps it in NCHWc.
    register(
        Frontend(
            "onnx",
            (".onnx",),
            _load_onnx,
            _save_onnx,
            "taso+tensor+general+fold+layout",
            min_gain=0.02,
        )
    )
    register(
        Frontend(
            "knossos",
            (".ks", ".kso"),
            _load_ks,
            _save_ks,
            _ks_default_rules(),
            "rlo",
            functions=_ks_functions,
        )
    )
    register(
        Frontend(
            "hlo",
            (".hlo",),
            _load_hlo,
            _save_hlo,
            "tensor+hlo",
            default_device="cpu",
            device_cost_models=(("cpu", "xla"),),
        )
    )
