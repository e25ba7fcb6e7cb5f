"""The profile cache: an SQLite database of measured operator times.

One file (``profile.sqlite``) under the user's cache directory (``platformdirs``:
``~/.cache/tensat-py`` on Linux), or under ``$TENSAT_CACHE_DIR`` when that is set (tests
point it at a temporary folder). Tables:

* ``devices``: one row per device fingerprint (its JSON description: CPU model, cores,
  threads, library versions, or GPU name and driver);
* ``measurements``: one row per (fingerprint, operator signature): the operator, the
  signature's JSON (parameters, operand and output types, operand constant flags), the
  median time in seconds, its spread (inter-quartile range, seconds), its lower quartile
  (seconds, the figure the cost model uses: robust to other work sharing the CPU), the
  repetitions and when it was measured;
* ``models``: learned cost models (:mod:`tensat_py.cost.learned`) by fingerprint, with
  their held-out Spearman rank correlation.

Several processes may profile at once: the database runs in WAL mode (readers never block
the writer), every write is one ``BEGIN IMMEDIATE`` transaction, a busy database is waited
for (60 s), and a measurement already present is kept (``INSERT OR IGNORE``), so nothing
either process measured is lost.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV", "cache_dir", "default_path", "ProfileDatabase", "Record"]

#: Environment variable naming the cache folder (overrides platformdirs).
CACHE_ENV = "TENSAT_CACHE_DIR"
#: Seconds a writer waits for a busy database before failing.
BUSY_TIMEOUT = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS devices (
    fingerprint TEXT PRIMARY KEY,
    info TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS measurements (
    fingerprint TEXT NOT NULL,
    signature TEXT NOT NULL,
    op TEXT NOT NULL,
    median REAL NOT NULL,
    spread REAL NOT NULL,
    low REAL NOT NULL,
    reps INTEGER NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (fingerprint, signature)
);
CREATE TABLE IF NOT EXISTS models (
    fingerprint TEXT NOT NULL,
    kind TEXT NOT NULL,
    created REAL NOT NULL,
    spearman REAL,
    n_train INTEGER NOT NULL,
    n_test INTEGER NOT NULL,
    meta TEXT NOT NULL,
    blob TEXT NOT NULL,
    PRIMARY KEY (fingerprint, kind)
);
"""


def cache_dir() -> Path:
    """The cache folder: ``$TENSAT_CACHE_DIR`` when set, else platformdirs' user cache
    directory for ``tensat-py``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tensat-py", appauthor=False))


def default_path() -> Path:
    """The profile database's path (``cache_dir() / "profile.sqlite"``)."""
    return cache_dir() / "profile.sqlite"


@dataclass(frozen=True)
class Record:
    """One cached measurement.

    Attributes:
        signature: the operator signature (canonical JSON, see
            :func:`tensat_py.cost.profile.signature`).
        op: the operator's name.
        median: median time, seconds.
        spread: inter-quartile range of the repetitions, seconds.
        reps: timed repetitions.
        low: lower quartile, seconds (the figure :mod:`tensat_py.cost.profile` prices with).
    """

    signature: str
    op: str
    median: float
    spread: float
    reps: int
    low: float


