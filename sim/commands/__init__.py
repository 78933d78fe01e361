"""Subcommands of the ``dtsim`` CLI, one module each (discovered automatically).

A module here defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Shared option helpers live in :mod:`sim.commands._common`.
"""
