"""The strategy interface, formations, the registry, and the spec parser.

A fault-tolerance strategy is a frozen dataclass of parameters (a value: it
sits on :class:`~sim.training.TrainingConfig` and hashes with it). The
engine that runs a configuration asks it, never type-checks it:

``engine``
    ``"des"`` when the microbatch DES of :mod:`sim.training` runs it (SWARM's
    rewiring is per microbatch), ``"job"`` when the step-level job engine of
    :mod:`sim.training.strategies.job` does (checkpoint-restart, redundancy,
    reconfiguration: what a failure costs there is decided per step).
``check(config)``
    Refuse what the strategy cannot run (one ConfigError line).
``coordinate(job)``
    (job strategies) The job's coordinator, a generator over the job's
    primitives; ``lost``, ``joined`` and ``noticed`` are called by the job at
    each worker event and decide whether the coordinator is interrupted.

A user's subclass runs like the built-in ones: register it with
:func:`register_strategy` to name it in a spec.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ...errors import ConfigError, ascii_float, ascii_int, check
from ...units import RATE, TIME, Quantity, parse_quantity, spec_quantities, written_with_unit

__all__ = ["Strategy", "Formation", "STRATEGIES", "register_strategy", "make_strategy",
           "strategy_names", "strategy_quantities"]


@dataclass(frozen=True)
class Formation:
    """The workers a job runs on: pipelines of worker indices, and the spares.

    Attributes
    ----------
    pipelines : tuple of tuple of int
        ``pipelines[p]`` = the workers of pipeline ``p`` in stage order (one per
        node of the pipeline; a node may hold several of the config's stages).
    spares : tuple of int
        Ready workers the job holds but does not run on.
    held : int
        Workers the job holds (what a ``per="workers"`` table is looked up by).
    step_time : float
        A step's time in this formation, before any slowdown.
    """

    pipelines: tuple[tuple[int, ...], ...]
    spares: tuple[int, ...]
    held: int
    step_time: float

    @property
    def workers(self) -> tuple[int, ...]:
        """Every worker the formation runs on (pipeline-major)."""
        return tuple(w for p in self.pipelines for w in p)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Nodes per pipeline."""
        return tuple(len(p) for p in self.pipelines)


@dataclass(frozen=True)
class Strategy:
    """Base of every strategy (see the module docstring).

    Parameters
    ----------
    boot : float
        Time from a worker coming up to it being ready to join (instance
        start-up; both artifacts use 45 s). Added to the config's weight
        download time.
    """

    name: ClassVar[str] = "strategy"
    engine: ClassVar[str] = "job"
    #: the parameters that are times: in a spec text one may carry a unit (``boot=2min``),
    #: read in seconds (:func:`make_strategy`); a plain number is in the run's time units
    times: ClassVar[tuple[str, ...]] = ("boot",)
    #: the parameters that are rates: with a unit (``checkpoint_bandwidth=2GB/s``) read in
    #: bytes per second, as a plain number
    rates: ClassVar[tuple[str, ...]] = ()
    #: the options that do something only under a condition: option -> (field, value), the
    #: option acts only when ``field`` is ``value`` (a tuple of fields and one of values:
    #: when each is). Given where it does nothing (in a spec
    #: text, even at its default value, or off its default) it is refused in one line
    #: ``'option' must be unset unless field is value`` (:meth:`check_inert`, the one place
    #: this is checked); a third item, when present, is the rule a value off the default
    #: breaks instead (``copy``'s ``0 unless snapshot is overlapped``).
    only_when: ClassVar[dict[str, tuple[Any, ...]]] = {}
    boot: float = 0.0

    def __post_init__(self) -> None:
        from ...errors import check_nonnegative

        check_nonnegative("boot", self.boot)
        self.check_params()
        self.check_inert()

    def check_params(self) -> None:
        """Refuse a parameter value out of its range (raise ConfigError); a subclass's own
        checks, run by ``__post_init__`` after ``boot``'s and before :meth:`check_inert`."""

    def check_inert(self) -> None:
        """Refuse an option of :attr:`only_when` given where it does nothing (raise
        ConfigError): in the spec text it was made from (:func:`make_strategy`), even at its
        default value, or off its default value (a strategy made in Python)."""
        if not self.only_when:
            return
        defaults = {f.name: (f.default_factory() if f.default is dataclasses.MISSING
                             and f.default_factory is not dataclasses.MISSING else f.default)
                    for f in fields(self)}
        for key, (field, value, *off) in self.only_when.items():
            conds = tuple(zip(field, value, strict=True)) if isinstance(field, tuple) else ((field, value),)
            if all(getattr(self, f) == v for f, v in conds):
                continue
            words = " and ".join(f"{f} is " + ("true" if v is True else "false" if v is False
                                               else str(v)) for f, v in conds)
            moved = getattr(self, key) != defaults[key]
            check(not moved and not self.given(key), key,
                  off[0] if moved and off else f"unset unless {words}",
                  getattr(self, key))

    def check(self, config: Any) -> None:
        """Refuse a config the strategy cannot run (raise ConfigError)."""

    def check_last(self, config: Any) -> None:
        """Refuse, after every other check of ``config``, what needs its failure-free step time
        (a valid config to run it on) (raise ConfigError). Here: a strategy's ``notice`` (what
        it does with a preemption notice) given, or off its default, in a run without notices
        (``config.notice`` 0: the only source of one), where it did nothing."""
        if "notice" not in {f.name for f in fields(self)} or config.notice > 0:
            return
        default = next(f.default for f in fields(self) if f.name == "notice")
        check(not self.given("notice") and self.notice == default, "notice",
              "unset without a preemption notice (--preemption-notice: what the job does with "
              "one)", self.notice)

    def given(self, key: str) -> bool:
        """Whether parameter ``key`` was given in the spec text the strategy was made from
        (:func:`make_strategy`), even at its default value."""
        return key in getattr(self, "_given", ())

    def prepare_des(self, system: Any) -> None:
        """(DES strategies) Wire anything the strategy needs into a built, started
        :class:`~sim.training.TrainingSystem` before it runs (notices, say)."""

    def describe(self) -> str:
        """``name:key=value,...`` of every parameter that differs from its default."""
        defaults = type(self)()
        parts = [f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                 if getattr(self, f.name) != getattr(defaults, f.name)]
        return self.name + (":" + ",".join(parts) if parts else "")


#: Strategy name -> class.
STRATEGIES: dict[str, type[Strategy]] = {}


def register_strategy(cls: type[Strategy]) -> type[Strategy]:
    """Register a strategy class under its ``name`` (usable as a class decorator)."""
    STRATEGIES[cls.name] = cls
    return cls


#: The built-in strategies, in the order they are listed.
BUILT_IN = ("swarm", "checkpoint-restart", "redundancy", "reconfiguration")


def strategy_names() -> tuple[str, ...]:
    """The registered strategies' names (the built-in ones first)."""
    return tuple(sorted(STRATEGIES, key=lambda n: (BUILT_IN.index(n) if n in BUILT_IN
                                                   else len(BUILT_IN), n)))


def _value(field: Any, text: str, time: bool = False, rate: bool = False) -> Any:
    """Parse ``text`` for a dataclass field by its default's type; a ``time`` field's text
    may be a time with a unit (:mod:`sim.units`), in seconds, a ``rate`` field's a rate with
    a unit, in bytes per second."""
    default = field.default
    name = field.name
    low = text.strip().lower()
    if time and written_with_unit(text):
        return parse_quantity(text, TIME, name).value
    if rate and written_with_unit(text):
        return parse_quantity(text, RATE, name).value
    if isinstance(default, bool):
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(name, "true or false", text)
    if isinstance(default, int):
        try:
            return ascii_int(text)
        except ValueError:
            pass
        try:  # an integer written as 1e6 or 20.0
            x = ascii_float(text)
        except ValueError:
            x = math.nan
        if math.isfinite(x) and x == int(x):
            return int(x)
        raise ConfigError(name, "an integer", text)
    if default is None and low in ("none", "auto", ""):
        return None
    if default is None and "int" in str(field.type) and "float" not in str(field.type):
        try:
            return ascii_int(text)
        except ValueError:
            raise ConfigError(name, "an integer or none", text) from None
    if isinstance(default, float) or default is None:
        try:
            return ascii_float(text)
        except ValueError:
            if default is None:
                return text
            raise ConfigError(name, "a number", text) from None
    return text


def make_strategy(spec: Any) -> Strategy | None:
    """A strategy from a spec ``name[:key=value,...]``, a Strategy (as is), or None.

    Examples
    --------
    >>> make_strategy("checkpoint-restart:every=20,checkpoint=5").every
    20
    """
    if spec is None or isinstance(spec, Strategy):
        return spec
    check(isinstance(spec, str) and spec.strip() != "", "strategy",
          "a strategy name[:key=value,...] or a sim.training.strategies.Strategy", spec)
    name, _, rest = spec.strip().partition(":")
    check(name in STRATEGIES, "strategy", "one of " + ", ".join(strategy_names()), name)
    cls = STRATEGIES[name]
    known = {f.name: f for f in fields(cls)}
    kw: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, val = part.partition("=")
        key = key.strip().replace("-", "_")
        check(eq == "=" and key != "", "strategy", "key=value parameters", part)
        check(key in known, "strategy", f"a parameter of {name} ({', '.join(known)})", key)
        check(key not in kw, "strategy", "each parameter once", key)
        kw[key] = _value(known[key], val, key in cls.times, key in cls.rates)
    # the keys given are known while it is validated (Strategy.check_inert): an option given
    # where it does nothing is refused even at its default value; not a field: not in eq,
    # hash or describe
    strategy = cls.__new__(cls)
    object.__setattr__(strategy, "_given", frozenset(kw))
    strategy.__init__(**kw)  # type: ignore[misc]
    return strategy


def strategy_quantities(spec: Any) -> list[tuple[str, Quantity]]:
    """The parameters of a strategy spec text given with a unit, each with its
    :class:`~sim.units.Quantity` as written, in the text's order; none for a Strategy (values
    only). The spec is read by :func:`make_strategy` first (a bad one is refused there).

    A time with a unit is in seconds, right only where the run's time unit is the second
    (``dtsim train --hour 3600``, which refuses it otherwise, as ``--mtbf 2h``)."""
    if not isinstance(spec, str):
        return []
    cls = type(make_strategy(spec))
    return spec_quantities(spec, {**dict.fromkeys(cls.times, TIME),
                                  **dict.fromkeys(cls.rates, RATE)},
                           key=lambda k: k.replace("-", "_"))


def replace(strategy: Strategy, **changes: Any) -> Strategy:
    """``dataclasses.replace`` for a strategy (validates again)."""
    return dataclasses.replace(strategy, **changes)
