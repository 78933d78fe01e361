"""The results store of a sweep: one folder per experiment.

Layout of ``OUT/``:

``manifest.json``
    Experiment name, seed, replications, code version, and every point with
    its parameters, stream key and config hash. Rewritten atomically at the
    start of each run.
``records.csv``
    One line per finished task (point, replication, seed, point key, config
    hash, point parameters, metrics, wall time, error), appended with one
    ``write`` as each task completes (so it survives the process being killed)
    and ``fsync``-ed at least every second and at the end (so it survives a
    machine crash, minus the last second). This is the source of truth.
``summary.csv``
    One row per point with ``m_mean, m_se, m_low, m_high`` for every metric
    (95% Student-t intervals across replications); derived, rewritten
    atomically at the end of every run (also after Ctrl-C).
``errors.log``
    Tracebacks of the tasks that raised (their one-line error is in the CSV).

Why CSV and not Parquet: the store grows one task at a time, and CSV is
append-only — one ``write`` of complete lines per finished task — so a
killed run loses at most the tasks in flight and leaves every earlier line
intact; Parquet files are immutable once written, so durability per task would
mean one file per task plus compaction. CSV also needs no extra dependency,
is readable by eye, and ``pandas.read_csv(OUT / "records.csv")`` loads it
directly. Floats are written with ``repr`` so they read back bit-identical.

Resuming: a task is identified by ``(config_hash, replication)``; the config
hash covers the point's full config, the seed and the code version. On a
re-run, :meth:`Store.reconcile` keeps the records whose identity is still
wanted, drops stale ones (changed config, seed or code; tasks that raised,
which are retried; a torn last line) by an atomic rewrite, and the sweep runs
only what is missing. A folder holding another experiment's results is refused
with :class:`~sim.errors.ConfigError`; a lock file stops two runs sharing one
folder.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import ConfigError, check
from .results import from_cell, read_csv, to_cell

__all__ = ["Store", "RECORDS", "MANIFEST", "SUMMARY", "ERRORS", "read_manifest", "read_records"]

RECORDS = "records.csv"
MANIFEST = "manifest.json"
SUMMARY = "summary.csv"
ERRORS = "errors.log"
LOCK = ".lock"

_META = ("point", "replication", "seed", "point_key", "config_hash")
_TAIL = ("wall_time", "error")
_STRING_COLUMNS = frozenset({"point_key", "config_hash", "error"})
_HELD: set[str] = set()  # folders locked by this process


def _text(value: Any) -> str:
    v = to_cell(value)
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    return s.replace("\r", "\\r").replace("\n", "\\n")


def _typed(row: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k is None:
            continue
        v = "" if v is None else v
        out[k] = v if k in _STRING_COLUMNS else from_cell(v)
    return out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _csv_text(columns: Sequence[str], rows: Iterable[Mapping[str, Any]], header: bool = True) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if header:
        w.writerow(columns)
    for r in rows:
        w.writerow([_text(r.get(c)) for c in columns])
    return buf.getvalue()


def read_manifest(path: str | Path) -> dict[str, Any] | None:
    """The manifest of a results folder, or None when there is none."""
    f = Path(path) / MANIFEST
    if not f.is_file():
        return None
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError):
        raise ConfigError("out", "a folder with a readable manifest.json", str(path)) from None


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The task records of a results folder, typed (empty when none)."""
    f = Path(path) / RECORDS
    if not f.is_file():
        return []
    with f.open(newline="") as fh:
        text = fh.read()
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return [_typed(r) for r in csv.DictReader(io.StringIO(text))]


