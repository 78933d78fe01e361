"""Refusing options that have no effect (never silently ignored).

:func:`sim.cli.main` records which options were typed (``args._given``); a
command asks :func:`refuse_unless` whether an option it is about to ignore
was given, and refuses it naming the option it needs.
"""

from __future__ import annotations

import argparse
import math

from ..errors import ConfigError

__all__ = ["given", "refuse_unless", "verdict"]


def given(args: argparse.Namespace, dest: str) -> bool:
    """True when option ``dest`` was typed on the command line.

    A namespace built by hand (not by :func:`sim.cli.main`) records nothing,
    so no option counts as given.
    """
    return dest in (getattr(args, "_given", None) or ())


def refuse_unless(args: argparse.Namespace, dest: str, applies: bool, needs: str) -> None:
    """Refuse option ``dest`` when it was given but has no effect.

    Parameters
    ----------
    args : argparse.Namespace
    dest : str
        The option's destination (``show_placement`` for ``--show-placement``).
    applies : bool
        Whether the option has an effect with the other options.
    needs : str
        What it needs, e.g. ``"with --topology"``; the rule reads
        ``given only <needs>``.

    Raises
    ------
    ConfigError
        ``'<dest>' must be given only <needs>: <value>``.
    """
    if not applies and given(args, dest):
        typed = (getattr(args, "_quantities", None) or {}).get(dest) or ()
        if any(q.unit is not None for q in typed):  # a quantity with a unit: as typed
            from ._units import typed_text

            raise ConfigError(dest, f"given only {needs}", typed_text(typed))
        raise ConfigError(dest, f"given only {needs}", getattr(args, dest, None))


def verdict(low: float, high: float, inside: bool) -> str:
    """``yes`` / ``NO``, or ``no interval`` when the interval is not finite (one replication)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "no interval"
    return "yes" if inside else "NO"
