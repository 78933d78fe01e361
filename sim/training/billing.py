"""What a worker is billed for, and the price over time.

A worker is billed while its instance exists: a spot slot is not billed
while it waits for its replacement, and a worker replaying a preemption
trace is not billed while the trace has it down (the instance is gone, not
broken). A worker down under the availability model (a crash, a domain
outage) is still a rented machine and stays billed. :class:`Clock` measures
the time a worker spends in a state, and the price paid over it when the
price follows a :class:`PriceSeries` (a spot price that changes over time)
instead of a flat price per worker-hour.
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import progress
from ..errors import ConfigError, ascii_float, check, check_memory, read_csv_text

__all__ = ["PriceSeries", "read_price_series", "Clock", "Presence"]


@dataclass(frozen=True)
class PriceSeries:
    """A price per worker-hour that changes over simulated time (values only).

    Parameters
    ----------
    times : tuple of float
        Increasing times from 0 (the first is 0): ``prices[i]`` holds from
        ``times[i]`` to ``times[i+1]``, the last one for ever after.
    prices : tuple of float
        Prices per worker-hour (>= 0).
    """

    times: tuple[float, ...]
    prices: tuple[float, ...]

    def __post_init__(self) -> None:
        t = tuple(float(x) for x in self.times)
        p = tuple(float(x) for x in self.prices)
        check(len(t) == len(p) and len(t) >= 1, "price_series",
              "as many prices as times, at least one", (len(t), len(p)))
        check(t[0] == 0.0, "price_series", "a series starting at time 0", t[0])
        for a, b in zip(t, t[1:], strict=False):
            check(math.isfinite(b) and b > a, "price_series", "strictly increasing finite times",
                  b)
        for x in p:
            check(math.isfinite(x) and x >= 0, "price_series", "prices >= 0", x)
        object.__setattr__(self, "times", t)
        object.__setattr__(self, "prices", p)
        cum = [0.0]
        for i in range(1, len(t)):
            cum.append(cum[-1] + p[i - 1] * (t[i] - t[i - 1]))
        object.__setattr__(self, "_cum", tuple(cum))

    def price_at(self, t: float) -> float:
        """The price per worker-hour in force at time ``t``."""
        return self.prices[max(bisect.bisect_right(self.times, t) - 1, 0)]

    def integral(self, t: float) -> float:
        """``int_0^t price(s) ds`` (price x time units; divide by the hour for dollars)."""
        i = max(bisect.bisect_right(self.times, t) - 1, 0)
        return self._cum[i] + self.prices[i] * (t - self.times[i])  # type: ignore[attr-defined]

    def mean(self, a: float, b: float) -> float:
        """Mean price over ``[a, b]``."""
        return (self.integral(b) - self.integral(a)) / (b - a) if b > a else self.price_at(a)


def read_price_series(path: str | Path) -> PriceSeries:
    """Read a CSV of ``time,price`` rows (a header naming both columns).

    Times are in the run's time units from its start (the first must be 0);
    prices are per worker-hour, each holding until the next time.

    Raises
    ------
    ConfigError
        Naming ``price_series`` for a missing, unreadable or malformed file.
    """
    from .strategies.steptime import BYTES_PER_CSV_ROW, PROGRESS_ROWS

    text = read_csv_text("price_series", path)
    rows_in = text.count("\n")
    check_memory("price_series", str(path), rows_in * BYTES_PER_CSV_ROW)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    cols = set(reader.fieldnames or [])
    check({"time", "price"} <= cols, "price_series", "a CSV file with columns time,price",
          f"{path} (columns: {sorted(cols)})")
    times, prices = [], []
    with progress.bar(rows_in if rows_in >= PROGRESS_ROWS else 0, "price series",
                      unit="row") as bar:
        for lineno, row in enumerate(reader, start=2):
            try:
                times.append(ascii_float(row["time"]))
                prices.append(ascii_float(row["price"]))
            except (TypeError, ValueError):
                raise ConfigError("price_series", "a CSV file of numeric time,price",
                                  f"{path}:{lineno}") from None
            if lineno % 10_000 == 0:
                bar.update(10_000)
    check(bool(times), "price_series", "a CSV file with at least one row", str(path))
    try:
        return PriceSeries(tuple(times), tuple(prices))
    except ConfigError as exc:
        raise ConfigError("price_series", exc.rule, f"{path} ({exc.value})") from None


class Clock:
    """Time spent in one state (on/off), and the price integral over it, from events.

    Parameters
    ----------
    env : simpy.Environment
    on : bool
        The state at the current time.
    series : PriceSeries, optional
        Accumulate ``int price`` over the on-time as well.
    """

    __slots__ = ("env", "on", "series", "_since", "_total", "_priced")

    def __init__(self, env: Any, on: bool, series: PriceSeries | None = None) -> None:
        self.env, self.on, self.series = env, bool(on), series
        self._since = env.now
        self._total = 0.0
        self._priced = 0.0

    def set(self, on: bool) -> None:
        """The state is ``on`` from now on."""
        on = bool(on)
        if on == self.on:
            return
        now = self.env.now
        if self.on:
            self._close(now)
        self.on, self._since = on, now

    def _close(self, now: float) -> None:
        self._total += now - self._since
        if self.series is not None:
            self._priced += self.series.integral(now) - self.series.integral(self._since)

    def total(self, now: float) -> float:
        """Time on up to ``now``."""
        return self._total + (now - self._since if self.on else 0.0)

    def priced(self, now: float) -> float:
        """``int price`` over the on-time up to ``now`` (0 without a series)."""
        if self.series is None:
            return 0.0
        extra = (self.series.integral(now) - self.series.integral(self._since)) if self.on else 0.0
        return self._priced + extra


class Presence:
    """One worker's instance: up by its own state, present (its spot slot filled).

    ``bill`` (billed while present, and while up too when the worker replays a
    trace) and ``avail`` (up and present) are :class:`Clock` s, each None when
    not asked for.
    """

    __slots__ = ("own_up", "present", "trace_billed", "bill", "avail")

    def __init__(self, env: Any, own_up: bool, *, trace_billed: bool, bill: bool, avail: bool,
                 series: PriceSeries | None = None) -> None:
        self.own_up, self.present, self.trace_billed = bool(own_up), True, trace_billed
        self.bill = Clock(env, self._billed(), series) if bill else None
        self.avail = Clock(env, self.own_up) if avail else None

    def _billed(self) -> bool:
        return self.present and (self.own_up or not self.trace_billed)

    def own(self, _comp: Any, up: bool, _now: float) -> None:
        """The failure model's own-state callback."""
        self.own_up = up
        self._update()

    def spot(self, present: bool) -> None:
        """The spot slot's listener: preempted (False) or replaced (True)."""
        self.present = present
        self._update()

    def _update(self) -> None:
        if self.bill is not None:
            self.bill.set(self._billed())
        if self.avail is not None:
            self.avail.set(self.present and self.own_up)
