"""Errors raised on bad input.

Every validation failure is a :class:`ConfigError` whose message follows one
template, ``'<name>' must be <rule>: <value>``, so that the CLI can print it as
a single line and exit with status 2 (the attrs ``validators`` convention).
"""

from __future__ import annotations

import csv
import math
import os
import resource
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "ConfigError",
    "SimulationError",
    "check",
    "check_probability",
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "ascii_int",
    "ascii_float",
    "check_choice",
    "check_memory",
    "check_memory_terms",
    "check_time_terms",
    "TIME_LIMIT",
    "available_memory",
    "format_bytes",
    "check_output_file",
    "check_replaceable",
    "output_target",
    "replace_atomic",
    "write_atomic",
    "check_output_dir",
    "read_csv_text",
    "read_input_bytes",
    "read_input_text",
    "check_input_file",
    "MAX_INPUT_BYTES",
    "MAX_SOURCE_BYTES",
    "one_line",
]


class ConfigError(ValueError):
    """A configuration value broke a rule; the message is one line."""

    def __init__(self, name: str, rule: str, value: Any) -> None:
        self.name = name
        self.rule = rule
        self.value = value
        super().__init__(f"'{name}' must be {rule}: {_shown(value)}")

    def __reduce__(self):  # picklable across process pools and Dask workers
        return (type(self), (self.name, self.rule, self.value))


#: Longest value a message shows whole (characters of its repr); a longer one (a 128 KB
#: field of a CSV file, a 5000-digit number) shows its start, its length and its end.
MAX_SHOWN = 300


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's str conversion limit (4300 digits)
        bits = value.bit_length() if isinstance(value, int) else 0
        text = f"<an integer of about {bits * 0.30103:.0f} digits>"
    if len(text) > MAX_SHOWN:
        text = f"{text[:200]}... ({len(text)} characters) ...{text[-40:]}"
    return text


class SimulationError(RuntimeError):
    """A replication raised while running; the CLI prints one line and exits 1."""

    @classmethod
    def from_records(cls, records: list[dict[str, Any]]) -> SimulationError | None:
        """The first failed replication of ``records`` as an error, or None if none failed."""
        failed = [r for r in records if r.get("error")]
        if not failed:
            return None
        r = failed[0]
        return cls(f"{len(failed)} of {len(records)} replications failed; replication "
                   f"{r.get('replication')}: {r['error']}")


def check(ok: bool, name: str, rule: str, value: Any) -> None:
    """Raise :class:`ConfigError` unless ``ok``."""
    if not ok:
        raise ConfigError(name, rule, value)


def _is_real(value: Any) -> bool:
    # A number, not a string that looks like one: '0.5' would pass float() and
    # then be stored, compared and hashed as a string.
    if isinstance(value, (bool, str, bytes, bytearray)):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _is_inf(value: Any) -> bool:
    return not isinstance(value, (bool, str, bytes, bytearray)) and value == math.inf


def check_real(name: str, value: Any) -> float:
    """Check that ``value`` is a finite real number (not a string that looks like one)."""
    check(_is_real(value), name, "a finite number", value)
    return float(value)


