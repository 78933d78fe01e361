"""How the replicas of a stage synchronise their gradients: ``--sync KIND[:key=value,...]``.

:func:`parse_sync` reads the text (``TrainingConfig.sync`` holds its canonical
form, :attr:`SyncSpec.text`) into a frozen :class:`SyncSpec`. The grammar is a
kind, then optional ``key=value`` pairs after a colon, comma-separated; each
kind's keys, their readers and defaults are one row of :data:`KINDS`:

``allreduce``
    The ring all-reduce of each stage's gradients among its replicas at the
    end of a step (the default). Keys:

    * ``overlap``: ``none`` (default: the all-reduce starts once the step's
      backward passes are done) or ``backward`` (buckets released as the
      backward pass produces their gradients: PyTorch DDP's ``Reducer`` and
      Megatron-LM's ``overlap_grad_reduce``; see
      :func:`sim.training.traffic.gradient_buckets`);
    * ``bucket_size``: the bucket (> 0, in the units of ``param_size``,
      bytes for a plan; default: the framework's, see
      :func:`~sim.training.traffic.gradient_buckets`).
``none``
    No synchronisation (no keys).

A key a kind does not have, a value its reader refuses or a key given twice
is one line naming ``sync``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["KINDS", "OVERLAPS", "SyncSpec", "parse_sync"]

#: When the all-reduce starts: after the step's backward passes, or bucket by bucket during them.
OVERLAPS = ("none", "backward")


def _choice(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def read(key: str, text: str) -> str:
        if text not in options:
            raise ConfigError("sync", f"{key} in ({', '.join(options)})", text)
        return text
    return read


def _positive(key: str, text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ConfigError("sync", f"{key} > 0", text)
    return x


#: kind -> key -> (reader of the value's text, default). A default of None: unset.
KINDS: dict[str, dict[str, tuple[Callable[[str, str], Any], Any]]] = {
    "allreduce": {"overlap": (_choice(OVERLAPS), "none"), "bucket_size": (_positive, None)},
    "none": {},
}


@dataclass(frozen=True)
class SyncSpec:
    """A parsed ``--sync`` (values only): the kind and every key of its row with its value.

    Attributes
    ----------
    kind : str
    params : tuple of (str, value)
        Every key of the kind, in the row's order, with its given or default value.
    """

    kind: str
    params: tuple[tuple[str, Any], ...] = ()

    def __getitem__(self, key: str) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` when the kind has no such key."""
        try:
            return self[key]
        except KeyError:
            return default

    @property
    def text(self) -> str:
        """The canonical text: the kind, then the keys that differ from their defaults."""
        row = KINDS[self.kind]
        given = [f"{k}={_fmt(v)}" for k, v in self.params if v != row[k][1]]
        return self.kind + (":" + ",".join(given) if given else "")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return repr(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    return str(v)


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> SyncSpec:
    kind, _, rest = text.partition(":")
    kind = kind.strip()
    if kind not in KINDS:
        raise ConfigError("sync", f"KIND[:key=value,...] with KIND one of {', '.join(KINDS)}",
                          text)
    row = KINDS[kind]
    values: dict[str, Any] = {}
    for item in (x.strip() for x in rest.split(",")) if rest.strip() else ():
        key, eq, val = item.partition("=")
        key, val = key.strip(), val.strip()
        if not eq or not key or not val:
            raise ConfigError("sync", "KIND[:key=value,...] (each option key=value)", text)
        if key not in row:
            keys = f"({', '.join(row)})" if row else "(it has none)"
            raise ConfigError("sync", f"a key of {kind} {keys}", key)
        if key in values:
            raise ConfigError("sync", "each key once", key)
        values[key] = row[key][0](key, val)
    return SyncSpec(kind, tuple((k, values.get(k, d)) for k, (_r, d) in row.items()))


def parse_sync(text: Any) -> SyncSpec:
    """The :class:`SyncSpec` of ``text`` (``KIND[:key=value,...]``; a SyncSpec is returned as is).

    Raises
    ------
    ConfigError
        Naming ``sync``: an unknown kind or key, a malformed option, a value
        its key refuses, a key given twice.
    """
    if isinstance(text, SyncSpec):
        return text
    if not isinstance(text, str):
        raise ConfigError("sync", "KIND[:key=value,...] text", text)
    return _parse(text)
