"""Compare two snapshots written by ``tools/snapshot.sh``, bit for bit.

    python tools/compare_snapshots.py BEFORE AFTER [--common] [--allow-new]

Every text file under BEFORE is compared with its twin under AFTER. Fields that
measure the machine, not the model, are left out: CSV columns ``wall_time``,
``config_hash``, ``point_key`` and ``checksum`` (identities, not results), dates, JSON keys that hold
run times, a JSON object's top-level ``units`` (the names of its units, not results),
``manifest.json`` (code hashes) and figures. Exit 1 when anything else
differs, listing each difference. ``--common`` compares only the files both
snapshots have (a quick snapshot against a full one). ``--allow-new`` lets AFTER
add what BEFORE did not have: JSON keys (at any depth) and CSV columns, every
value BEFORE had staying equal (a change that adds outputs and moves none).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

SKIP_COLUMNS = {"wall_time", "config_hash", "point_key", "checksum", "seconds"}
TIME_KEY = re.compile(r"(seconds|wall_time|elapsed|runtime|_s$|per_second)")
TIME_TEXT = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|seconds|min)\b|\d{4}-\d\d-\d\d \d\d:\d\d( UTC)?")


#: Top-level JSON keys that name units (sim.commands._units), not results: a command's
#: ``units`` object says what its numbers are in and changes none of them.
UNIT_KEYS = {"units"}


def _json_clean(obj, top: bool = True):
    if isinstance(obj, dict):
        return {k: _json_clean(v, False) for k, v in obj.items()
                if not TIME_KEY.search(k) and not (top and k in UNIT_KEYS)}
    if isinstance(obj, list):
        return [_json_clean(v, False) for v in obj]
    return obj


def _only(obj, ref):
    """``obj`` without the dict keys ``ref`` lacks (at any depth; lists item by item)."""
    if isinstance(obj, dict) and isinstance(ref, dict):
        return {k: _only(v, ref[k]) for k, v in obj.items() if k in ref}
    if isinstance(obj, list) and isinstance(ref, list) and len(obj) == len(ref):
        return [_only(a, b) for a, b in zip(obj, ref, strict=True)]
    return obj


def _columns(path: Path) -> list[str] | None:
    if path.suffix != ".csv" or not path.exists():
        return None
    rows = list(csv.reader(io.StringIO(path.read_text(errors="replace"))))
    return rows[0] if rows else None


def _normalise(path: Path, root: Path, ref: Path | None = None) -> str:
    """The comparable text of ``path``; with ``ref`` (--allow-new) only what ``ref`` has."""
    text = path.read_text(errors="replace").replace(str(root.resolve()), "<snapshot>")
    if path.suffix == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        if rows:
            known = _columns(ref) if ref is not None else None
            keep = [i for i, c in enumerate(rows[0]) if c not in SKIP_COLUMNS
                    and (known is None or c in known)]
            lines = [",".join(r[i] for i in keep if i < len(r)) for r in rows]
            if path.name == "records.csv":  # rows land in completion order, not a result
                lines = lines[:1] + sorted(lines[1:])
            return "\n".join(lines)
    def ref_json(line_no: int | None = None):
        if ref is None:
            return None
        try:
            rt = ref.read_text(errors="replace")
            if line_no is None:
                return json.loads(rt)
            return json.loads(rt.splitlines()[line_no].strip())
        except (ValueError, IndexError):
            return None

    try:
        obj = _json_clean(json.loads(text))
        r = ref_json()
        if r is not None:
            obj = _only(obj, _json_clean(r))
        return json.dumps(obj, sort_keys=True, indent=0)
    except ValueError:
        pass
    lines = []
    for i, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if stripped.startswith("{") and stripped.endswith("}"):
            try:
                obj = _json_clean(json.loads(stripped))
                r = ref_json(i)
                if r is not None:
                    obj = _only(obj, _json_clean(r))
                line = json.dumps(obj, sort_keys=True)
            except ValueError:
                pass
        lines.append(TIME_TEXT.sub("<time>", line))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    only_common = "--common" in argv
    allow_new = "--allow-new" in argv
    argv = [x for x in argv if x not in ("--common", "--allow-new")]
    a, b = Path(argv[0]), Path(argv[1])
    bad = 0
    for fa in sorted(a.rglob("*")):
        if fa.is_dir() or fa.suffix in {".png", ".pdf", ".svg", ".lock"} or fa.name in {
                "manifest.json", "errors.log"} or fa.suffix == ".err":
            continue
        rel = fa.relative_to(a)
        fb = b / rel
        if not fb.exists():
            if not only_common:
                print(f"MISSING {rel}")
                bad += 1
            continue
        na, nb = _normalise(fa, a), _normalise(fb, b, fa if allow_new else None)
        if na != nb:
            bad += 1
            la, lb = na.splitlines(), nb.splitlines()
            first = next((i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y), min(len(la), len(lb)))
            print(f"DIFFERS {rel} (line {first + 1})")
            print(f"  before: {la[first][:300] if first < len(la) else '<end>'}")
            print(f"  after:  {lb[first][:300] if first < len(lb) else '<end>'}")
    print(f"{bad} file(s) differ" if bad else "identical (timings and identities aside)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
