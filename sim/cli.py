"""The ``dtsim`` command line.

Each subcommand lives in its own module under :mod:`sim.commands` and defines
``NAME`` (the subcommand), ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. The CLI parses, lets the library validate, and turns any
:class:`~sim.errors.ConfigError` into one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from . import commands, progress
from .errors import ConfigError, SimulationError, ascii_float, ascii_int, one_line

__all__ = ["main", "build_parser", "main_for"]


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line (no usage dump) and exit 2, and ``type=int`` and
    ``type=float`` read ASCII only (:func:`sim.errors.ascii_int`, :func:`sim.errors.ascii_float`;
    their refusals still say ``int`` and ``float``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("type", int, ascii_int)
        self.register("type", float, ascii_float)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _command_names() -> list[str]:
    """The subcommand modules' names (a module's ``NAME`` is its file name), not imported."""
    return sorted(i.name for i in pkgutil.iter_modules(commands.__path__)
                  if not i.name.startswith("_"))


def _command_modules(only: str | None = None) -> list[ModuleType]:
    names = _command_names()
    if only in names:  # one command: import what it needs, not every command's libraries
        names = [only]
    return [importlib.import_module(f"{commands.__name__}.{n}") for n in names]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered (or only ``command``).

    Parameters
    ----------
    command : str, optional
        Register only this subcommand (when it is one): ``dtsim COMMAND ...``
        then imports only that command's module, so a refusal comes after an
        import of what it needs, not of every command's libraries.
    """
    parser = _Parser(
        prog="dtsim",
        description="Discrete-event simulator of decentralised training on unreliable workers.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"dtsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for mod in _command_modules(command):
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> frozenset[str]:
    """The destinations of the options ``argv`` sets explicitly (defaults left out).

    ``argv`` starts with the subcommand. The subcommand's arguments are parsed
    a second time with every default suppressed, so what remains was typed;
    a command uses it to refuse an option that has no effect (see
    :func:`sim.commands._applies.refuse_unless`).
    """
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not argv or not subs or argv[0] not in subs[0].choices:
        return frozenset()
    sub = subs[0].choices[argv[0]]
    saved = [(a, a.default) for a in sub._actions]
    saved_defaults = dict(sub._defaults)
    try:
        for a in sub._actions:
            a.default = argparse.SUPPRESS
        sub._defaults.clear()
        ns = sub.parse_args(list(argv[1:]))
    finally:
        for a, d in saved:
            a.default = d
        sub._defaults.update(saved_defaults)
    return frozenset(vars(ns))


def repeated_options(parser: argparse.ArgumentParser,
                     argv: Sequence[str]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The options ``argv`` types twice or more with different values: ``(dest, option,
    values)`` each (audit 7: argparse keeps the last, so ``--stages 2 --stages 3`` ran 3 and
    the 2 was silently ignored). A repeatable option (``action="append"``, ``--price``) is
    not one; a flag or a value typed twice alike loses nothing and is not one either.

    ``argv`` starts with the subcommand; a token ``--name`` or ``--name=value`` is matched
    as argparse does (whole, or a unique prefix); ``--`` ends the options."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not argv or not subs or argv[0] not in subs[0].choices:
        return ()
    sub = subs[0].choices[argv[0]]
    strings = {o: a for o, a in sub._option_string_actions.items() if o.startswith("--")}
    seen: dict[str, tuple[argparse.Action, str, list[str]]] = {}
    rest = list(argv[1:])
    i = 0
    while i < len(rest):
        tok = rest[i]
        i += 1
        if tok == "--":
            break
        if not tok.startswith("--"):
            continue
        name, eq, value = tok.partition("=")
        action = strings.get(name)
        if action is None:
            hits = {a for o, a in strings.items() if o.startswith(name)}
            action = hits.pop() if len(hits) == 1 else None
        if action is None or isinstance(action, (argparse._AppendAction,
                                                 argparse._CountAction)):
            continue
        if action.nargs == 0:
            value = ""
        elif action.nargs is None:
            if not eq and i < len(rest):
                value = rest[i]
                i += 1
        else:  # an optional or multi-valued option: not compared
            continue
        seen.setdefault(action.dest, (action, name, []))[2].append(value)
    return tuple((dest, a.option_strings[-1], tuple(v)) for dest, (a, _, v) in seen.items()
                 if len(set(v)) > 1)


def refuse_repeated(args: argparse.Namespace) -> None:
    """Refuse an option typed twice with different values (the first was silently ignored)."""
    for dest, option, values in getattr(args, "_repeated", ()):
        raise ConfigError(dest, f"given once ({option} typed {len(values)} times: only the last "
                          "would count)", ", ".join(values))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dtsim`` and ``python -m sim``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:  # the command's imports can take seconds on a loaded machine: Ctrl-C is one line
        parser = build_parser(argv[0] if argv else None)
        args = parser.parse_args(argv)
        args._given = given_options(parser, argv)
        args._repeated = repeated_options(parser, argv)
    except KeyboardInterrupt:
        print(f"dtsim{' ' + argv[0] if argv and not argv[0].startswith('-') else ''}: "
              "interrupted", file=sys.stderr)
        return 130
    # every command's --quiet: no progress bar (sim.progress), for this call only
    with progress.quiet() if getattr(args, "quiet", False) else contextlib.nullcontext():
        return _dispatch(args)


def refuse_empty(args: argparse.Namespace) -> None:
    """Refuse an option or argument typed with an empty value (``--out ''``).

    An empty value is never a choice a command can act on: taken as unset it
    would be silently ignored, taken as a path it would write ``./.png``.
    """
    for dest in sorted(getattr(args, "_given", ())):
        value = getattr(args, dest, None)
        if isinstance(value, str) and value.strip() == "":
            raise ConfigError(dest, "a non-empty value", value)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command; its errors become one line and an exit status."""
    try:
        refuse_repeated(args)
        refuse_empty(args)
        return int(args._run(args) or 0)
    except ConfigError as exc:  # an option typed with a unit is shown as typed
        from .commands._units import as_typed

        print(f"dtsim {args.command}: error: {as_typed(args, exc)}", file=sys.stderr)
        return 2
    except SimulationError as exc:
        print(f"dtsim {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"dtsim {args.command}: error: out of memory (a size the memory estimate "
              "missed; try smaller sizes)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"dtsim {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into a reader that stopped early (| head)
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a write that failed while running (disk full, location gone)
        print(f"dtsim {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 1


def main_for(path: str, argv: Sequence[str] | None = None) -> int:
    """Run the experiment file ``path`` with the ``dtsim run`` options.

    Use at the end of an experiment script::

        if __name__ == "__main__":
            from sim.cli import main_for
            sys.exit(main_for(__file__))
    """
    args = list(sys.argv[1:] if argv is None else argv)
    return main(["run", str(path), *args])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