class ProfileDatabase:
    """The SQLite profile cache (see the module docstring).

    Args:
        path: the database file; default :func:`default_path`. Its folder is created.

    Raises:
        OSError: the folder cannot be created.
        sqlite3.Error: the file is not a database.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(
            str(self.path), timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        self._use_wal()
        self._conn.execute("PRAGMA synchronous = NORMAL")
        with self._write() as cur:
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    cur.execute(stmt)

    def _use_wal(self) -> None:
        """Switches the file to write-ahead logging (kept in the file, so once is enough).

        The switch needs the file to itself and SQLite does not wait for it (no busy
        handler): when another process opens the new file at the same moment, it is
        retried, with a growing pause, for up to :data:`BUSY_TIMEOUT` seconds.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT
        pause = 0.005
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(pause)
                pause = min(0.2, 2 * pause)

    def __repr__(self) -> str:
        return f"ProfileDatabase({str(self.path)!r})"

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction (``BEGIN IMMEDIATE``: the write lock is taken at once, so
        two writers never deadlock on an upgrade); rolled back on error."""
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    # ------------------------------------------------------------------ devices
    def register_device(self, fingerprint: str, info: Mapping[str, Any]) -> None:
        """Record a device's description (kept when already present)."""
        with self._write() as cur:
            cur.execute(
                "INSERT OR IGNORE INTO devices VALUES (?, ?, ?)",
                (fingerprint, json.dumps(dict(info), sort_keys=True), time.time()),
            )

    def devices(self) -> dict[str, dict[str, Any]]:
        """Every device: fingerprint -> its description."""
        rows = self._conn.execute("SELECT fingerprint, info FROM devices").fetchall()
        return {fp: json.loads(info) for fp, info in rows}

    # ------------------------------------------------------------------ measurements
    def get(self, fingerprint: str, signatures: Iterable[str]) -> dict[str, Record]:
        """The cached records among ``signatures`` for the device, by signature."""
        sigs = list(dict.fromkeys(signatures))
        out: dict[str, Record] = {}
        for i in range(0, len(sigs), 500):
            chunk = sigs[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                "SELECT signature, op, median, spread, reps, low FROM measurements "
                f"WHERE fingerprint = ? AND signature IN ({marks})",
                (fingerprint, *chunk),
            ).fetchall()
            for r in rows:
                out[r[0]] = Record(*r)
        return out

    def put(self, fingerprint: str, records: Iterable[Record]) -> int:
        """Store records (one transaction); a signature already cached keeps its first
        figure. Returns how many were new."""
        now = time.time()
        with self._write() as cur:
            before = self._conn.total_changes
            cur.executemany(
                "INSERT OR IGNORE INTO measurements "
                "(fingerprint, signature, op, median, spread, low, reps, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (fingerprint, r.signature, r.op, r.median, r.spread, r.low, r.reps, now)
                    for r in records
                ],
            )
            return self._conn.total_changes - before

    def records(self, fingerprint: str) -> list[Record]:
        """Every record of the device, oldest first."""
        rows = self._conn.execute(
            "SELECT signature, op, median, spread, reps, low FROM measurements "
            "WHERE fingerprint = ? ORDER BY created, signature",
            (fingerprint,),
        ).fetchall()
        return [Record(*r) for r in rows]

    def stats(self) -> list[dict[str, Any]]:
        """Per device and operator: count of measurements and their summed lower-quartile
        seconds."""
        rows = self._conn.execute(
            "SELECT fingerprint, op, COUNT(*), SUM(low) FROM measurements "
            "GROUP BY fingerprint, op ORDER BY fingerprint, op"
        ).fetchall()
        return [{"fingerprint": f, "op": o, "count": n, "seconds": s} for f, o, n, s in rows]

    # ------------------------------------------------------------------ learned models
    def save_model(
        self,
        fingerprint: str,
        kind: str,
        blob: str,
        *,
        spearman: float | None,
        n_train: int,
        n_test: int,
        meta: Mapping[str, Any],
    ) -> None:
        """Store (replace) the device's learned model of ``kind``."""
        with self._write() as cur:
            cur.execute(
                "INSERT OR REPLACE INTO models VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    kind,
                    time.time(),
                    spearman,
                    n_train,
                    n_test,
                    json.dumps(dict(meta), sort_keys=True),
                    blob,
                ),
            )

    def load_model(self, fingerprint: str, kind: str) -> dict[str, Any] | None:
        """The stored model (``blob``, ``spearman``, ``n_train``, ``n_test``, ``meta``,
        ``created``), or None."""
        row = self._conn.execute(
            "SELECT blob, spearman, n_train, n_test, meta, created FROM models "
            "WHERE fingerprint = ? AND kind = ?",
            (fingerprint, kind),
        ).fetchone()
        if row is None:
            return None
        blob, rho, n_train, n_test, meta, created = row
        return {
            "blob": blob,
            "spearman": rho,
            "n_train": n_train,
            "n_test": n_test,
            "meta": json.loads(meta),
            "created": created,
        }

    def models(self) -> list[dict[str, Any]]:
        """Every stored model's summary (no blob)."""
        rows = self._conn.execute(
            "SELECT fingerprint, kind, spearman, n_train, n_test, created FROM models"
        ).fetchall()
        keys = ("fingerprint", "kind", "spearman", "n_train", "n_test", "created")
        return [dict(zip(keys, r, strict=True)) for r in rows]
