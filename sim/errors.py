"""Errors raised on bad input.

Every validation failure is a :class:`ConfigError` whose message follows one
template, ``'<name>' must be <rule>: <value>``, so that the CLI can print it as
a single line and exit with status 2 (the attrs ``validators`` convention).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

__all__ = [
    "ConfigError",
    "SimulationError",
    "check",
    "check_probability",
    "check_positive",
    "check_nonnegative",
    "check_int",
    "check_choice",
]


class ConfigError(ValueError):
    """A configuration value broke a rule; the message is one line."""

    def __init__(self, name: str, rule: str, value: Any) -> None:
        self.name = name
        self.rule = rule
        self.value = value
        super().__init__(f"'{name}' must be {rule}: {value!r}")

    def __reduce__(self):  # picklable across process pools and Dask workers
        return (type(self), (self.name, self.rule, self.value))


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
    try:
        return not isinstance(value, bool) and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def check_probability(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> float:
    """Check that ``value`` lies in [0, 1] (optionally open at either end)."""
    lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
    rule = f"in {lo}0, 1{hi}"
    check(_is_real(value), name, rule, value)
    v = float(value)
    check((v > 0 if open_low else v >= 0) and (v < 1 if open_high else v <= 1), name, rule, value)
    return v


def check_positive(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Check that ``value`` is a real number > 0."""
    ok = _is_real(value) or (allow_inf and value == math.inf)
    check(ok and float(value) > 0, name, "> 0", value)
    return float(value)


def check_nonnegative(name: str, value: Any, *, allow_inf: bool = False) -> float:
    """Check that ``value`` is a real number >= 0."""
    ok = _is_real(value) or (allow_inf and value == math.inf)
    check(ok and float(value) >= 0, name, ">= 0", value)
    return float(value)


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


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    """Check that ``value`` is one of ``choices``."""
    options = list(choices)
    check(value in options, name, "one of " + ", ".join(options), value)
    return str(value)
