"""Identities: stable hashes of configs, points and code.

A stored record is reused only when its identity matches, so every hash here
is the same in every process and on every machine: :func:`canonical` turns a
config into text built from values only (numbers, strings, booleans, None,
tuples, lists, dicts, dataclasses of those, enums, numpy arrays and scalars)
and raises :class:`~sim.errors.ConfigError` on anything else -- a graph, a
layout, an open file -- naming the field, rather than falling back to
``repr()`` (which may hold a memory address).

The code identity (:func:`code_version`) covers the ``sim`` and
``topologies`` sources, the experiment file's code (parameters excluded, see
:func:`experiment_code_hash`) and every module of the user's own code the
experiment imports, directly or through other user modules (anything outside
the standard library and installed third-party packages; see
:func:`user_modules`).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import re
import stat
import sys
import sysconfig
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MAX_INPUT_BYTES, MAX_SOURCE_BYTES, ConfigError, read_input_bytes

__all__ = [
    "canonical",
    "digest",
    "point_key",
    "key_words",
    "config_hash",
    "experiment_code_hash",
    "sources_hash",
    "user_modules",
    "code_version",
    "PARAMETER_NAMES",
]

#: Top-level names of an experiment file that act only through the config, the
#: task list, the summary's intervals (``RATES``, ``NONNEGATIVE``) or the figures, so they are left
#: out of its code hash.
PARAMETER_NAMES = frozenset(
    {"NAME", "TITLE", "STUDY", "BASE", "FACTORS", "POINTS", "REPLICATIONS", "QUICK", "SEED",
     "BATCH", "RATES", "NONNEGATIVE", "analyse", "claims"}
)
#: Sources that only present results; editing them does not invalidate stored results.
PRESENTATION = ("commands", "cli.py", "__main__.py", "plotting.py")

_SIM_ROOT = Path(__file__).resolve().parents[1]
_TOPOLOGIES_ROOT = _SIM_ROOT.parent / "topologies"


def digest(text: str, nbytes: int = 8) -> str:
    """Hex blake2b digest of ``text`` (``2 * nbytes`` hex digits)."""
    return hashlib.blake2b(text.encode(), digest_size=nbytes).hexdigest()


def _canon(obj: Any, where: str) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        out = {"__type__": type(obj).__qualname__}
        out.update({f.name: _canon(getattr(obj, f.name), f.name) for f in fields(obj)})
        return out
    if isinstance(obj, Mapping):
        return {str(k): _canon(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canon(v, where) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((_canon(v, where) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return {"__float__": repr(float(obj))}
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "biuf":
        return {"__array__": obj.dtype.str, "shape": list(obj.shape),
                "data": _canon(obj.tolist(), where)}
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, Enum):
        return f"{type(obj).__qualname__}.{obj.name}"
    qual = getattr(obj, "__qualname__", None)
    if callable(obj) and isinstance(qual, str) and "<" not in qual:
        return f"{getattr(obj, '__module__', '')}:{qual}"
    raise ConfigError(
        where,
        "a value (number, string, bool, None, tuple, list, dict, dataclass, enum or numeric "
        "array) so that its hash is the same in every process, not a "
        f"{type(obj).__module__}.{type(obj).__qualname__}",
        _short(obj))


def _short(obj: Any) -> str:
    try:
        text = " ".join(repr(obj).split())
    except Exception:  # pragma: no cover - a repr that raises
        text = type(obj).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def canonical(obj: Any) -> str:
    """A stable text form of a config or parameter dict, for hashing.

    Parameters
    ----------
    obj : object
        Dataclasses (by class name and fields), mappings (key order ignored),
        sequences, numbers (``1`` and ``1.0`` differ), strings, numeric arrays,
        paths, enums and named top-level functions or classes.

    Returns
    -------
    str
        Compact JSON.

    Raises
    ------
    ConfigError
        On any object without a stable value form, naming the field that
        holds it (for example a networkx graph kept on a config).
    """
    return json.dumps(_canon(obj, "config"), sort_keys=True, separators=(",", ":"))


def point_key(params: Mapping[str, Any]) -> str:
    """Stable 16-hex-digit identity of a point's parameters (the stream address)."""
    return digest(canonical(dict(params)))


def key_words(key: str) -> tuple[int, int]:
    """The two 32-bit integers of a :func:`point_key`, used as spawn-key entries."""
    return int(key[:8], 16), int(key[8:16], 16)


def config_hash(config: Any, seed: int, code: str = "") -> str:
    """Hash of everything a task's result depends on: config, stream seed, code version and
    the contents of the files the config names (:func:`input_files`).

    A config that names no file hashes as it always did (the ``files`` entry is left out).
    """
    doc: dict[str, Any] = {"config": config, "seed": int(seed), "code": code}
    files = input_files(config)
    if files:
        doc["files"] = files
    return digest(canonical(doc))


