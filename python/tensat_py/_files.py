"""Writing output files: atomically, with the permissions the user's umask gives, and with
errors that name the path the user gave (never an internal temporary name).

``save_json``, :func:`tensat_py.save`, ``tensat optimize -o`` and ``--dump-egraph`` write
through here.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["atomic_write", "check_writable", "follow_umask", "current_umask"]

_lock = threading.Lock()


def current_umask() -> int:
    """The process's umask (read by setting it and setting it back, under a lock)."""
    with _lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def follow_umask(path: str | os.PathLike[str]) -> None:
    """Gives ``path`` the mode a newly created file gets (``0o666 & ~umask``); temporary
    files made by :func:`tempfile.mkstemp` start at ``0o600``."""
    os.chmod(path, 0o666 & ~current_umask())


def check_writable(path: str | os.PathLike[str]) -> Path:
    """``path`` as a :class:`Path` when a file can be created there.

    Raises:
        OSError: ``"PATH: folder DIR does not exist"`` / ``"PATH: is a folder"``.
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a file")
    if not parent.is_dir():
        raise FileNotFoundError(f"{path}: folder {parent} does not exist")
    return p


def atomic_write(
    path: str | os.PathLike[str], data: bytes | str | Callable[[IO[str]], object]
) -> Path:
    """Writes ``data`` to ``path`` through a temporary file in the same folder and a rename,
    so that ``path`` is either its old self or complete; the file follows the umask.

    ``data`` is bytes, text, or a function that writes text to the open file it is given
    (``lambda f: json.dump(obj, f)``).

    Raises:
        OSError: the file cannot be written; the message names ``path``.
    """
    p = check_writable(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as e:
        raise OSError(e.errno, f"{path}: cannot write ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
        follow_umask(tmp)
        os.replace(tmp, p)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise OSError(e.errno, f"{path}: cannot write ({e.strerror or e})") from None
        raise
    return p
