"""Engines and references: which simulator or closed form answers a config, and why.

An :class:`Engine` simulates one replication of a model family (``"pipeline"``,
``"gossip"``, ``"training"``, ...). A :class:`Reference` is an exact answer (a
closed form or an exact recursion) for some of that family's metrics. Each says
for which configs it applies, with a one-line reason either way, and which
metrics it reports. One function, :func:`select`, picks the engine for
``--engine auto`` (the first that applies, in order of speed), explains a
refusal of an explicitly named engine, and lists the candidates for help texts;
:func:`predictions` gathers every applicable reference's values and leaves the
others null with the reason. The CLI, the public model functions, the reports'
"agrees" column and the metrics left empty all ask these two functions, so the
rule is written once.

Engines and references register themselves at import of their module
(:func:`register`); a user's own engine registers the same way and is then
chosen like a built-in one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = [
    "Applies",
    "Engine",
    "Reference",
    "Selection",
    "register",
    "engines",
    "references",
    "engine_names",
    "select",
    "predictions",
]


@dataclass(frozen=True)
class Applies:
    """Whether an engine or reference answers a config, and why (one line)."""

    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok


class Engine:
    """A simulator of one model family.

    Subclasses set ``name``, ``family``, ``speed`` (lower runs first under
    ``auto``) and ``metrics`` (the metric names :meth:`run` returns; the family's
    other metrics are reported as null), and implement :meth:`applies` and
    :meth:`run`. ``auto = False`` keeps an engine out of ``--engine auto``: it
    runs only when named (for an engine whose numbers, though of the same law,
    would silently replace the ones a seed gave before).

    A family may also ask an engine whether it accepts the strategy objects
    a run is given (``accepts(config, **strategies)``, for example the gossip
    family's :func:`sim.gossip.engines.select_engine`); :func:`select` itself
    answers from the config alone.
    """

    name: str = ""
    family: str = ""
    speed: int = 100
    metrics: tuple[str, ...] = ()
    auto: bool = True
    #: Whether :meth:`run` takes ``recorder=`` (a :class:`sim.timeline.Recorder`) and records
    #: the run's events (``--timeline``).
    records: bool = False

    def applies(self, config: Any) -> Applies:  # pragma: no cover - interface
        """Whether this engine answers ``config`` exactly as the reference model would."""
        raise NotImplementedError

    def run(self, config: Any, streams: Any) -> dict[str, Any]:  # pragma: no cover
        """One replication: flat metrics from the named streams ``streams``."""
        raise NotImplementedError

    def auto_for(self, config: Any) -> bool:
        """Whether ``--engine auto`` may pick this engine for ``config`` (default :attr:`auto`).

        An engine that reproduces the reference engine's numbers bit for bit on
        some configs only says so here.
        """
        return self.auto

    def __repr__(self) -> str:
        return f"<{self.family} engine {self.name!r}>"


class Reference:
    """An exact answer (closed form or exact recursion) for some metrics of a family."""

    name: str = ""
    family: str = ""
    metrics: tuple[str, ...] = ()

    def applies(self, config: Any) -> Applies:  # pragma: no cover - interface
        """Whether the reference is exact for ``config``."""
        raise NotImplementedError

    def predict(self, config: Any) -> dict[str, Any]:  # pragma: no cover - interface
        """The exact value of each metric in :attr:`metrics` for ``config``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.family} reference {self.name!r}>"


_ENGINES: dict[str, dict[str, Engine]] = {}
_REFERENCES: dict[str, dict[str, Reference]] = {}


def register(obj: Engine | Reference) -> Engine | Reference:
    """Register an engine or a reference under its family and name (replaces a namesake)."""
    if not obj.name or not obj.family:
        raise ValueError(f"{obj!r} needs a name and a family")
    table = _ENGINES if isinstance(obj, Engine) else _REFERENCES
    table.setdefault(obj.family, {})[obj.name] = obj
    return obj


def engines(family: str) -> list[Engine]:
    """The engines of ``family``, fastest first."""
    return sorted(_ENGINES.get(family, {}).values(), key=lambda e: (e.speed, e.name))


def references(family: str) -> list[Reference]:
    """The references of ``family``, in registration order."""
    return list(_REFERENCES.get(family, {}).values())


def engine_names(family: str) -> tuple[str, ...]:
    """``("auto", <engines fastest first>)``: the one vocabulary of ``--engine``."""
    return ("auto", *(e.name for e in engines(family)))


@dataclass(frozen=True)
class Selection:
    """The engine chosen for a config, why, and what was considered."""

    engine: Engine
    reason: str
    considered: tuple[tuple[str, bool, str], ...] = field(default=())

    @property
    def name(self) -> str:
        """The chosen engine's name."""
        return self.engine.name


def select(family: str, config: Any, engine: str = "auto") -> Selection:
    """The engine that runs ``config``: the named one, or the fastest that applies.

    Parameters
    ----------
    family : str
    config : a frozen config of that family
    engine : str
        ``"auto"`` or the name of a registered engine.

    Returns
    -------
    Selection

    Raises
    ------
    ConfigError
        For an unknown name, a named engine that does not apply (the message
        gives its reason and the engines that would), or no engine at all.
    """
    names = engine_names(family)
    if engine not in names:
        raise ConfigError("engine", "one of " + ", ".join(names), engine)
    considered = []
    for e in engines(family):
        verdict = e.applies(config)
        considered.append((e.name, verdict.ok, verdict.reason))
        if engine == e.name:
            if not verdict.ok:
                fit = [n for n, ok, _ in considered if ok] or [
                    x.name for x in engines(family) if x.name != e.name and x.applies(config)]
                hint = f"; use {' or '.join(fit)}" if fit else ""
                raise ConfigError("engine", f"an engine that answers this config "
                                  f"({e.name}: {verdict.reason}{hint})", engine)
            return Selection(e, "requested: " + verdict.reason, tuple(considered))
        if engine == "auto" and verdict.ok and e.auto_for(config):
            return Selection(e, "auto: " + verdict.reason, tuple(considered))
    raise ConfigError("engine", "an engine that answers this config ("
                      + "; ".join(f"{n}: {r}" for n, _, r in considered) + ")", engine)


def predictions(family: str, config: Any, metrics: Iterable[str] | None = None
                ) -> dict[str, dict[str, Any]]:
    """Exact values for ``config``, metric by metric, with their source or why not.

    Returns
    -------
    dict
        ``{metric: {"value": float | None, "reference": name | None, "note": str}}``
        for every metric some reference of ``family`` covers (or for ``metrics``).
        A metric covered by several applicable references takes the first.
    """
    out: dict[str, dict[str, Any]] = {}
    wanted = None if metrics is None else set(metrics)
    for ref in references(family):
        verdict = ref.applies(config)
        values: Mapping[str, Any] = ref.predict(config) if verdict.ok else {}
        for m in ref.metrics:
            if wanted is not None and m not in wanted:
                continue
            if m in out and out[m]["value"] is not None:
                continue
            if verdict.ok:
                out[m] = {"value": values.get(m), "reference": ref.name, "note": verdict.reason}
            else:
                out[m] = {"value": None, "reference": None, "note": f"{ref.name}: {verdict.reason}"}
    for m in wanted or ():
        out.setdefault(m, {"value": None, "reference": None, "note": "no exact reference"})
    return out