#: What splits a config's text into the words that may name a file: the separators of a
#: topology, sync or strategy spec (``geo:pairs=data/pairs.csv,hosts=2``), but not ``/``.
_SPEC_SEPARATORS = re.compile(r"[,;=:\s]+")
#: A user builder named in a spec: ``module:function`` or ``module:function:params``.
_BUILDER = re.compile(r"(?P<mod>[A-Za-z_][\w.]*):[A-Za-z_]\w*(?::.*)?")
#: Files hashed once a process, by resolved path, size and modification time.
_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def _text_leaves(obj: Any) -> list[str]:
    """Every string of a config's :func:`canonical` form (values, not keys or type names)."""
    if isinstance(obj, dict):
        return [s for k, v in obj.items() if k not in ("__type__", "__float__", "__array__")
                for s in _text_leaves(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in _text_leaves(v)]
    return [obj] if isinstance(obj, str) else []


def _file_hash(path: Path, limit: int = MAX_INPUT_BYTES) -> str | None:
    """The hash of a regular file's contents, read without blocking and never more than
    ``limit`` bytes (:data:`sim.errors.MAX_INPUT_BYTES`, what any input file may have); a
    larger file (a data set the model reads itself, a sparse image) is hashed by its size
    and modification time instead, and one that cannot be read at once (``/proc/kmsg``
    blocks) is not hashed (None). (audit6: a config naming a 20 GB file read all of it, and
    one naming ``/proc/kmsg`` waited for ever, before the first task.)"""
    try:
        st = path.stat()
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    # by the file itself, not the path as written: one relative path names another file
    # once the working directory changes
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.blake2b(digest_size=8)
        total = 0
        if st.st_size <= limit:
            try:  # O_NONBLOCK: a FIFO put in the file's place opens without waiting
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                return None
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                while total <= limit:
                    chunk = os.read(fd, min(1 << 20, limit + 1 - total))
                    if not chunk:
                        break
                    h.update(chunk)
                    total += len(chunk)
            except OSError:
                return None
            finally:
                os.close(fd)
        if st.st_size > limit or total > limit:
            # larger than any input dtsim reads (a user model's data set, say): keyed by its
            # size and modification time, unread; an edit still moves the hash, a copy with a
            # new time recomputes (never mixes)
            h = hashlib.blake2b(f"size {st.st_size} mtime_ns {st.st_mtime_ns}".encode(),
                                digest_size=8)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def _module_in_cwd(name: str) -> Path | None:
    """The file of module ``name`` in the working directory (where a console script's spec
    builder is imported from: :func:`topologies.spec` puts it on the path), if any."""
    base = Path(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.resolve()
    return None


def input_files(config: Any) -> dict[str, str]:
    """The files a config names, with the hash of each one's contents.

    A config holds a file by its path only (``network="zones.json"``, a trace file, a
    ``geo:pairs=FILE`` table, a speeds or step-times CSV) or a user builder by its module
    (``mytopo:zones``), so editing the file would leave the config, and so its stored
    records, unchanged. Every word of the config's text values (split at the separators of
    a spec) that names a regular file, relative to the working directory or absolute, and
    the module file of every ``module:function`` outside the standard library, installed
    packages and dtsim, are returned: ``path as written -> blake2b hash``. Folders are not
    read, nor a file over :data:`~sim.errors.MAX_INPUT_BYTES` (larger than any input dtsim
    reads: its size and modification time are hashed). Empty when the config names none.
    """
    try:
        leaves = _text_leaves(_canon(config, "config"))
    except ConfigError:
        return {}
    found: dict[str, str] = {}
    installed: list[Path] | None = None
    for text in leaves:
        if len(text) > 4096:
            continue
        for word in {text.strip(), *_SPEC_SEPARATORS.split(text)}:
            if not word or word in found or word in (".", ".."):
                continue
            path = Path(word)
            try:
                regular = path.is_file()
            except (OSError, ValueError):
                regular = False
            if regular:
                h = _file_hash(path)
                if h is not None:
                    found[word] = h
        m = _BUILDER.fullmatch(text.strip())
        if m and m["mod"] not in found:
            # a dotted name is looked for as a file only: finding its spec imports its parents
            origin = _origin(m["mod"]) if "." not in m["mod"] else None
            module = origin[0] if origin is not None else _module_in_cwd(m["mod"])
            if module is not None:
                installed = _installed_roots() if installed is None else installed
                if _is_user_file(module, installed):
                    h = _file_hash(module)
                    if h is not None:
                        found[m["mod"]] = h
    return dict(sorted(found.items()))


def experiment_code_hash(source: str) -> str:
    """Hash of an experiment file's code, parameters excluded.

    The file's syntax tree (so comments and formatting do not count) without
    the docstring, the ``if __name__ == "__main__"`` block, ``analyse``,
    ``claims`` and the top-level assignments of :data:`PARAMETER_NAMES`: those
    reach the results only through each point's config, which is hashed
    separately. Changing a factor value therefore recomputes only the
    affected points, while editing the model recomputes them all.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return digest(source)
    body = []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id in PARAMETER_NAMES for t in targets):
                continue
        if isinstance(node, ast.FunctionDef) and node.name in PARAMETER_NAMES:
            continue
        if isinstance(node, ast.If) and "__main__" in ast.dump(node.test):
            continue
        body.append(node)
    return digest("\n".join(ast.dump(n) for n in body))


def sources_hash() -> str:
    """Hash of the ``sim`` and ``topologies`` sources, presentation modules excluded."""
    h = hashlib.blake2b(digest_size=8)
    for root in (_SIM_ROOT, _TOPOLOGIES_ROOT):
        if not root.is_dir():
            continue
        for f in sorted(root.rglob("*.py")):
            rel = f.relative_to(root)
            if root == _SIM_ROOT and rel.parts[0] in PRESENTATION:
                continue
            h.update(f"{root.name}/{rel.as_posix()}".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _installed_roots() -> list[Path]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            roots.add(Path(p).resolve())
    for p in (sys.base_prefix, sys.prefix):
        roots.add(Path(p).resolve() / "lib")
    return sorted(roots)


def _is_user_file(path: Path, installed: list[Path]) -> bool:
    if path.suffix != ".py":
        return False
    for root in (*installed, _SIM_ROOT, _TOPOLOGIES_ROOT):
        if path == root or root in path.parents:
            return False
    return True


def _imported_names(source: str, package: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            if not base:
                continue
            names.append(base)
            names.extend(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return names


def _origin(name: str) -> tuple[Path, bool] | None:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None) if mod is not None else None
    is_pkg = mod is not None and hasattr(mod, "__path__")
    if f is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError, AttributeError):
            return None
        if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
            return None
        f, is_pkg = spec.origin, spec.submodule_search_locations is not None
    return Path(f).resolve(), is_pkg


def user_modules(source: str, package: str = "") -> dict[str, str]:
    """The user's own modules an experiment imports, with the hash of each file.

    Parameters
    ----------
    source : str
        The experiment file's source.
    package : str
        Its package, for relative imports (empty for a plain file).

    Returns
    -------
    dict
        ``module name -> blake2b hash of its file``, for every module imported
        (at the top or inside a function, directly or through another user
        module) whose file lies outside the standard library, the installed
        packages and ``sim``/``topologies`` (hashed separately).

    Notes
    -----
    Imports are found in the syntax tree, so a module imported by a computed
    name (``importlib.import_module(name)``) is not seen.
    """
    installed = _installed_roots()
    found: dict[str, str] = {}
    todo = [(source, package)]
    seen: set[str] = set()
    while todo:
        src, pkg = todo.pop()
        for name in _imported_names(src, pkg):
            if name in seen:
                continue
            seen.add(name)
            origin = _origin(name)
            if origin is None or not _is_user_file(origin[0], installed):
                continue
            path, is_pkg = origin
            try:
                data = path.read_bytes()
            except OSError:
                continue
            found[name] = hashlib.blake2b(data, digest_size=8).hexdigest()
            todo.append((data.decode("utf-8", "replace"), name if is_pkg else name.rpartition(".")[0]))
    return dict(sorted(found.items()))


def code_version(path: str | Path | None = None) -> dict[str, Any]:
    """The code a sweep's results depend on.

    Parameters
    ----------
    path : path, optional
        The experiment file.

    Returns
    -------
    dict
        ``package`` (the dtsim version), ``sim`` (hash of the ``sim`` and
        ``topologies`` sources, presentation modules -- CLI, plotting --
        excluded) and, with ``path``, ``experiment`` (:func:`experiment_code_hash`
        of the file) and ``modules`` (:func:`user_modules` it imports).

    Notes
    -----
    The environment variable ``DTSIM_CODE_PIN``, when set, replaces the
    sources hash: for tests, or to keep stored results across edits known not
    to change them (at your own risk).
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        pkg = version("dtsim")
    except PackageNotFoundError:  # pragma: no cover
        pkg = "unknown"
    out: dict[str, Any] = {"package": pkg, "sim": os.environ.get("DTSIM_CODE_PIN") or sources_hash()}
    if path is not None:
        source = read_input_bytes("experiment", path, limit=MAX_SOURCE_BYTES).decode(
            "utf-8", errors="replace")
        out["experiment"] = experiment_code_hash(source)
        mods = user_modules(source)
        if mods:
            out["modules"] = mods
    return out
