"""The model zoo: builders for the eight inference graphs of the TASO/Tensat evaluation.

``ZOO`` maps a name to a zero-argument callable returning a :class:`~tensat_py.graph.Graph`
with the published sizes; :func:`get` looks one up (case-insensitive). Every entry is
built in Python: ``bert``, ``nasrnn``, ``nasneta``, ``resnext50``, ``inceptionv3``,
``squeezenet``, ``vgg19`` and ``resnet50``. TASO ``.model`` files load through
:func:`tensat_py.load` with a file path; :func:`taso_model_dir` finds the folder of
Tensat's own files (used by tests that compare the builders with them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tensat_py.graph import Graph
from tensat_py.models.bert import bert
from tensat_py.models.inceptionv3 import inceptionv3
from tensat_py.models.nasneta import nasneta
from tensat_py.models.nasrnn import nasrnn
from tensat_py.models.resnet50 import resnet50
from tensat_py.models.resnext50 import resnext50
from tensat_py.models.squeezenet import squeezenet
from tensat_py.models.vgg19 import vgg19

__all__ = [
    "ZOO",
    "bert",
    "get",
    "inceptionv3",
    "nasneta",
    "nasrnn",
    "resnet50",
    "resnext50",
    "squeezenet",
    "taso_model_dir",
    "vgg19",
]


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


#: name -> builder with default arguments.
ZOO: dict[str, Callable[[], Graph]] = {
    "bert": bert,
    "nasrnn": nasrnn,
    "nasneta": nasneta,
    "resnext50": resnext50,
    "inceptionv3": inceptionv3,
    "squeezenet": squeezenet,
    "vgg19": vgg19,
    "resnet50": resnet50,
}


def get(name: str) -> Graph:
    """Build zoo model ``name`` with its default (Tensat) sizes.

    Raises:
        KeyError: unknown name (the message lists the known ones).
    """
    try:
        fn = ZOO[name.lower()]
    except KeyError:
        raise KeyError(f"unknown model '{name}'; known: {sorted(ZOO)}") from None
    return fn()
