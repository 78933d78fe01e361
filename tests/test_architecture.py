"""The house's floors hold (no import runs back up, no cycle or circle between rooms), and
one public name means one thing across sim/."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def _load_tool():
    spec = importlib.util.spec_from_file_location("tools_imports", ROOT / "tools" / "imports.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up by name
    spec.loader.exec_module(mod)
    return mod


imports = _load_tool()


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def _named_exceptions() -> dict[tuple[str, str], str]:
    """``A -> B`` edges that docs/ARCHITECTURE.md names as exceptions, with their reasons."""
    rows = re.findall(r"^- `([\w.]+) -> ([\w.]+)`: (.+)$", _section("Floors"), flags=re.M)
    return {(a, b): why for a, b, why in rows}


@pytest.fixture(scope="module")
def found():
    return imports.imports(ROOT)


def test_every_room_stands_on_a_declared_floor(found):
    """A new package or top module of sim/ must be given a floor in tools/imports.py."""
    rooms = {imports.room_of(m) for m in imports.modules(ROOT)}
    declared = [r for floor in imports.FLOORS for r in floor]
    assert len(declared) == len(set(declared))
    assert rooms - set(declared) == set()


def test_no_import_runs_back_up(found):
    """Every import between rooms, inside functions too, goes down the declared floors."""
    allowed = _named_exceptions()
    back = {edge: [f"{i.source}:{i.line}" for i in imps]
            for edge, imps in imports.back_edges(found).items() if edge not in allowed}
    assert back == {}
    stale = set(allowed) - set(imports.back_edges(found))
    assert stale == set(), "an exception named in docs/ARCHITECTURE.md no longer exists"


def test_no_cycle_between_rooms(found):
    """No two rooms reach each other, counting imports made inside functions."""
    allowed = _named_exceptions()
    cycles = [c for c in imports.cycles(found)
              if not any((a, b) in allowed for a in c for b in c)]
    assert cycles == []


def test_no_circle_of_module_level_imports(found):
    """No files of two rooms import each other at import time (no import-order comment needed)."""
    assert imports.circles(found, ROOT) == []


def test_documented_floors_are_the_declared_ones():
    """docs/ARCHITECTURE.md's floors are tools/imports.py's, floor by floor."""
    rows = re.findall(r"^ {4,5}(\d+)  (\S.+)$", _section("Floors"), flags=re.M)
    documented = [tuple(r.strip() for r in rooms.split(",")) for _, rooms in rows]
    assert [int(n) for n, _ in rows] == list(range(1, len(imports.FLOORS) + 1))
    assert documented == [tuple(f) for f in imports.FLOORS]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"sim/__init__.py": "", "topologies/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_checks_see_back_edges_cycles_and_circles(tmp_path):
    """The script finds an import up (even inside a function or a TYPE_CHECKING block), the
    cycle it closes, a module-level circle across rooms, and passes over __version__."""
    root = _tree(tmp_path, {
        "sim/errors.py": "def f():\n    from .training import x\n",
        "sim/training/__init__.py": "from ..errors import f\nx = 1\n",
        "sim/rng.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                      "    from sim.gossip import y\n",
        "sim/gossip/__init__.py": "from ..rng import *\ny = 1\n",
        "sim/network/__init__.py": "from ..traces.readers import r\n",
        "sim/traces/__init__.py": "",
        "sim/traces/readers.py": "from ..network import z\nr = 1\n",
        "sim/runner/__init__.py": "from .. import __version__\n",
    })
    found = imports.imports(root)
    kinds = {(i.source, i.target): i.kind for i in found}
    assert kinds[("sim.errors", "sim.training")] == "inside"
    assert kinds[("sim.rng", "sim.gossip")] == "typing"
    assert not any(i.source == "sim.runner" for i in found)
    back = imports.back_edges(found)
    assert {("sim.errors", "sim.training"), ("sim.rng", "sim.gossip"),
            ("sim.network", "sim.traces")} <= set(back)
    assert ("sim.traces", "sim.network") not in back  # traces stands above network
    cycles = imports.cycles(found)
    assert ["sim.errors", "sim.training"] in cycles
    assert ["sim.gossip", "sim.rng"] not in cycles  # a type-only import never runs
    assert imports.circles(found, root) == [["sim.network", "sim.traces.readers"]]


# --------------------------------------------------------------------------- one name per thing

#: What every command module defines by design (the CLI finds each command by these).
COMMAND_CONVENTION = frozenset({"NAME", "HELP", "add_arguments", "run"})

#: Collisions that other work of issue 34 and 35 is resolving now, each with the only
#: files allowed to define it; empty this as they land.
BEING_RESOLVED: dict[str, frozenset[str]] = {}


def public_definitions(root: Path) -> dict[str, list[str]]:
    """Each public module-level class or function of sim/, with the files that define it."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted((root / "sim").rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                    and not node.name.startswith("_"):
                where[node.name].append(path.relative_to(root).as_posix())
    return dict(where)