class Store:
    """An experiment's results folder (see the module docstring).

    Use :meth:`Store.open`; the store holds a lock on the folder until
    :meth:`close`.
    """

    def __init__(self, path: Path, name: str, code: str, lock_fd: int) -> None:
        self.path = path
        self.name = name
        self.code = code
        self._lock_fd: int | None = lock_fd
        self._fd: int | None = None
        self.columns: list[str] = []
        self.dropped = 0
        self._key = ""
        self.sync_interval = 1.0
        self._synced = time.monotonic()

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | Path, *, name: str, code: str = "", create: bool = True) -> Store:
        """Open (or create) the results folder of experiment ``name``.

        Raises
        ------
        ConfigError
            When the folder holds another experiment's results, has records
            without a manifest, is not a folder, or is in use by another run.
        """
        p = Path(path)
        check(not p.exists() or p.is_dir(), "out", "a folder", str(path))
        manifest = read_manifest(p) if p.is_dir() else None
        if manifest is not None:
            other = manifest.get("experiment")
            if other != name:
                raise ConfigError(
                    "out", f"a folder of experiment {name!r}, not of {other!r}", str(path))
        elif (p / RECORDS).exists():
            raise ConfigError("out", f"a folder with a {MANIFEST} beside its {RECORDS}", str(path))
        if not p.exists():
            check(create, "out", "an existing results folder", str(path))
            p.mkdir(parents=True)
        # A POSIX record lock (lockf) belongs to this process and is not
        # inherited by forked pool workers, so a killed run's orphaned workers
        # never keep the folder locked; _HELD covers two opens in one process.
        key = str(p.resolve())
        busy = key in _HELD
        fd = os.open(p / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if not busy:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            busy = True
        if busy:
            os.close(fd)
            raise ConfigError("out", "a folder no other run is using", str(path))
        _HELD.add(key)
        store = cls(p, name, code, fd)
        store._key = key
        return store

    def close(self) -> None:
        """Sync and close the records file and release the folder lock."""
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            _HELD.discard(self._key)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ manifest

    def write_manifest(
        self,
        points: Sequence[Mapping[str, Any]],
        tasks: Sequence[Any],
        *,
        seed: int,
        replications: int,
        info: Mapping[str, Any] | None = None,
    ) -> None:
        """Record what this run computes (atomically)."""
        old = read_manifest(self.path) or {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        first = {}
        for t in tasks:
            first.setdefault(t.point, t)
        manifest = {
            "experiment": self.name,
            "seed": int(seed),
            "replications": int(replications),
            "created": old.get("created", now),
            "updated": now,
            **{k: v for k, v in (info or {}).items()},
            "points": [
                {"point": i, "params": {k: to_cell(v) for k, v in p.items()},
                 "point_key": first[i].point_key, "config_hash": first[i].config_hash}
                for i, p in enumerate(points)
            ],
        }
        _atomic_write(self.path / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n")

    # ------------------------------------------------------------------ records

    def _raw_rows(self) -> tuple[list[str], list[dict[str, str]], bool]:
        f = self.path / RECORDS
        if not f.is_file():
            return [], [], False
        with f.open(newline="") as fh:
            text = fh.read()
        torn = bool(text) and not text.endswith("\n")
        if torn:
            text = text[: text.rfind("\n") + 1]
        reader = csv.DictReader(io.StringIO(text))
        rows = [dict(r) for r in reader]
        return list(reader.fieldnames or []), rows, torn

    def reconcile(self, tasks: Sequence[Any]) -> dict[tuple[str, int], dict[str, Any]]:
        """Keep the stored records of ``tasks`` that finished without error.

        Stale records (another config hash or replication, an error, a
        duplicate, a torn last line) are dropped by an atomic rewrite; point
        indices are brought up to date.

        Returns
        -------
        dict
            ``(config_hash, replication) -> typed record`` of the kept tasks.
        """
        columns, rows, torn = self._raw_rows()
        want = {t.key: t for t in tasks}
        kept: list[dict[str, str]] = []
        seen: set[tuple[str, int]] = set()
        changed = torn
        for r in rows:
            try:
                key = (r.get("config_hash") or "", int(r.get("replication") or -1))
            except ValueError:
                key = ("", -1)
            t = want.get(key)
            if t is None or key in seen or r.get("error"):
                changed = True
                continue
            seen.add(key)
            if r.get("point") != str(t.point):
                r = {**r, "point": str(t.point)}
                changed = True
            kept.append(r)
        self.dropped = len(rows) - len(kept)
        self.columns = columns
        if changed:
            _atomic_write(self.path / RECORDS, _csv_text(columns, kept) if columns else "")
        return {(r["config_hash"], int(r["replication"])): _typed(r) for r in kept}

    def _ensure_columns(self, records: Sequence[Mapping[str, Any]]) -> None:
        new = []
        for r in records:
            for k in r:
                if k not in self.columns and k not in new and k != "traceback":
                    new.append(k)
        if not new and self.columns:
            return
        if not self.columns:
            body = [c for c in new if c not in _META and c not in _TAIL]
            self.columns = list(_META) + body + list(_TAIL)
            for c in new:
                if c not in self.columns:
                    self.columns.append(c)
            rows: list[dict[str, str]] = []
        else:
            _, rows, _ = self._raw_rows()
            tail = [c for c in self.columns if c in _TAIL]
            head = [c for c in self.columns if c not in _TAIL]
            self.columns = head + new + tail
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        _atomic_write(self.path / RECORDS, _csv_text(self.columns, rows))

    def append(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Append finished task records: one ``write`` at once, ``fsync`` at least every second.

        The ``write`` puts the lines in the kernel at once, so they survive
        the process being killed (SIGKILL, Ctrl-C, a crash); the ``fsync``
        (at most :attr:`sync_interval` seconds later, and on :meth:`close`)
        makes them survive a machine crash too. Syncing every line would cost
        milliseconds per task, more than a tiny task itself.
        """
        if not records:
            return
        self._ensure_columns(records)
        if self._fd is None:
            self._fd = os.open(self.path / RECORDS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        data = _csv_text(self.columns, records, header=False).encode()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        now = time.monotonic()
        if now - self._synced >= self.sync_interval:
            os.fsync(self._fd)
            self._synced = now

    def log_error(self, record: Mapping[str, Any], tb: str) -> None:
        """Append a failed task's traceback to ``errors.log``."""
        with (self.path / ERRORS).open("a") as fh:
            fh.write(f"--- point {record.get('point')} replication {record.get('replication')}"
                     f" ({record.get('config_hash')}): {record.get('error')}\n{tb}\n")

    def normalise(self, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Records exactly as they read back from the store (typed cells)."""
        cols = self.columns or list(dict.fromkeys(k for r in records for k in r))
        return [_typed({c: _text(r.get(c)) for c in cols}) for r in records]

    def write_summary(self, result: Any) -> Path:
        """Write ``summary.csv`` (one row per point) atomically."""
        rows = result.summary()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        path = self.path / SUMMARY
        _atomic_write(path, _csv_text(cols, rows))
        return path

    def read_summary(self) -> list[dict[str, Any]]:
        """The stored summary table (empty when none)."""
        f = self.path / SUMMARY
        return read_csv(f) if f.is_file() else []
