"""Option helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, is_dataclass
from typing import Any

import numpy as np

from ..results import Estimate

__all__ = ["add_run_options", "emit_json", "to_jsonable", "print_table"]


def add_run_options(p: argparse.ArgumentParser, *, replications: int = 20, executor: bool = True) -> None:
    """``--replications --seed --json`` (and ``--executor --workers``)."""
    p.add_argument("--replications", type=int, default=replications, metavar="M",
                   help=f"independent replications (default {replications})")
    p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    if executor:
        p.add_argument("--executor", default="serial", metavar="NAME",
                       help="serial (default) or local (process pool)")
        p.add_argument("--workers", type=int, default=None, metavar="N",
                       help="processes for --executor local (default: all cores)")


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, dataclasses and non-finite floats for JSON."""
    if isinstance(obj, Estimate):
        return [to_jsonable(obj.low), to_jsonable(obj.high)]
    if is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def emit_json(payload: dict[str, Any]) -> None:
    """Print ``payload`` as one JSON object (non-finite numbers become null)."""
    json.dump(to_jsonable(payload), sys.stdout, allow_nan=False)
    sys.stdout.write("\n")


def print_table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """Print a plain aligned text table."""
    cols = list(zip(*([header] + [tuple(map(str, r)) for r in rows]), strict=True))
    widths = [max(len(c) for c in col) for col in cols]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))
