"""The last word of an instant: actions that run once every other event of their instant is done.

SimPy processes the events of one time in the order they were scheduled, so an
action scheduled at ``t`` (a timeout's callback) runs before the events other
processes schedule at ``t`` later, and can even run between a chain of
zero-delay events. Two actions of the DES are meant to close their instant:

* a quorum's grace window (:meth:`sim.training.outer.OuterLoop._grace_end`): a
  report or a failure at the window's very end is inside it;
* the end of a run bounded by ``max_time`` (or a replayed trace's duration):
  ``--max-time T`` simulates up to and including ``T``, so a step, an outer
  sync or a failure at exactly ``T`` happens before the run stops (the learners
  engine's rule, :mod:`sim.training.learners`).

A failure at ``t`` is itself scheduled behind the other events of ``t``
(:data:`sim.failures.LATE`), and these actions go behind it: a failure at the
window's end is inside the window, a failure at ``T`` happens before the run
stops.

:class:`InstantEnd` runs such actions: while an event of the current time is
still queued it goes behind it (one marker event at a time, so two actions of
one instant cannot keep stepping behind each other), then runs the waiting
actions one at a time, by their ``order`` (the grace window's outer step before
the run's end), letting what each one schedules at that time happen first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..failures import LATE

#: ``order`` of the actions of one instant: lower first.
GRACE, STOP = 0, 1


class InstantEnd:
    """Run actions after every other event of their instant (see the module)."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self._waiting: list[tuple[int, int, Callable[[], None]]] = []
        self._marked = False  # a marker event is queued at the current time
        self._seq = 0

    def at_end(self, fn: Callable[[], None], order: int) -> None:
        """Call ``fn()`` once every other event of the current time is done."""
        self._seq += 1
        self._waiting.append((order, self._seq, fn))
        if not self._marked:
            self._settle(None)

    def after(self, delay: float, fn: Callable[[], None], order: int) -> None:
        """Call ``fn()`` at ``now + delay``, once every other event of that time is done."""
        ev = self.env.timeout(delay)
        ev.callbacks.append(lambda _e: self.at_end(fn, order))

    def _settle(self, _e: Any) -> None:
        self._marked = False
        env = self.env
        while self._waiting:
            if env.peek() == env.now:  # more at this instant: go behind it
                self._marked = True
                ev = env.event()
                ev.callbacks.append(self._settle)
                ev._ok, ev._value = True, None
                # at the failures' priority: behind a failure of this instant too
                env.schedule(ev, LATE)
                return
            self._waiting.sort()
            _o, _s, fn = self._waiting.pop(0)
            fn()

    def stop_at(self, t: float) -> Any:
        """An event triggered at time ``t`` once every other event of ``t`` is done (the
        end of a run bounded by ``t``, inclusive)."""
        done = self.env.event()
        self.after(t - self.env.now, lambda: done.succeed() if not done.triggered else None,
                   STOP)
        return done
