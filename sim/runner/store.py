"""The results store of a sweep: one folder per experiment, append-only.

Layout of ``OUT/``:

``manifest.json``
    Experiment name, seed, replications, code version, and every point with
    its parameters, stream key and config hash. Rewritten atomically at the
    start of each run: it describes the latest run.
``records.csv``
    One line per finished task (point, replication, seed, point key, config
    hash, point parameters, metrics, wall time, error, checksum), appended
    with one ``write`` as each task completes (so it survives the process
    being killed) and ``fsync``-ed at least every second and at the end (so
    it survives a machine crash, minus the last second). The ``checksum`` of
    a line covers every other cell, so any damage to a line is detected.
    This is the source of truth, and a run never deletes a valid line from
    it: records of other configs, seeds, code or replication counts stay,
    unused, until a run with ``prune=True`` (``dtsim run --prune``) removes
    them.
``records.damaged``
    Lines of ``records.csv`` that did not parse completely (a torn last
    line, too few or too many fields, a cell changed after writing, bytes
    that are not UTF-8), moved here verbatim; their tasks are recomputed.
``summary.csv``
    One row per point with ``m_mean, m_se, m_low, m_high`` for every metric
    (95% Student-t intervals across replications); derived, rewritten
    atomically at the end of every run (also after Ctrl-C).
``errors.log``
    Tracebacks of the tasks that raised (their one-line error is in the CSV).

Why CSV and not Parquet: the store grows one task at a time, and CSV is
append-only -- one ``write`` of complete lines per finished task -- so a
killed run loses at most the tasks in flight and leaves every earlier line
intact; Parquet files are immutable once written, so durability per task would
mean one file per task plus compaction. CSV also needs no extra dependency,
is readable by eye, and ``pandas.read_csv(OUT / "records.csv")`` loads it
directly (filter on the manifest's ``config_hash`` values to get the latest
run's records only). Floats are written with ``repr`` so they read back
bit-identical.

Resuming: a task is identified by ``(config_hash, replication)``; the config
hash covers the point's full config, the seed and the code version. On a
re-run, :meth:`Store.reconcile` uses the valid stored records of the tasks
still wanted, retries tasks whose stored record is an error, and the sweep
runs only what is missing. A folder holding another experiment's results is
refused with :class:`~sim.errors.ConfigError`; a lock file stops two runs
sharing one folder.
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

from ..errors import ConfigError, check, check_input_file, check_memory, read_input_bytes
from ..results import from_cell, read_csv, to_cell
from .identity import digest

__all__ = [
    "Store",
    "RECORDS",
    "MANIFEST",
    "SUMMARY",
    "ERRORS",
    "DAMAGED",
    "read_manifest",
    "read_records",
    "parse_records",
    "row_checksum",
]

RECORDS = "records.csv"
MANIFEST = "manifest.json"
SUMMARY = "summary.csv"
ERRORS = "errors.log"
DAMAGED = "records.damaged"
DAMAGED_MANIFEST = "manifest.damaged"
LOCK = ".lock"

_META = ("point", "replication", "seed", "point_key", "config_hash")
_TAIL = ("wall_time", "error", "checksum")
_STRING_COLUMNS = frozenset({"point_key", "config_hash", "error", "checksum"})
_HELD: set[str] = set()  # folders locked by this process


def _text(value: Any) -> str:
    v = to_cell(value)
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    return s.replace("\r", "\\r").replace("\n", "\\n")


def row_checksum(cells: Mapping[str, str]) -> str:
    """Checksum of a line's non-empty text cells (the ``checksum`` cell excluded).

    Empty cells do not count, so a line stays valid when later runs add
    columns.
    """
    items = sorted((k, v) for k, v in cells.items() if k != "checksum" and v != "")
    return digest(json.dumps(items, separators=(",", ":")))


def _typed(row: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k is None or k == "checksum":
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


def _atomic_write(path: Path, data: str | bytes) -> None:
    """``data`` to ``path`` through the one atomic write (:func:`sim.errors.replace_atomic`:
    a link written through, never replaced by a file), synced, and its folder synced."""
    from ..errors import output_target, replace_atomic

    raw = data.encode() if isinstance(data, str) else data

    def write(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())

    replace_atomic(path, write)
    _fsync_dir(output_target(path).parent)


def _csv_line(values: Sequence[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _record_cells(columns: Sequence[str], record: Mapping[str, Any]) -> list[str]:
    cells = {c: _text(record.get(c)) for c in columns if c != "checksum"}
    cells["checksum"] = row_checksum(cells)
    return [cells.get(c, "") for c in columns]


#: Largest ``manifest.json`` read (bytes): a manifest holds one entry per point.
MAX_MANIFEST_BYTES = 256 * 2**20
#: Largest ``records.csv`` read (bytes); it must also fit in memory once parsed.
MAX_RECORDS_BYTES = 4 * 2**30


def read_manifest(path: str | Path, *, name: str = "out") -> dict[str, Any] | None:
    """The manifest of a results folder, or None when there is none.

    Raises
    ------
    ConfigError
        Naming ``name``, when ``manifest.json`` is not a regular file, is too
        large, or is not a JSON object.
    """
    doc, why = _manifest_or_damage(Path(path), name)
    if why:
        raise ConfigError(name, "a folder with a readable manifest.json",
                          f"{path} (manifest.json: {why})")
    return doc


def _manifest_or_damage(path: Path, name: str = "out") -> tuple[dict[str, Any] | None, str]:
    """The folder's manifest, or None and why it is damaged ("" when there is none)."""
    f = path / MANIFEST
    if not f.exists():
        return None, ""
    data = read_input_bytes(name, f, limit=MAX_MANIFEST_BYTES,
                            rule=f"a results folder whose {MANIFEST} is a regular file")
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except RecursionError:
        return None, "nested too deeply"
    except ValueError as exc:
        return None, f"not valid JSON: {' '.join(str(exc).split())}"
    if not isinstance(doc, dict):
        return None, f"a JSON {type(doc).__name__}, not an object"
    if not isinstance(doc.get("experiment"), str):
        return None, "no experiment name"
    return doc, ""


