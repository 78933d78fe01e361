"""How the replicas synchronise: the ``--sync KIND[:key=value,...]`` grammar and its values.

``TrainingConfig.sync`` holds the canonical text (values only: the config's
hash is the same in every process); :func:`parse_sync` turns it into a frozen
:class:`SyncSpec` (or a subclass of it for a kind with options), refusing bad
input in one line. Kinds:

``allreduce``
    every step ends with the ring all-reduce of the gradients among the
    replicas of each stage that took part (today's behaviour).
``none``
    no synchronisation.
``diloco:every=H[,fragments=P][,order=sequential|strided][,overlap=TAU][,bits=B][,topk=F][,groups=M][,quorum=K][,grace=W][,layers=N]``
    DiLoCo across zones (:mod:`sim.training.outer`): the replicas of each
    stage are cut into ``M`` groups (default: one a pipeline); each group
    takes its inner steps as today (its own pipeline and data-parallel
    all-reduce) and every ``H`` inner steps the groups all-reduce their
    pseudo-gradients; see :class:`DilocoSync`.

Canonical text: the kind, then the options that differ from their defaults,
in the order above (``diloco:every=50,bits=4``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..analytic.diloco import ORDERS, PAYLOAD_BITS
from ..errors import ConfigError, check, check_choice, check_int, check_nonnegative

__all__ = ["SYNC_KINDS", "SyncSpec", "DilocoSync", "parse_sync"]

#: Sync kinds of ``--sync``.
SYNC_KINDS = ("allreduce", "none", "diloco")


@dataclass(frozen=True)
class SyncSpec:
    """A parsed ``sync`` value: its kind (options, for a kind with options, on a subclass)."""

    kind: str = "allreduce"

    @property
    def text(self) -> str:
        """The canonical spec text (what ``TrainingConfig.sync`` holds)."""
        return self.kind

    @property
    def is_diloco(self) -> bool:
        """Whether this is DiLoCo's outer loop (:class:`DilocoSync`)."""
        return False


@dataclass(frozen=True)
class DilocoSync(SyncSpec):
    """``diloco:every=H,...``: DiLoCo's outer loop across groups (values, validated).

    Attributes
    ----------
    every : int
        ``H``: inner steps between two syncs of the same fragment (>= 1).
    fragments : int
        ``P`` fragments of the model, one synchronised every ``H / P`` inner
        steps (a divisor of ``H``; 1: vanilla DiLoCo).
    order : {"sequential", "strided"}
        Fragment ``p`` holds consecutive layers or every ``P``-th layer
        (:func:`sim.analytic.diloco.fragment_sizes`).
    overlap : int
        ``TAU``: inner steps a fragment's sync runs beside before it is
        applied (``0 <= TAU < H``; 0: the groups wait for it).
    bits : int
        Payload precision, one of 32, 16, 8, 4 (at most ``value_bits``).
    topk : float or None
        Fraction of the values sent (with 32-bit indices, all-gathered).
    groups : int or None
        ``M`` groups (None: one a pipeline, ``M = r``).
    quorum : int or None
        ``K``: an outer step goes on once ``K`` groups of the round have
        reported and either all have or ``grace`` has passed since the ``K``-th
        (None: synchronous, wait for every group that is up).
    grace : float
        ``W`` (>= 0, time units), with ``quorum``.
    layers : int or None
        Layers of the model for the fragments (default ``lcm(L, P)``).
    """

    kind: str = "diloco"
    every: int = 1
    fragments: int = 1
    order: str = "sequential"
    overlap: int = 0
    bits: int = 16
    topk: float | None = None
    groups: int | None = None
    quorum: int | None = None
    grace: float = 0.0
    layers: int | None = None

    def __post_init__(self) -> None:
        H = check_int("every", self.every, low=1)
        P = check_int("fragments", self.fragments, low=1)
        check(H % P == 0, "fragments", f"a divisor of every ({H})", P)
        check_choice("order", self.order, ORDERS)
        check_int("overlap", self.overlap, low=0, high=H - 1)
        b = check_int("bits", self.bits)
        check(b in PAYLOAD_BITS, "bits", "one of " + ", ".join(map(str, PAYLOAD_BITS)), b)
        if self.topk is not None:
            check(isinstance(self.topk, (int, float)) and not isinstance(self.topk, bool)
                  and 0 < self.topk <= 1, "topk", "in (0, 1]", self.topk)
            object.__setattr__(self, "topk", float(self.topk))
        if self.groups is not None:
            check_int("groups", self.groups, low=1)
        if self.quorum is not None:
            check_int("quorum", self.quorum, low=1)
            if self.groups is not None:
                check(self.quorum <= self.groups, "quorum", f"at most groups ({self.groups})",
                      self.quorum)
        g = check_nonnegative("grace", self.grace)
        check(math.isfinite(g), "grace", "finite", self.grace)
        object.__setattr__(self, "grace", float(g))
        check(self.quorum is not None or g == 0.0, "grace", "0 without quorum", self.grace)
        if self.layers is not None:
            check_int("layers", self.layers, low=1)

    @property
    def is_diloco(self) -> bool:
        return True

    @property
    def text(self) -> str:
        parts = []
        for f in fields(self):
            if f.name == "kind":
                continue
            v = getattr(self, f.name)
            if f.name == "every" or v != f.default:
                parts.append(f"{f.name}={_fmt(v)}")
        return "diloco:" + ",".join(parts)


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


#: Options of each kind with options: key -> converter of its text.
_INT_KEYS = ("every", "fragments", "overlap", "bits", "groups", "quorum", "layers")
_FLOAT_KEYS = ("topk", "grace")


def _value(kind: str, key: str, text: str) -> Any:
    if key in _INT_KEYS:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(key, "an integer", text) from None
    if key in _FLOAT_KEYS:
        try:
            v = float(text)
        except ValueError:
            raise ConfigError(key, "a number", text) from None
        check(math.isfinite(v), key, "a finite number", text)
        return v
    return text


def parse_sync(value: Any) -> SyncSpec:
    """The :class:`SyncSpec` of a ``sync`` value (spec text, or a SyncSpec kept as it is).

    Raises
    ------
    ConfigError
        One line: an unknown kind, an option the kind does not have, a value
        that breaks its rule, a missing ``every``.
    """
    if isinstance(value, SyncSpec):
        return value
    check(isinstance(value, str) and value.strip() != "", "sync",
          "a kind (" + ", ".join(SYNC_KINDS) + ") with options KIND[:key=value,...]", value)
    text = value.strip()
    kind, _, rest = text.partition(":")
    kind = kind.strip()
    check_choice("sync", kind, SYNC_KINDS)
    if kind != "diloco":
        check(rest.strip() == "", "sync", f"{kind} without options", text)
        return SyncSpec(kind)
    keys = [f.name for f in fields(DilocoSync) if f.name != "kind"]
    opts: dict[str, Any] = {}
    for item in (x for x in rest.split(",") if x.strip()) if rest.strip() else ():
        key, eq, val = item.partition("=")
        key = key.strip()
        check(eq == "=" and key != "" and val.strip() != "", "sync",
              "diloco options as key=value", item)
        check(key in keys, "sync", "diloco options among " + ", ".join(keys), key)
        check(key not in opts, "sync", "each diloco option once", key)
        opts[key] = _value(kind, key, val.strip())
    check("every" in opts, "sync", "diloco with every=H (inner steps between outer syncs)", text)
    return DilocoSync(**opts)
