"""The model zoo: builders for Tensat's benchmark graphs.

``ZOO`` maps a name to a zero-argument callable returning a :class:`~tensat_py.graph.Graph`;
:func:`get` looks one up. ``bert`` and ``nasrnn`` are built in Python. ``inceptionv3``,
``squeezenet`` and ``vgg`` are loaded from TASO's ``.model`` files when they can be found
(the ``TENSAT_TASO_MODELS`` environment variable, or ``../shared/data/taso-models`` next
to the repository); otherwise :func:`get` raises ``FileNotFoundError`` saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tensat_py.graph import Graph
from tensat_py.models.bert import bert
from tensat_py.models.nasrnn import nasrnn

__all__ = ["ZOO", "bert", "nasrnn", "get", "taso_model_dir"]


def taso_model_dir() -> Path | None:
    """The folder holding TASO ``.model`` files, or None when there is none."""
    cands = []
    if os.environ.get("TENSAT_TASO_MODELS"):
        cands.append(Path(os.environ["TENSAT_TASO_MODELS"]))
    here = Path(__file__).resolve()
    for up in here.parents[2:5]:
        cands.append(up / ".." / "shared" / "data" / "taso-models")
        cands.append(up / "shared" / "data" / "taso-models")
    for c in cands:
        if c.is_dir():
            return c
    return None


def _taso(name: str) -> Callable[[], Graph]:
    def load() -> Graph:
        from tensat_py.frontends.taso_model import load as load_model

        d = taso_model_dir()
        if d is None or not (d / f"{name}.model").is_file():
            raise FileNotFoundError(
                f"model '{name}' needs TASO's {name}.model (set TENSAT_TASO_MODELS to its "
                "folder); a Python builder for it is not written yet"
            )
        return load_model(d / f"{name}.model")

    load.__doc__ = f"{name} loaded from TASO's {name}.model."
    return load


#: name -> builder with default arguments.
ZOO: dict[str, Callable[[], Graph]] = {
    "bert": bert,
    "nasrnn": nasrnn,
    "inceptionv3": _taso("inceptionv3"),
    "squeezenet": _taso("squeezenet"),
    "vgg": _taso("vgg"),
}


def get(name: str) -> Graph:
    """Build zoo model ``name`` with its default (Tensat) sizes.

    Raises:
        KeyError: unknown name (the message lists the known ones).
        FileNotFoundError: a ``.model``-backed entry whose file is not available.
    """
    try:
        fn = ZOO[name.lower()]
    except KeyError:
        raise KeyError(f"unknown model '{name}'; known: {sorted(ZOO)}") from None
    return fn()