def _set_aside_manifest(path: Path) -> Path:
    """Move a damaged ``manifest.json`` to ``manifest.damaged`` (or ``.1``, ``.2``... if taken)."""
    dest = path / DAMAGED_MANIFEST
    k = 0
    while dest.exists():
        k += 1
        dest = path / f"{DAMAGED_MANIFEST}.{k}"
    os.replace(path / MANIFEST, dest)
    _fsync_dir(path)
    return dest


def _records_bytes(path: Path, name: str) -> bytes:
    """The bytes of ``records.csv`` (a regular file that fits in memory once parsed)."""
    st = check_input_file(name, path, limit=MAX_RECORDS_BYTES,
                          rule=f"a results folder whose {RECORDS} is a regular file")
    # parsed, a line takes about 8 times its bytes (its cells as Python strings)
    check_memory(name, str(path.parent), 8 * st.st_size)
    return read_input_bytes(name, path, limit=MAX_RECORDS_BYTES,
                            rule=f"a results folder whose {RECORDS} is a regular file")


def parse_records(data: bytes, columns: Sequence[str] | None = None
                  ) -> tuple[list[str], list[tuple[bytes, dict[str, str] | None, str]]]:
    """Parse the bytes of ``records.csv`` line by line.

    Parameters
    ----------
    data : bytes
        The file's content.
    columns : sequence of str, optional
        Parse the lines with these columns instead of the file's header line
        (which is still skipped): the header the manifest recorded, to repair
        a header changed after it was written.

    Returns
    -------
    columns : list of str
        The header (empty when the file is empty or its header is damaged).
    lines : list of (bytes, dict or None, str)
        Each line after the header: its raw bytes, its cells (None when it
        does not parse completely) and why not (empty when it does). A line
        parses completely when it ends with a newline, is UTF-8, has one cell
        per column, valid meta cells and a matching checksum.
    """
    parts = data.split(b"\n")
    tail = parts.pop()  # b"" when the file ends with a newline
    out: list[tuple[bytes, dict[str, str] | None, str]] = []
    if not parts:
        return [], ([(tail, None, "torn last line")] if tail else [])
    try:
        header = next(csv.reader([parts[0].decode("utf-8")]))
    except (UnicodeDecodeError, StopIteration, csv.Error):
        header = []
    if columns is None:
        columns = header
    else:
        columns, header = list(columns), header or [""]
    ok_header = _valid_header(columns)
    for raw in parts[1 if header else 0:]:
        out.append((raw, *_parse_line(raw, columns if ok_header else [])))
    if tail:
        out.append((tail, None, "torn last line"))
    return (columns if ok_header else []), out