def check_probability(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> float:
    """Check that ``value`` lies in [0, 1] (optionally open at either end)."""
    lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
    rule = f"in {lo}0, 1{hi}"
    check(_is_real(value), name, rule, value)
    v = float(value)
    check((v > 0 if open_low else v >= 0) and (v < 1 if open_high else v <= 1), name, rule, value)
    return v


def _with_units_hint(rule: str, value: Any) -> str:
    """``rule``, and for a text that starts as a number and goes on (a unit: ``'20GB'`` given
    to a config in a script, where only the command line and files read units) how to give
    it: read as ``'must be >= 0: '20GB''``, it looked like a negative size."""
    text = value.strip() if isinstance(value, str) else ""
    if text[:1].isdigit() or (text[:1] == "." and text[1:2].isdigit()):
        try:  # a number and something after it: a unit (sim.units, above this module, knows)
            float(text)
        except ValueError:
            return (f"{rule}, a number in base units (B, B/s, s; a text with a unit is read "
                    "by sim.units.parse(text, kind, name))")
    return rule


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Check that ``value`` is a real number > 0."""
    if type(value) is float and 0.0 < value < math.inf:  # the common case, as below
        return value
    ok = _is_real(value) or (allow_inf and _is_inf(value))
    check(ok and float(value) > 0, name, _with_units_hint(_rule("> 0", value, allow_inf), value),
          value)
    return float(value)


def check_nonnegative(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Check that ``value`` is a real number >= 0."""
    if type(value) is float and 0.0 <= value < math.inf:  # the common case, as below
        return value
    ok = _is_real(value) or (allow_inf and _is_inf(value))
    check(ok and float(value) >= 0, name, _with_units_hint(_rule(">= 0", value, allow_inf),
                                                           value), value)
    return float(value)


def _rule(bound: str, value: Any, allow_inf: bool) -> str:
    """The rule ``value`` broke: ``bound``, or ``finite and bound`` for an infinite value where
    none is allowed (inf is >= 0: '>= 0: inf' named a rule it meets)."""
    if not allow_inf and _is_inf(value):
        return f"a finite number {bound}"
    return bound


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Check that ``value`` is an integer in [low, high] (either bound optional)."""
    if low is not None and high is not None:
        rule = f"an integer in [{low}, {high}]"
    elif low is not None:
        rule = f"an integer >= {low}"
    elif high is not None:
        rule = f"an integer <= {high}"
    else:
        rule = "an integer"
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if not is_int and hasattr(value, "__index__") and not isinstance(value, bool):
        is_int = True
    check(is_int, name, rule, value)
    v = int(value)
    check((low is None or v >= low) and (high is None or v <= high), name, rule, value)
    return v


def ascii_int(text: Any) -> int:
    """``int(text)`` for text in ASCII only (an argparse type and the CLI's list readers).

    Python's ``int`` also reads other scripts' digits (``int("\u0661") == 1``), which a
    command line never means; what ``int`` takes otherwise stays: surrounding white space, a
    sign (``+3``, ``-1``), underscores between digits (``1_000``). Not a string: ``int``'s.
    Raises ValueError, which argparse and the readers turn into their one-line refusal.
    """
    if isinstance(text, str) and not text.isascii():
        raise ValueError(f"invalid literal for int() (ASCII digits only): {text!r}")
    return int(text)


def ascii_float(text: Any) -> float:
    """``float(text)`` for text in ASCII only: the float counterpart of :func:`ascii_int`, the
    one reader of every number typed on a command line or in a spec text (``--availability``,
    ``--strategy redundancy:slowdown=1.5``, ``--sync diloco:topk=0.1``, a plain ``--mtbf``).

    Python's ``float`` also reads other scripts' digits (``float("\u0661.5") == 1.5``) and
    white space of other scripts (``"\u00a03"``), which a command line never means; what
    ``float`` takes otherwise stays, as :func:`ascii_int` keeps ``int``'s: surrounding white
    space, a sign, an exponent, underscores between digits (``1_000.5``), ``inf`` and ``nan``
    (each option's rule judges those). Not a string: ``float``'s. Raises ValueError, which
    argparse and the readers turn into their one-line refusal.
    """
    if isinstance(text, str) and not text.isascii():
        raise ValueError(f"could not convert string to float (ASCII digits only): {text!r}")
    return float(text)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of ``choices``."""
    options = list(choices)
    check(value in options, name, "one of " + ", ".join(options), value)
    return str(value)


# ----------------------------------------------------------------------------- memory


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_headroom() -> int | None:
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                          "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        lim, use = _read_int(limit), _read_int(usage)
        if lim is not None and use is not None and lim < 2**60:
            return max(0, lim - use)
    return None


def _address_space_headroom() -> int | None:
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - used)


def available_memory() -> int:
    """Bytes this process can still allocate, as far as the machine says.

    The least of the machine's available memory (``MemAvailable`` in
    ``/proc/meminfo``, else ``os.sysconf``), the headroom of the memory cgroup
    (v2 or v1) and the headroom of the address-space limit (``RLIMIT_AS``).
    """
    found = [v for v in (_meminfo_available(), _cgroup_headroom(), _address_space_headroom())
             if v is not None]
    if not found:
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return 2**62
    return int(min(found))


def format_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"``; binary units up to EiB, beyond that in EiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    v = float(n)
    for u in units:
        if abs(v) < 1024 or u == units[-1]:
            return f"{v:.3g} {u}"
        v /= 1024
    return f"{v:.3g} EiB"  # pragma: no cover


#: Needs of at most this many bytes are not checked against the machine (no files read): the
#: interpreter and numpy already hold more than this, so a process that got here has had it.
NEVER_PROBED = 16 * 2**20


def check_memory(name: str, value: Any, nbytes: float, *, available: int | None = None) -> None:
    """Refuse ``value`` of ``name`` when the memory it drives, ``nbytes``, cannot fit.

    Parameters
    ----------
    name : str
        The parameter that drives the memory (the one the message names).
    value : Any
        Its value, as given.
    nbytes : float
        Estimated bytes the run needs because of it.
    available : int, optional
        Bytes available (default :func:`available_memory`, not read for a need of at
        most :data:`NEVER_PROBED` bytes).

    Raises
    ------
    ConfigError
        ``'<name>' must fit in memory (needs about X, Y available): <value>``.
    """
    if available is None and nbytes <= NEVER_PROBED:
        return
    avail = available_memory() if available is None else available
    if nbytes > avail:
        raise ConfigError(name, f"small enough to fit in memory (needs about {format_bytes(nbytes)}, "
                                f"{format_bytes(avail)} available)", value)


def check_memory_terms(terms: Iterable[tuple[str, Any, float]], *,
                       available: int | None = None) -> None:
    """Refuse a config whose memory, the sum of ``terms``, cannot fit; name the largest term.

    Parameters
    ----------
    terms : iterable of (name, value, bytes)
        The memory each parameter drives (a product such as ``nodes * dim``
        split into the part each factor adds).
    available : int, optional
        Bytes available (default :func:`available_memory`).
    """
    items = list(terms)
    if not items:
        return
    total = float(sum(b for _, _, b in items))
    name, value, _ = max(items, key=lambda t: t[2])
    check_memory(name, value, total, available=available)


#: The largest simulated time a run may reach by the bound of :func:`check_time_terms`: a
#: margin of 1e8 below the largest float (1.8e308), so the sums and products of the results
#: (rates, costs, their intervals) stay finite.
TIME_LIMIT = 1e300


def check_time_terms(count: float, terms: Iterable[tuple[str, float, Any]], what: str) -> None:
    """Refuse a config whose run would overflow to inf: ``count`` (how many times the run may
    add the terms up one after the other, ``what`` says how) times the sum of the ``terms``'
    times must be at most :data:`TIME_LIMIT`; the largest term is named.

    Parameters
    ----------
    count : float
        A bound on the run's repetitions of the terms (steps, micro-batches, stages).
    terms : iterable of (name, seconds, value)
        The time each parameter adds per repetition and the value to show; a name starting
        with ``+`` (a rate: ``bandwidth``) must be large enough, the others small enough.
    what : str
        ``count`` in words, for the message.
    """
    items = list(terms)
    if not items or count * sum(t for _, t, _ in items) <= TIME_LIMIT:
        return
    name, _, value = max(items, key=lambda t: t[1])
    if isinstance(value, tuple) and len(set(value)) == 1:
        value = value[0]  # a value given once, spread per stage or hop
    how = "large" if name.startswith("+") else "small"
    raise ConfigError(name.lstrip("+"), f"{how} enough that the run's time stays finite "
                      f"({what} x the sum of its times at most {TIME_LIMIT:g})", value)


# ----------------------------------------------------------------------------- output locations


def one_line(exc: BaseException) -> str:
    """``OSError`` and friends as one short line: the reason and the file, no errno."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _probe(folder: Path) -> str | None:
    """Why a file cannot be written in the existing ``folder`` (None when it can)."""
    probe = folder / f".dtsim-probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, b"probe\n")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass
    return None


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


#: Largest input data file any reader takes (traces, topologies, speeds and
#: other CSV files, results folders' files): 256 MiB. A larger file is refused
#: in one line before it is read; the readers parse a valid file of this size
#: in seconds to minutes, and a bigger one is more likely a wrong path (a disk
#: image, a log) than a trace.
MAX_INPUT_BYTES = 256 * 2**20
#: Largest Python source file read as an experiment or a user builder: 16 MiB
#: (the source travels with every task to the workers).
MAX_SOURCE_BYTES = 16 * 2**20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    for test, what in _KINDS:
        if test(mode):
            return what
    return "not a regular file"


def check_input_file(name: str, path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES,
                     rule: str = "a readable regular file") -> os.stat_result:
    """Refuse, without opening it, a ``path`` that is not a regular file of at most ``limit`` bytes.

    A FIFO, a socket, a device (``/dev/zero``, ``/dev/urandom``) or a folder is
    refused from its ``stat`` alone, so nothing blocks or reads forever.

    Raises
    ------
    ConfigError
        ``'<name>' must be <rule>: <path> (<reason>)``.
    """
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(name, rule, f"{path} ({exc.strerror})") from None
    except ValueError as exc:  # an embedded NUL byte
        raise ConfigError(name, rule, f"{path} ({exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(name, rule, f"{path} ({_kind(st.st_mode)})")
    if st.st_size > limit:
        raise ConfigError(name, rule, f"{path} ({format_bytes(st.st_size)}, more than the "
                                      f"{format_bytes(limit)} an input file may have)")
    return st


def read_input_bytes(name: str, path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES,
                     rule: str = "a readable regular file") -> bytes:
    """The bytes of a user's input file, read safely; the one reader every input goes through.

    The file must be a regular file (checked before and again after it is
    opened, without blocking) of at most ``limit`` bytes, and no more than
    ``limit`` bytes are ever read (a file that grows, or a ``/proc`` file
    whose size says 0, is bounded too).

    Parameters
    ----------
    name : str
        The parameter that gave the path (the one an error names).
    path : path
    limit : int
        Largest size accepted (default :data:`MAX_INPUT_BYTES`).
    rule : str
        What the parameter must be, for the error message.

    Raises
    ------
    ConfigError
        ``'<name>' must be <rule>: <path> (<reason>)`` for a missing or
        unreadable path, a folder, a FIFO, a socket, a device or a file
        larger than ``limit``.
    """
    check_input_file(name, path, limit=limit, rule=rule)
    try:
        # O_NONBLOCK: a FIFO put in the file's place after the check opens without waiting
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(name, rule, f"{path} ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(name, rule, f"{path} ({_kind(st.st_mode)})")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 24, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise ConfigError(name, rule, f"{path} (more than the {format_bytes(limit)} an "
                                              "input file may have)")
    except OSError as exc:
        raise ConfigError(name, rule, f"{path} ({exc.strerror})") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_input_text(name: str, path: str | os.PathLike[str], *, limit: int = MAX_INPUT_BYTES,
                    rule: str = "a readable text file") -> str:
    """The UTF-8 text of a user's input file (see :func:`read_input_bytes`).

    Raises
    ------
    ConfigError
        As :func:`read_input_bytes`, and ``'<name>' must be a text file
        (UTF-8): <path> (byte ... at offset ... is not text)`` for binary
        content.
    """
    data = read_input_bytes(name, path, limit=limit, rule=rule)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "a text file (UTF-8)",
                          f"{path} (byte {exc.object[exc.start:exc.start + 1]!r} at offset "
                          f"{exc.start} is not text)") from None


def read_csv_text(name: str, path: str | os.PathLike[str]) -> str:
    """The text of a CSV file, or one ConfigError line naming ``name`` and what is wrong.

    Read with :func:`read_input_bytes` (a regular file of at most
    :data:`MAX_INPUT_BYTES`). A UTF-8 byte-order mark (what spreadsheet programs
    write first) is not text: it is dropped, so the first column keeps its name.

    Raises
    ------
    ConfigError
        ``'<name>' must be a readable CSV file: <path> (<reason>)`` when it
        cannot be read or is not a regular file, ``'<name>' must be a CSV text
        file (UTF-8): ...`` when it holds bytes that are not text (a binary
        file is bad input, not a crash).
    """
    data = read_input_bytes(name, path, rule="a readable CSV file")
    # a field may be as long as the file (the csv module's default limit, 128 KiB, would
    # end a valid file in a csv.Error): the file's size is bounded already
    if csv.field_size_limit() < MAX_INPUT_BYTES:
        csv.field_size_limit(MAX_INPUT_BYTES)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "a CSV text file (UTF-8)",
                          f"{path} (byte {exc.object[exc.start:exc.start + 1]!r} at offset "
                          f"{exc.start} is not text)") from None


def check_replaceable(name: str, path: str | os.PathLike[str], *, overwrite: bool,
                      ours: Callable[[Path], bool], kind: str,
                      how: str = "--overwrite replaces any file") -> Path:
    """:func:`check_output_file`, and an existing file is replaced only when dtsim wrote it.

    A file already at ``path`` is replaced when ``overwrite`` (``--overwrite``), when it is
    empty (nothing to lose), or when ``ours(path)`` recognises it as a ``kind`` dtsim writes
    (by content dtsim always writes): re-running a command replaces its own output, never a
    file of the user's. ``/dev/null`` is always accepted.

    A symbolic link at ``path`` stays a link: the file it points to is what is checked (by the
    same rule: dtsim's own output, empty, or ``overwrite``; a link to no file yet only with
    ``overwrite``) and what :func:`replace_atomic` writes (:func:`output_target`).

    Raises
    ------
    ConfigError
        ``'<name>' must be a new file or <kind> dtsim wrote (<how>): <path>``, before any
        work.
    """
    p = check_output_file(name, path)
    if os.path.realpath(p) == os.devnull:
        return p
    t = output_target(p)
    if p.is_symlink():  # the file it points to is checked and written (its folder too)
        if t.is_symlink():
            raise ConfigError(name, "a writable file", f"{path} (a symbolic link that leads "
                                                       "to no file: a loop)")
        check_output_file(name, t)
        if not (t.exists() or overwrite):  # a new file only where the user said so
            raise ConfigError(name, f"a new file or {kind} dtsim wrote ({how})",
                              f"{path} (a link to {t}, which does not exist)")
    if overwrite or not t.exists():
        return p
    try:
        mine = t.is_file() and (t.stat().st_size == 0 or bool(ours(t)))
    except (OSError, ValueError):
        mine = False
    if not mine:
        raise ConfigError(name, f"a new file or {kind} dtsim wrote ({how})",
                          f"{path} (a link to {t})" if p.is_symlink() else str(path))
    return p


def output_target(path: str | os.PathLike[str]) -> Path:
    """The file an output at ``path`` writes: ``path``, or for a symbolic link the file it
    points to (resolved), so a write never turns the user's link into a file."""
    p = Path(path)
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def head_bytes(path: Path, n: int = 4096) -> bytes:
    """The first ``n`` bytes of ``path`` (how an output is recognised as dtsim's)."""
    with open(path, "rb") as fh:
        return fh.read(n)


def tail_bytes(path: Path, n: int = 65536) -> bytes:
    """The last ``n`` bytes of ``path``."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - n))
        return fh.read(n)


def replace_atomic(path: str | os.PathLike[str], write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp)`` on a temporary file in ``path``'s folder (made if missing), then
    rename it over ``path``. A crash or a failed write midway leaves the earlier file whole
    (and no temporary file); a new file gets the usual permissions (0666 less the umask), a
    replaced one keeps its own. ``/dev/null`` is written directly (``write(path)``). A
    symbolic link is written through: the file it points to is replaced, the link stays
    (:func:`output_target`; whether it may be is :func:`check_replaceable`'s question)."""
    p = Path(path)
    if os.path.realpath(p) == os.devnull:
        write(p)
        return p
    link, p = p, output_target(p)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(p.stat().st_mode)
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        mode = 0o666 & ~mask
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return link


def write_atomic(path: str | os.PathLike[str], text: str | Iterable[str], *,
                 newline: str | None = None) -> Path:
    """Write ``text`` (a string or its pieces) to ``path`` atomically, synced before the
    rename (:func:`replace_atomic`)."""
    def write(target: Path) -> None:
        with open(target, "w", encoding="utf-8", newline=newline) as fh:
            fh.writelines([text] if isinstance(text, str) else text)
            if os.path.realpath(target) != os.devnull:
                fh.flush()
                os.fsync(fh.fileno())

    return replace_atomic(path, write)


def check_output_dir(name: str, path: str | os.PathLike[str]) -> Path:
    """Check, before any work, that ``path`` is (or can become) a writable folder.

    Nothing is created: the nearest existing ancestor must be a folder in
    which a file can be written (a probe file is written, synced and removed,
    so a read-only or full file system is caught).

    Raises
    ------
    ConfigError
        ``'<name>' must be a writable folder: <path> (<reason>)``.
    """
    p = Path(path)
    rule = "a writable folder"
    if str(path).strip() == "":
        raise ConfigError(name, rule, str(path))
    if p.exists() and not p.is_dir():
        raise ConfigError(name, rule, f"{path} (a file, not a folder)")
    base = _nearest_existing(p)
    if not base.is_dir():
        raise ConfigError(name, rule, f"{path} ({base} is a file, not a folder)")
    why = _probe(base)
    if why is not None:
        raise ConfigError(name, rule, f"{path} ({why})")
    return p


def check_output_file(name: str, path: str | os.PathLike[str]) -> Path:
    """Check, before any work, that a file can be written at ``path``.

    The file may exist (it is then overwritten or appended to by the caller)
    but must not be a folder, nor a device or a FIFO (``/dev/null`` aside);
    its folder must exist or be creatable, and a file must be writable there
    (see :func:`check_output_dir`). An empty path is refused.

    Raises
    ------
    ConfigError
        ``'<name>' must be a writable file: <path> (<reason>)``.
    """
    p = Path(path)
    rule = "a writable file"
    if str(path).strip() == "":
        raise ConfigError(name, rule, str(path))
    if str(path).endswith(("/", os.sep)):  # (audit9) Path() drops the slash: a file was written
        raise ConfigError(name, rule, f"{path} (a name ending in '/' is a folder's)")
    if p.is_dir():
        raise ConfigError(name, rule, f"{path} (a folder)")
    if p.exists() and not p.is_file() and os.path.realpath(p) != os.devnull:
        # a device or a FIFO: writes would block, vanish or fail after the work
        raise ConfigError(name, rule, f"{path} ({_kind(p.stat().st_mode)})")
    if p.exists():
        try:
            with open(p, "a"):
                pass
        except OSError as exc:
            raise ConfigError(name, rule, f"{path} ({exc.strerror})") from None
    base = _nearest_existing(p.parent)
    if not base.is_dir():
        raise ConfigError(name, rule, f"{path} ({base} is a file, not a folder)")
    why = _probe(base)
    if why is not None:
        raise ConfigError(name, rule, f"{path} ({why})")
    return p
