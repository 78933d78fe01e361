"""Progress bars with an ETA for long work: the one on/off rule and the in-replication hook.

:func:`sim.runner.sweep` and :func:`sim.runner.replicate` draw a tqdm bar
over their tasks. A bar is shown when asked (``progress=True``), never when
asked not to (``progress=False``) or inside :func:`quiet` (what the
CLI's ``--quiet`` does), and otherwise only when stderr is a terminal (:func:`wanted`).

Tasks run in this process (the serial executor, the CLI's default) also move
the bar *within* a replication: engines call :func:`report` with the fraction
of the replication done (the gossip records at each record step, the pipeline
DES every few hundred microbatches), so one long replication shows its ETA
too. With no bar nothing is called but one context-variable lookup per
report; a report never touches a random stream or a simulated value, so it
changes no number.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["wanted", "quiet", "report", "begin", "tracking", "bar"]

_ENABLED: ContextVar[bool | None] = ContextVar("dtsim_progress_enabled", default=None)
_HOOK: ContextVar[Any] = ContextVar("dtsim_progress_hook", default=None)


def wanted(show: bool | None = None) -> bool:
    """Whether to draw a bar.

    Parameters
    ----------
    show : bool or None
        True or False decide; None: not inside :func:`quiet`, else only when
        stderr is a terminal.
    """
    if show is not None:
        return bool(show)
    if _ENABLED.get() is False:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stderr
        return False


@contextmanager
def quiet() -> Iterator[None]:
    """No bar (unless one is asked for explicitly) inside the block."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def report(fraction: float) -> None:
    """The fraction (0 to 1) of the current replication done; a no-op without a bar."""
    hook = _HOOK.get()
    if hook is not None:
        hook.advance(fraction)


def begin() -> None:
    """A new replication starts (called by the task runner)."""
    hook = _HOOK.get()
    if hook is not None:
        hook.begin()


class _Partial:
    """Moves a tqdm bar by the fraction done of the replication running now."""

    def __init__(self, bar: Any) -> None:
        self.bar = bar
        self.shown = 0.0  # bar units drawn for replications not yet accepted
        self.current = 0.0  # fraction of the running replication drawn

    def begin(self) -> None:
        self.current = 0.0

    def advance(self, fraction: float) -> None:
        f = min(max(float(fraction), 0.0), 1.0)
        if f > self.current:
            self.bar.update(f - self.current)
            self.shown += f - self.current
            self.current = f

    def settle(self, finished: int) -> None:
        """``finished`` replications were accepted: the bar counts them whole."""
        self.bar.update(finished - self.shown)
        self.shown = self.current = 0.0


@contextmanager
def tracking(bar: Any) -> Iterator[_Partial | None]:
    """Let :func:`report` move ``bar`` (None for no bar); yields the tracker (``settle`` it)."""
    if bar is None:
        yield None
        return
    part = _Partial(bar)
    token = _HOOK.set(part)
    try:
        yield part
    finally:
        _HOOK.reset(token)


class _Off:
    """A bar that is not shown (tqdm is not even imported)."""

    def update(self, n: float = 1) -> None:  # noqa: D102
        pass


@contextmanager
def bar(total: float, desc: str, *, unit: str = "it", show: bool | None = None) -> Iterator[Any]:
    """A progress bar with an ETA over ``total`` units of one long computation.

    For work that runs outside :func:`sim.runner.replicate` (a search, a long
    table): shown under the same rule as every bar (:func:`wanted`: a terminal,
    not ``--quiet``), else an object whose ``update`` does nothing. The caller
    calls ``update(n)`` as units finish; the bar is removed when the block ends.
    """
    if not wanted(show) or not total > 0:
        yield _Off()
        return
    from tqdm import tqdm

    b = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
             leave=False)
    try:
        yield b
    finally:
        b.close()