def _valid_header(columns: Any) -> bool:
    return (isinstance(columns, list) and all(isinstance(c, str) for c in columns)
            and columns[:5] == list(_META) and "checksum" in columns)


def _parse_line(raw: bytes, columns: Sequence[str]) -> tuple[dict[str, str] | None, str]:
    if not columns:
        return None, "no valid header (not written by this version of dtsim)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    try:
        cells = next(csv.reader([text]))
    except (csv.Error, StopIteration):
        return None, "not a CSV line"
    if len(cells) != len(columns):
        return None, f"{len(cells)} cells, the header has {len(columns)}"
    row = dict(zip(columns, cells, strict=True))
    if row_checksum(row) != row.get("checksum"):
        return None, "checksum mismatch (a cell changed after it was written)"
    try:
        int(row["point"]), int(row["replication"]), int(row["seed"])
    except ValueError:
        return None, "invalid point, replication or seed"
    if not row["config_hash"]:
        return None, "no config hash"
    return row, ""


def _choose(rows: Iterable[dict[str, str]], want: Mapping[tuple[str, int], Any]):
    """Per wanted key, the first valid record without error, else the last failed one.

    Returns the records used and failed by key, the count of valid records
    not used (other keys, superseded failed attempts) and the count of
    successful records that repeat a key already used.
    """
    used: dict[tuple[str, int], dict[str, str]] = {}
    failed: dict[tuple[str, int], dict[str, str]] = {}
    unused = repeated = 0
    for r in rows:
        key = (r["config_hash"], int(r["replication"]))
        if key in used and not r.get("error"):
            repeated += 1  # a second record of a task already stored: the first is used
            continue
        if key not in want or key in used:
            unused += 1
            continue
        if r.get("error"):
            if key in failed:
                unused += 1
            failed[key] = r
            continue
        if key in failed:
            unused += 1  # the failed attempt is superseded
            del failed[key]
        used[key] = r
    return used, failed, unused, repeated


def read_records(path: str | Path, want: Mapping[tuple[str, int], Any] | None = None, *,
                 name: str = "out") -> list[dict[str, Any]]:
    """The task records of a results folder, typed (empty when none).

    Parameters
    ----------
    path : path
        The results folder.
    want : mapping, optional
        ``(config_hash, replication)`` keys to select; per key the stored
        record without error is preferred to a failed attempt. Without it
        every line that parses is returned.
    name : str
        The parameter named when ``records.csv`` cannot be read.
    """
    f = Path(path) / RECORDS
    if not f.exists():
        return []
    _, lines = parse_records(_records_bytes(f, name))
    rows = [cells for _, cells, _ in lines if cells is not None]
    if want is None:
        return [_typed(r) for r in rows]
    used, failed, _, _ = _choose(rows, want)
    return [_typed(r) for r in (*used.values(), *failed.values())]