def collisions(root: Path) -> dict[str, list[str]]:
    """Public names defined in two files or more, less the conventions and the allow-list."""
    out = {}
    for name, files in public_definitions(root).items():
        if len(files) < 2:
            continue
        if name in COMMAND_CONVENTION and all(f.startswith("sim/commands/") for f in files):
            continue
        if set(files) <= BEING_RESOLVED.get(name, frozenset()):
            continue
        out[name] = files
    return out


def test_one_public_name_per_thing():
    """No public class or function name is defined in two files of sim/ (rename one of them)."""
    assert collisions(ROOT) == {}


def test_the_allow_list_holds_only_live_collisions():
    """Every allowed collision still exists in every file it names (else take it off the list)."""
    defs = public_definitions(ROOT)
    stale = {name: sorted(set(files) - set(defs.get(name, ())))
             for name, files in BEING_RESOLVED.items() if not set(files) <= set(defs.get(name, ()))}
    assert stale == {}


def test_the_name_check_sees_a_collision(tmp_path):
    """Two files defining one public name fail the check; a private one, a command's run and an
    allowed pair do not."""
    root = _tree(tmp_path, {
        "sim/a.py": "class Thing:\n    pass\n\ndef _helper():\n    pass\n",
        "sim/b/c.py": "def Thing():\n    pass\n\ndef _helper():\n    pass\n",
        "sim/commands/x.py": "def run(args):\n    pass\n",
        "sim/commands/y.py": "def run(args):\n    pass\n",
        "sim/network/flows.py": "class Flow:\n    pass\n",
        "sim/training/flow.py": "class Flow:\n    pass\n",
        "sim/gossip/flow.py": "class Flow:\n    pass\n",
    })
    assert collisions(root) == {
        "Thing": ["sim/a.py", "sim/b/c.py"],
        "Flow": ["sim/gossip/flow.py", "sim/network/flows.py", "sim/training/flow.py"],
    }


# --------------------------------------------------------------------------- the map is true


def _tests_named_in(section: str) -> list[tuple[int, str, str]]:
    """(row, file, test) of every test a table row of ``section`` names (``::t`` continues a file)."""
    out = []
    for row, line in enumerate(_section(section).splitlines()):
        if not line.startswith("| ") or line.startswith("| to add") or line.startswith("|---"):
            continue
        last = None
        for path, name, cont in re.findall(r"`(tests/\w+\.py)(?:::(\w+))?`|`::(\w+)`", line):
            last = path or last
            out.append((row, last, name or cont))
    return out


def test_every_test_the_where_to_add_table_names_exists():
    """Each row of "Where to add" names a test, and each named test function exists."""
    named = _tests_named_in("Where to add")
    rows = {r for r, _, _ in named}
    table = [line for line in _section("Where to add").splitlines()
             if line.startswith("| ") and not line.startswith("| to add")]
    assert len(rows) == len(table) >= 20
    missing = []
    for _, path, name in named:
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
            continue
        defs = {n.name for n in ast.parse(file.read_text()).body if isinstance(n, ast.FunctionDef)}
        if name and name not in defs:
            missing.append(f"{path}::{name}")
    assert missing == []
