"""How the replicas synchronise: ``--sync KIND[:key=value,...]``.

:func:`parse_sync` reads the text (``TrainingConfig.sync`` holds its canonical
form, :attr:`SyncSpec.text`) into a frozen :class:`SyncSpec`. The grammar is a
kind, then optional ``key=value`` pairs after a colon, comma-separated; each
kind's keys, their readers and defaults are one row of :data:`KINDS`, and a
kind's rules between keys one entry of :data:`CHECKS`:

``allreduce``
    The ring all-reduce of each stage's gradients among its replicas at the
    end of a step (the default). Keys:

    * ``overlap``: ``none`` (default: the all-reduce starts once the step's
      backward passes are done) or ``backward`` (buckets released as the
      backward pass produces their gradients: PyTorch DDP's ``Reducer`` and
      Megatron-LM's ``overlap_grad_reduce``; see
      :func:`sim.training.traffic.gradient_buckets`);
    * ``bucket_size``: the bucket (> 0, in the units of ``param_size``,
      bytes for a plan, or a number and a size unit, ``25MiB``: bytes; default:
      the framework's, see :func:`~sim.training.traffic.gradient_buckets`);
    * ``buckets``: how an overlapped all-reduce cuts the gradients into
      buckets, ``ddp`` (PyTorch DDP's ``Reducer``) or ``megatron``
      (Megatron-LM's ``DistributedDataParallel``); default: ``megatron`` for a
      plan's run, ``ddp`` otherwise (a plan's framework sets it,
      :mod:`sim.profiles.frameworks`).
``none``
    No synchronisation (no keys).
``diloco``
    DiLoCo's outer loop across groups of pipelines (:mod:`sim.training.outer`;
    :class:`DilocoSync` is its typed view). Keys: ``every`` (``H``, required),
    ``fragments`` (``P``, a divisor of ``H``; 1), ``order``
    (``sequential``/``strided``), ``overlap`` (``TAU`` in ``[0, H)``; 0),
    ``bits`` (32, 16, 8, 4; 16), ``topk`` (a fraction in (0, 1]; unset),
    ``groups`` (``M``; one group a pipeline), ``quorum`` (``K <= groups``;
    unset: synchronous), ``grace`` (``W >= 0``, only with ``quorum``; 0; in the
    run's time units, or a number and a time unit, ``5min``: seconds),
    ``layers`` (for the fragments; ``lcm(L, P)``), and what a member lost during an
    outer all-reduce does (:mod:`sim.training.outer`): ``heartbeat`` (``> 0``: the time
    the survivors take to notice it, a time as ``grace``; unset: INTELLECT-1's 10 s),
    ``on_loss`` (``rerun``: the all-reduce again among the survivors, up to
    ``retries`` tries, ``>= 1``, 3; ``discard``: torchft's, the outer step is dropped);
    ``recovery``, what a group back from a failure fetches
    (:func:`sim.analytic.diloco.recovery_size`): ``prime`` (INTELLECT-1's live recovery:
    fp32 parameters, outer momentum and AdamW's moments; the default), ``torchft`` (its
    DiLoCo example's state dicts) or ``params`` (the parameters at ``value_bits`` alone).

A time or size with a unit (:data:`QUANTITIES`; :mod:`sim.units`) is converted
to seconds or bytes, and the canonical text holds that number (``grace=5min``
is ``grace=300``). The library reads it so whatever the config's ``hour``, as
it reads a ``network`` spec's latencies; ``dtsim train`` refuses a time with a
unit unless ``--hour`` is 3600 (the time unit a second), as for its other time
options (:func:`sync_quantities` lists what was given with a unit).

A key a kind does not have, a value its reader refuses, a key given twice or
a rule between keys broken is one line naming ``sync``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from ..analytic.diloco import ORDERS, PAYLOAD_BITS, RECOVERY
from ..errors import ConfigError, ascii_float, ascii_int
from ..units import SIZE, TIME, Quantity, parse_quantity, spec_quantities, written_with_unit

__all__ = ["KINDS", "CHECKS", "QUANTITIES", "OVERLAPS", "ON_LOSS", "BUCKET_RULES", "SyncSpec", "DilocoSync",
           "parse_sync", "sync_quantities"]

#: When the all-reduce starts: after the step's backward passes, or bucket by bucket during them.
OVERLAPS = ("none", "backward")
#: What the survivors of an outer all-reduce that lost a member do (:mod:`sim.training.outer`).
ON_LOSS = ("rerun", "discard")
#: How an overlapped all-reduce cuts the gradients (:func:`sim.training.traffic.gradient_buckets`).
BUCKET_RULES = ("ddp", "megatron")


def _choice(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def read(key: str, text: str) -> str:
        if text not in options:
            raise ConfigError("sync", f"{key} in ({', '.join(options)})", text)
        return text
    return read


def _integer(low: int) -> Callable[[str, str], int]:
    def read(key: str, text: str) -> int:
        try:
            x = ascii_int(text)
        except ValueError:
            raise ConfigError("sync", f"{key} an integer >= {low}", text) from None
        if x < low:
            raise ConfigError("sync", f"{key} an integer >= {low}", text)
        return x
    return read


def _bits(key: str, text: str) -> int:
    if text not in tuple(map(str, PAYLOAD_BITS)):
        raise ConfigError("sync", f"{key} in ({', '.join(map(str, PAYLOAD_BITS))})", text)
    return int(text)


def _fraction(key: str, text: str) -> float:
    try:
        x = ascii_float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and 0 < x <= 1):
        raise ConfigError("sync", f"{key} in (0, 1]", text)
    return x


def _positive(key: str, text: str) -> float:
    try:
        x = ascii_float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise ConfigError("sync", f"{key} > 0", text)
    return x


def _nonnegative(key: str, text: str) -> float:
    try:
        x = ascii_float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x >= 0):
        raise ConfigError("sync", f"{key} a finite number >= 0", text)
    return x


def _with_unit(kind: str, plain: Callable[[str, str], float]) -> Callable[[str, str], float]:
    """A reader of a plain number (``plain``, exactly as before units: a time in the run's
    time units, a size in the run's size units) or of a number and a unit of ``kind``
    (:func:`sim.units.parse_quantity`: seconds or bytes), which ``plain`` then checks."""
    def read(key: str, text: str) -> float:
        if not written_with_unit(text):  # a plain number, or no quantity at all: as before
            return plain(key, text)
        try:
            x = parse_quantity(text, kind, key).value
        except ConfigError as exc:
            raise ConfigError("sync", f"{key} {exc.rule}", text) from None
        try:
            return plain(key, repr(x))
        except ConfigError as exc:  # its rule, with the value as given (0GB for a bucket)
            raise ConfigError("sync", exc.rule, text) from None
    return read


#: kind -> its keys that take a quantity with a unit, and the quantity (:mod:`sim.units`): a
#: plain number means what it meant before (a time in the run's time units, a size in its
#: size units), a number with a unit is converted to seconds or bytes.
QUANTITIES: dict[str, dict[str, str]] = {"allreduce": {"bucket_size": SIZE},
                                         "diloco": {"grace": TIME, "heartbeat": TIME}}


#: kind -> key -> (reader of the value's text, default). A default of None: unset.
KINDS: dict[str, dict[str, tuple[Callable[[str, str], Any], Any]]] = {
    "allreduce": {"overlap": (_choice(OVERLAPS), "none"),
                  "bucket_size": (_with_unit(QUANTITIES["allreduce"]["bucket_size"], _positive),
                                  None),
                  "buckets": (_choice(BUCKET_RULES), None)},
    "none": {},
    "diloco": {
        "every": (_integer(1), None), "fragments": (_integer(1), 1),
        "order": (_choice(ORDERS), "sequential"), "overlap": (_integer(0), 0),
        "bits": (_bits, 16), "topk": (_fraction, None), "groups": (_integer(1), None),
        "quorum": (_integer(1), None),
        "grace": (_with_unit(QUANTITIES["diloco"]["grace"], _nonnegative), 0.0),
        "layers": (_integer(1), None),
        "heartbeat": (_with_unit(QUANTITIES["diloco"]["heartbeat"], _positive), None),
        "on_loss": (_choice(ON_LOSS), "rerun"), "retries": (_integer(1), 3),
        "recovery": (_choice(RECOVERY), "prime"),
    },
}


def _check_diloco(values: dict[str, Any], text: str) -> None:
    """DiLoCo's rules between keys (each one line naming ``sync``)."""
    H = values["every"]
    if H is None:
        raise ConfigError("sync", "diloco with every=H (inner steps between outer syncs)", text)
    if H % values["fragments"]:
        raise ConfigError("sync", f"fragments dividing every ({H})", values["fragments"])
    if values["overlap"] >= H:
        raise ConfigError("sync", f"overlap below every ({H})", values["overlap"])
    if values["fragments"] == 1:  # one fragment is the whole model, however it is cut
        for key, bad in (("order", values["order"] != "sequential"),
                         ("layers", values["layers"] is not None)):
            if bad:
                raise ConfigError("sync", f"{key} given only with fragments=P > 1 (it says how "
                                  "the model is cut into fragments)", text)
    q, g = values["quorum"], values["groups"]
    if q is not None and g is not None and q > g:
        raise ConfigError("sync", f"quorum at most groups ({g})", q)
    if q is None and values["grace"] != 0:  # shown as written (5min, not its 300 s)
        raise ConfigError("sync", "grace 0 without quorum", _as_written(text, "grace"))
    if values["on_loss"] == "discard" and values["retries"] != 3:
        raise ConfigError("sync", "retries only with on_loss=rerun (a discarded outer step is "
                          "not tried again)", values["retries"])


def _as_written(text: str, key: str) -> str:
    """The value of ``key`` as the spec text gives it, for a refusal to show what was typed
    (as :func:`_with_unit`'s do: ``grace=5min``, not the 300 s it is read as)."""
    for item in text.partition(":")[2].split(","):
        k, _, v = item.partition("=")
        if k.strip() == key:
            return v.strip()
    return key


def _check_allreduce(values: dict[str, Any], text: str) -> None:
    """The all-reduce's rule between keys: a bucket rule only for an overlapped all-reduce."""
    if values["buckets"] is not None and values["overlap"] != "backward":
        raise ConfigError("sync", "without buckets unless overlap=backward (the rule that cuts "
                          "an overlapped all-reduce's buckets)", text)


#: kind -> its rules between keys, given the values (defaults filled) and the text.
CHECKS: dict[str, Callable[[dict[str, Any], str], None]] = {"allreduce": _check_allreduce,
                                                             "diloco": _check_diloco}


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


@dataclass(frozen=True)
class DilocoSync:
    """The typed view of a ``diloco`` :class:`SyncSpec` (see :data:`KINDS` for the keys)."""

    every: int
    fragments: int = 1
    order: str = "sequential"
    overlap: int = 0
    bits: int = 16
    topk: float | None = None
    groups: int | None = None
    quorum: int | None = None
    grace: float = 0.0
    layers: int | None = None
    heartbeat: float | None = None
    on_loss: str = "rerun"
    retries: int = 3
    recovery: str = "prime"

    @classmethod
    def of(cls, spec: SyncSpec | str) -> DilocoSync:
        """The view of ``spec`` (a SyncSpec or its text) of kind ``diloco``."""
        spec = parse_sync(spec)
        if spec.kind != "diloco":
            raise ConfigError("sync", "diloco:every=H,... here", spec.text)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in spec.params if k in names})

    @property
    def text(self) -> str:
        """The canonical text of the spec this view shows."""
        return parse_sync("diloco:" + ",".join(
            f"{f.name}={_fmt(getattr(self, f.name))}" for f in fields(self)
            if getattr(self, f.name) is not None)).text


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
    full = {k: values.get(k, d) for k, (_r, d) in row.items()}
    check = CHECKS.get(kind)
    if check is not None:
        check(full, text)
    return SyncSpec(kind, tuple(full.items()))


def parse_sync(text: Any) -> SyncSpec:
    """The :class:`SyncSpec` of ``text`` (``KIND[:key=value,...]``; a SyncSpec is returned as is).

    Raises
    ------
    ConfigError
        Naming ``sync``: an unknown kind or key, a malformed option, a value
        its key refuses, a key given twice, a rule between keys broken.
    """
    if isinstance(text, SyncSpec):
        return text
    if not isinstance(text, str):
        raise ConfigError("sync", "KIND[:key=value,...] text", text)
    return _parse(text)


def sync_quantities(text: Any) -> list[tuple[str, Quantity]]:
    """The keys of a sync text given with a unit, each with its :class:`~sim.units.Quantity`
    (as written), in the text's order; none for a :class:`SyncSpec` (values only). The text
    is read by :func:`parse_sync` first (a bad one is refused there).

    What a caller needs it for: a time with a unit is in seconds, right only when the run's
    time unit is the second (``dtsim train --hour 3600``; the CLI refuses it otherwise, as it
    refuses ``--mtbf 2h``); the library reads it in seconds, as a ``network`` spec's.
    """
    if isinstance(text, SyncSpec):
        return []
    spec = parse_sync(text)
    return spec_quantities(text, QUANTITIES.get(spec.kind, {}))