class Store:
    """An experiment's results folder (see the module docstring).

    Use :meth:`Store.open`; the store holds a lock on the folder until
    :meth:`close`.

    Attributes
    ----------
    unused : int
        Valid stored records this run does not use (other configs, seeds,
        code or replications; superseded failed attempts), kept in the file.
    retried : int
        Stored failed records whose tasks run again.
    set_aside : dict
        Reason -> count of damaged lines moved to ``records.damaged`` (exact
        copies of an earlier line and a header changed after it was written
        included).
    repeated : int
        Valid records that repeat a task already stored (the first is used;
        they stay in the file).
    removed : int
        Records removed by :meth:`prune`.
    manifest_damaged : str
        Why the folder's ``manifest.json`` was moved to ``manifest.damaged``
        (empty when it was not).
    """

    def __init__(self, path: Path, name: str, code: str, lock_fd: int) -> None:
        self.path = path
        self.name = name
        self.code = code
        self._lock_fd: int | None = lock_fd
        self._fd: int | None = None
        self.columns: list[str] = []
        self.unused = 0
        self.retried = 0
        self.set_aside: dict[str, int] = {}
        self.removed = 0
        self.previous: dict[str, Any] = {}
        self.manifest_damaged = ""
        self.repeated = 0
        self._key = ""
        self.sync_interval = 1.0
        self._synced = time.monotonic()

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | Path, *, name: str, code: str = "", create: bool = True) -> Store:
        """Open (or create) the results folder of experiment ``name``.

        A ``manifest.json`` that is not valid JSON (or not an object naming
        its experiment) is moved to ``manifest.damaged`` once the folder is
        locked, and the run goes on: stored records are reused only by their
        config hash, which covers the config, the seed and the code
        (experiment file included), so no other experiment's records are
        ever used. :attr:`manifest_damaged` says why it was set aside.

        Raises
        ------
        ConfigError
            When the folder holds another experiment's results, has records
            without a manifest, a ``summary.csv`` with neither (not a run's: it would be
            overwritten), is not a folder, has a ``records.csv``,
            ``manifest.json`` or ``.lock`` that is not a regular file, or is
            in use by another run (all before any task runs).
        """
        p = Path(path)
        check(not p.exists() or p.is_dir(), "out", "a folder", str(path))
        if p.is_dir():
            for part in (RECORDS, MANIFEST, LOCK, DAMAGED):
                f = p / part
                if f.exists() or f.is_symlink():
                    check_input_file("out", f, limit=MAX_RECORDS_BYTES,
                                     rule=f"a results folder whose {part} is a regular file")
        manifest, damaged = _manifest_or_damage(p) if p.is_dir() else (None, "")
        if manifest is not None:
            other = manifest.get("experiment")
            if other != name:
                raise ConfigError(
                    "out", f"a folder of experiment {name!r}, not of {other!r}", str(path))
        elif not damaged and (p / RECORDS).exists():
            raise ConfigError("out", f"a folder with a {MANIFEST} beside its {RECORDS}", str(path))
        elif (p / SUMMARY).exists() and not (p / RECORDS).exists():
            # not dtsim's summary (no store beside it): the run would overwrite someone's file
            raise ConfigError("out", f"a folder whose {SUMMARY} is a run's (this one has no "
                              f"{RECORDS} and no valid {MANIFEST}, so a run would overwrite it)",
                              str(path))
        if not p.exists():
            check(create, "out", "an existing results folder", str(path))
            p.mkdir(parents=True, exist_ok=True)
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
        try:
            # again, now that no other run can write it
            manifest, damaged = _manifest_or_damage(p)
            if manifest is not None and manifest.get("experiment") != name:
                raise ConfigError("out", f"a folder of experiment {name!r}, not of "
                                  f"{manifest.get('experiment')!r}", str(path))
            if damaged:
                _set_aside_manifest(p)
        except BaseException:
            os.close(fd)
            raise
        _HELD.add(key)
        store = cls(p, name, code, fd)
        store._key = key
        store.previous = manifest or {}
        store.manifest_damaged = damaged
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
        fixed: Sequence[Mapping[str, str]] | None = None,
    ) -> None:
        """Record what this run computes (atomically).

        ``fixed`` (one mapping per point) records the metrics each point's
        config fixes, with the reason, so that a summary rebuilt from the
        folder alone prints them exact as the run did.
        """
        old = self.previous
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        first: dict[int, Any] = {}
        count: dict[int, int] = {}
        for t in tasks:
            first.setdefault(t.point, t)
            count[t.point] = count.get(t.point, 0) + 1
        entries = []
        for i, p in enumerate(points):
            e: dict[str, Any] = {"point": i, "params": {k: to_cell(v) for k, v in p.items()},
                                 "point_key": first[i].point_key, "config_hash": first[i].config_hash}
            if count[i] != replications:
                e["replications"] = count[i]
            if not first[i].point_stream:
                e["stream_seed"] = first[i].seed
            if fixed is not None and fixed[i]:
                e["fixed"] = {str(k): str(v) for k, v in fixed[i].items()}
            entries.append(e)
        manifest = {
            "experiment": self.name,
            "seed": int(seed),
            "replications": int(replications),
            "created": old.get("created", now),
            "updated": now,
            **{k: v for k, v in (info or {}).items()},
            "points": entries,
        }
        if self.columns:  # a copy of records.csv's header, to repair it if it is changed
            manifest["columns"] = list(self.columns)
        self._manifest = manifest
        _atomic_write(self.path / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n")

    def _note_columns(self) -> None:
        """Record the header of ``records.csv`` in the manifest after it changed."""
        m = getattr(self, "_manifest", None)
        if m is None or m.get("columns") == self.columns:
            return
        m["columns"] = list(self.columns)
        _atomic_write(self.path / MANIFEST, json.dumps(m, indent=1, default=str) + "\n")

    # ------------------------------------------------------------------ records

    def _data(self) -> bytes:
        f = self.path / RECORDS
        if not f.exists():
            return b""
        return _records_bytes(f, "out")

    def _lines(self) -> tuple[list[str], list[tuple[bytes, dict[str, str] | None, str]]]:
        data = self._data()
        return parse_records(data) if data else ([], [])

    def reconcile(self, tasks: Sequence[Any]) -> dict[tuple[int, int], dict[str, Any]]:
        """The stored records of ``tasks`` that finished without error.

        Damaged lines are moved to ``records.damaged`` (and their tasks run
        again): lines that do not parse completely, and exact copies of an
        earlier line. A header changed after it was written (a renamed
        column) is repaired from the copy the manifest keeps, when the lines
        check out under that copy and not under the file's header; it is
        kept in ``records.damaged``. Every other valid line stays in
        ``records.csv``, used or not.

        Returns
        -------
        dict
            ``(point, replication) -> typed record`` of the tasks to reuse,
            ``point`` set to the task's current point index.
        """
        data = self._data()
        columns, lines = parse_records(data) if data else ([], [])
        header_line = None
        known = self.previous.get("columns")
        if lines and _valid_header(known) and known != columns:
            alt_columns, alt = parse_records(data, columns=known)
            if sum(c is not None for _, c, _ in alt) > sum(c is not None for _, c, _ in lines):
                header_line = data.split(b"\n", 1)[0]
                columns, lines = alt_columns, alt
        seen: set[bytes] = set()
        for i, (raw, cells, _) in enumerate(lines):
            if cells is None:
                continue
            if raw in seen:  # an exact copy: nothing is lost by moving it aside
                lines[i] = (raw, None, "an exact copy of an earlier line")
            seen.add(raw)
        damaged = [(raw, why) for raw, cells, why in lines if cells is None]
        if damaged or header_line is not None:
            self._set_aside(columns, lines, damaged, header_line)
        self.columns = columns if any(c is not None for _, c, _ in lines) else []
        want = {(t.config_hash, t.replication): t for t in tasks}
        rows = [cells for _, cells, _ in lines if cells is not None]
        used, failed, unused, repeated = _choose(rows, want)
        self.unused = unused
        self.repeated = repeated
        self.retried = len(failed)
        out = {}
        for key, r in used.items():
            t = want[key]
            rec = _typed(r)
            rec["point"] = t.point
            out[t.key] = rec
        return out

    def _set_aside(self, columns, lines, damaged, header_line=None) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        entries = list(damaged)
        if header_line is not None:
            entries.insert(0, (header_line, "the header line changed after it was written; "
                                            "restored from manifest.json"))
        for _, why in entries:
            self.set_aside[why] = self.set_aside.get(why, 0) + 1
        with (self.path / DAMAGED).open("ab") as fh:
            for raw, why in entries:
                fh.write(f"# {stamp} set aside ({why}):\n".encode() + raw + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        valid = [raw + b"\n" for raw, cells, _ in lines if cells is not None]
        # no valid line left: no header either, so a wrong header is never kept
        keep = [_csv_line(columns).encode()] + valid if columns and valid else []
        _atomic_write(self.path / RECORDS, b"".join(keep))

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
            text = _csv_line(self.columns)
        else:
            _, lines = self._lines()
            old = self.columns
            tail = [c for c in old if c in _TAIL]
            head = [c for c in old if c not in _TAIL]
            self.columns = head + new + tail
            parts = [_csv_line(self.columns)]
            for _, cells, _ in lines:
                if cells is not None:
                    parts.append(_csv_line([cells.get(c, "") for c in self.columns]))
            text = "".join(parts)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        _atomic_write(self.path / RECORDS, text)
        self._note_columns()

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
        data = "".join(_csv_line(_record_cells(self.columns, r)) for r in records).encode()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        now = time.monotonic()
        if now - self._synced >= self.sync_interval:
            os.fsync(self._fd)
            self._synced = now

    def prune(self, keep: Iterable[tuple[str, int]]) -> int:
        """Remove every record this run does not use; returns how many.

        ``keep`` are the run's ``(config_hash, replication)`` keys; per key the
        record used (or, for a task that failed, its last failed attempt) stays.
        """
        keep = set(keep)
        columns, lines = self._lines()
        if not columns:
            return 0
        rows = [cells for _, cells, _ in lines if cells is not None]
        used, failed, _, _ = _choose(rows, dict.fromkeys(keep))
        chosen = {id(r) for r in (*used.values(), *failed.values())}
        kept = [raw + b"\n" for raw, cells, _ in lines if cells is not None and id(cells) in chosen]
        self.removed = len(lines) - len(kept)
        if self.removed:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            _atomic_write(self.path / RECORDS, _csv_line(columns).encode() + b"".join(kept))
        return self.removed

    def log_error(self, record: Mapping[str, Any], tb: str) -> None:
        """Append a failed task's traceback to ``errors.log``."""
        with (self.path / ERRORS).open("a") as fh:
            fh.write(f"--- point {record.get('point')} replication {record.get('replication')}"
                     f" ({record.get('config_hash')}): {record.get('error')}\n{tb}\n")

    def normalise(self, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Records exactly as they read back from the store (typed cells)."""
        cols = [c for c in (self.columns or list(dict.fromkeys(k for r in records for k in r)))
                if c != "checksum"]
        return [_typed({c: _text(r.get(c)) for c in cols}) for r in records]

    def write_summary(self, result: Any) -> Path:
        """Write ``summary.csv`` (one row per point) atomically."""
        rows = result.summary()
        cols = list(dict.fromkeys(k for r in rows for k in r))
        path = self.path / SUMMARY
        _atomic_write(path, "".join([_csv_line(cols)] + [_csv_line([_text(r.get(c)) for c in cols])
                                                          for r in rows]))
        return path

    def read_summary(self) -> list[dict[str, Any]]:
        """The stored summary table (empty when none)."""
        f = self.path / SUMMARY
        return read_csv(f) if f.is_file() else []
