"""Reading JSON and TOML documents as plain data, every failure one ConfigError line."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ConfigError, read_input_bytes

__all__ = ["MAX_DOCUMENT_BYTES", "read_document", "get", "located"]

#: Largest input document read (bytes): the shipped profiles are under 1 MB.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


def read_document(name: str, path: str | os.PathLike[str]) -> Any:
    """The data of a JSON (``.json``) or TOML (``.toml``) file.

    Raises
    ------
    ConfigError
        Naming ``name``: a file that cannot be read, is too large, is not
        UTF-8 text, or does not parse (with the line and column).
    """
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise ConfigError(name, "a readable JSON or TOML file", f"{path} ({exc.strerror})") from None
    if size > MAX_DOCUMENT_BYTES:
        raise ConfigError(name, f"a file of at most {MAX_DOCUMENT_BYTES} bytes", f"{path} ({size})")
    # a regular file, read at most MAX_DOCUMENT_BYTES: a FIFO or /dev/zero is refused unread
    data = read_input_bytes(name, p, limit=MAX_DOCUMENT_BYTES,
                            rule="a readable JSON or TOML file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "a JSON or TOML text file (UTF-8)",
                          f"{path} (byte at offset {exc.start} is not text)") from None
    if p.suffix.lower() == ".toml":
        import tomllib

        try:
            return tomllib.loads(text, parse_float=_finite_float)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(name, "a valid TOML file", f"{path} ({exc})") from None
        except RecursionError:
            raise ConfigError(name, "a valid TOML file", f"{path} (nested too deeply)") from None
        except ValueError as exc:  # a number beyond a double (parse_float)
            raise ConfigError(name, "a valid TOML file", f"{path} ({exc})") from None
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:  # [[[[...]]]] thousands deep: bad input, not a crash
        raise ConfigError(name, "a valid JSON file", f"{path} (nested too deeply)") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(name, "a valid JSON file",
                          f"{path} (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise ConfigError(name, "a valid JSON file", f"{path} ({exc})") from None


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number JSON allows")


def _finite_float(token: str) -> float:
    """A number of the document; one beyond a double (``1e400``) is refused, not read as inf."""
    x = float(token)
    if x in (float("inf"), float("-inf")) and token.strip().lower().lstrip("+-") not in (
            "inf", "infinity"):
        raise ValueError(f"{token} is beyond the largest double (about 1.8e308)")
    return x


def get(name: str, obj: Any, key: str | int, where: str, kind: type | tuple[type, ...] | None = None
        ) -> Any:
    """``obj[key]``, or one ConfigError line naming ``name`` and ``where`` in the document."""
    try:
        value = obj[key]
    except (KeyError, IndexError, TypeError):
        raise ConfigError(name, f"a document with {key!r} at {where}",
                          type(obj).__name__ if not isinstance(obj, (dict, list)) else
                          f"keys {sorted(map(str, obj))[:8]}" if isinstance(obj, dict) else
                          f"a list of {len(obj)}") from None
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)
                             and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        raise ConfigError(name, f"{' or '.join(k.__name__ for k in kinds)} at {where}.{key}",
                          value if not isinstance(value, (dict, list)) else type(value).__name__)
    return value


@contextmanager
def located(name: str, where: str) -> Iterator[None]:
    """Re-raise a value's ConfigError as one naming ``name`` and where in the document it is.

    A value built from a document (a layer's times, a curve) checks its own fields
    (``'forward' must be >= 0: -1``); inside this block the message names the
    document and the place: ``'profiles' must be >= 0 for forward at M.GPU.2.1: -1``.
    """
    try:
        yield
    except ConfigError as exc:
        if exc.name == name:
            raise
        raise ConfigError(name, f"{exc.rule} for {exc.name} at {where}", exc.value) from None
