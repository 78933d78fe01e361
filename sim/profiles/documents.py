"""Reading JSON and TOML documents as plain data, every failure one ConfigError line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import ConfigError, read_input_bytes

__all__ = ["MAX_DOCUMENT_BYTES", "read_document", "get"]

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
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(name, "a JSON or TOML text file (UTF-8)",
                          f"{path} (byte at offset {exc.start} is not text)") from None
    if p.suffix.lower() == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(name, "a valid TOML file", f"{path} ({exc})") from None
        except RecursionError:
            raise ConfigError(name, "a valid TOML file", f"{path} (nested too deeply)") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # [[[[...]]]] thousands deep: bad input, not a crash
        raise ConfigError(name, "a valid JSON file", f"{path} (nested too deeply)") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(name, "a valid JSON file",
                          f"{path} (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise ConfigError(name, "a valid JSON file", f"{path} ({exc})") from None


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a number JSON allows")


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
