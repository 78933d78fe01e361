"""The imports between sim's rooms, held against a declared order of floors.

    python tools/imports.py              # summary: floors, back edges, cycles, circles
    python tools/imports.py --edges      # every room -> room edge, with the files behind it
    python tools/imports.py --root DIR   # another checkout (an older commit, say)

A *room* is one top-level part of the house: a package under ``sim/``
(``sim.training``, its ``strategies/`` included), a module directly under
``sim/`` (``sim.failures``), the face ``sim`` (``sim/__init__.py``) and the
``topologies`` package beside it. Every ``import`` and ``from ... import`` of
every file is read from its syntax tree (nothing is imported or run), wherever
it stands: at module level (``top``), inside a function (``inside``: it runs on
first call), or under ``if TYPE_CHECKING:`` (``typing``: it never runs). ``from sim import
__version__`` reads the package's metadata and is no edge.

:data:`FLOORS` declares the order, from the ground up: a room may import only
rooms on lower floors. The script reports

* **back edges**: an import from a room to one on its own floor or above;
* **cycles**: rooms that reach each other through imports of any kind (the
  strongly connected components of the room graph, imports inside functions
  included, type-only imports left out);
* **circles**: files of two or more rooms that import each other at module
  level (what Python must resolve at import time, where an import-order
  comment is the only thing holding them together), a package's
  ``__init__.py`` counted as imported by every import of one of its modules
  from outside it.

``tests/test_architecture.py`` asserts that there is none of the three, except
each one named, with its reason, in ``docs/ARCHITECTURE.md``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

#: The declared floors of the house, from the ground up: a room imports only
#: rooms on floors below its own. Rooms on one floor are independent of each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    # 1 the ground: errors, the compiled engines' generator, progress, exact two-state sampling
    ("sim.errors", "sim.xoshiro", "sim.progress", "sim.markov"),
    # 2 quantities with units (read by topologies and the commands); the timeline's recorder
    #   (the engines call it where they know a start or an end), writer and validator
    ("sim.units", "sim.timeline"),
    # 3 the vocabulary: streams, records, the engine registry, figures, graphs, attacks
    ("sim.rng", "sim.results", "sim.engines", "sim.plotting", "topologies", "sim.adversaries"),
    # 4 what fails, what carries data, what runs many replications
    ("sim.failures", "sim.network", "sim.runner"),
    # 5 real traces, replayed onto the failure model
    ("sim.traces",),
    # 6 the closed forms the simulators are checked against
    ("sim.analytic",),
    # 7 the simulators
    ("sim.gossip", "sim.training"),
    # 8 built on them: Study A's pipeline (its queueing engine is the training flow),
    #   gossip training, real runs as training configs
    ("sim.pipeline", "sim.learning", "sim.profiles"),
    # 9 the plan search over profiles
    ("sim.planner",),
    # 10 the benches, above all they measure
    ("sim.bench",),
    # 11-13 the command line, and the package's face (its public names, imported on use)
    ("sim.commands",),
    ("sim.cli",),
    ("sim", "sim.__main__"),
)

KINDS = ("top", "inside", "typing")


@dataclass(frozen=True)
class Import:
    """One import statement of one file, resolved to the module it names.

    Attributes
    ----------
    source : str
        The importing file's module (``sim.training.config``).
    target : str
        The imported module (``sim.pipeline`` for ``from ..pipeline import x``
        when ``x`` is no module; ``sim.pipeline.config`` when it is one).
    kind : {"top", "inside", "typing"}
        Module level, inside a function, or under ``if TYPE_CHECKING:``.
    line : int
        Its line in the source file.
    """

    source: str
    target: str
    kind: str
    line: int


def room_of(module: str) -> str | None:
    """The room of a module of the house (``None`` for a module outside it).

    Parameters
    ----------
    module : str
        A dotted module name.

    Returns
    -------
    str or None
    """
    parts = module.split(".")
    if parts[0] == "topologies":
        return "topologies"
    if parts[0] != "sim":
        return None
    return ".".join(parts[:2])


def modules(root: Path) -> dict[str, Path]:
    """Every module of ``sim/`` and ``topologies/`` under ``root``, by dotted name.

    Parameters
    ----------
    root : pathlib.Path
        The checkout.

    Returns
    -------
    dict of str to pathlib.Path
    """
    out: dict[str, Path] = {}
    for top in ("sim", "topologies"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.Module):
    """Yield ``(node, kind)`` for every import statement of a module."""

    def visit(node: ast.AST, kind: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from visit(child, "inside" if kind == "top" else kind)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), "typing")
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from visit(child, kind)

    yield from visit(tree, "top")


def imports(root: Path) -> list[Import]:
    """Every import of the house's files that names a module of the house.

    Parameters
    ----------
    root : pathlib.Path
        The checkout.

    Returns
    -------
    list of Import
    """
    mods = modules(root)
    found: list[Import] = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, kind in _statements(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = []
                for alias in node.names:
                    sub = f"{stem}.{alias.name}"
                    if sub not in mods and alias.name.startswith("__"):
                        continue  # ``__version__``: the package's metadata, no code
                    targets.append(sub if sub in mods else stem)
            for target in dict.fromkeys(targets):
                while target and target not in mods:  # ``import a.b.c`` of a name, not a module
                    target = target.rpartition(".")[0]
                if target and room_of(target) is not None:
                    found.append(Import(name, target, kind, node.lineno))
    return found


def floor_of() -> dict[str, int]:
    """Each declared room's floor (1 is the ground)."""
    return {room: i + 1 for i, rooms in enumerate(FLOORS) for room in rooms}


def room_edges(found: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """The imports that cross from one room to another, by ``(from, to)`` room pair.

    Parameters
    ----------
    found : list of Import

    Returns
    -------
    dict
    """
    edges: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for imp in found:
        a, b = room_of(imp.source), room_of(imp.target)
        if a != b:
            edges[(a, b)].append(imp)
    return dict(edges)


def back_edges(found: list[Import]) -> dict[tuple[str, str], list[Import]]:
    """Room pairs whose imports do not go down the declared floors (typing ones included).

    Parameters
    ----------
    found : list of Import

    Returns
    -------
    dict
        ``(from, to) -> imports`` for every edge to the same floor or above, or
        from or to a room :data:`FLOORS` does not declare.
    """
    floors = floor_of()
    return {(a, b): imps for (a, b), imps in room_edges(found).items()
            if a not in floors or b not in floors or floors[a] <= floors[b]}


def _components(nodes: set[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more nodes (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(nodes) + 100))
    try:
        for v in sorted(nodes):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def cycles(found: list[Import]) -> list[list[str]]:
    """Rooms that reach each other through imports that run (top level or inside functions).

    Parameters
    ----------
    found : list of Import

    Returns
    -------
    list of list of str
        Each cycle's rooms, sorted.
    """
    succ: dict[str, set[str]] = defaultdict(set)
    nodes: set[str] = set()
    for (a, b), imps in room_edges(found).items():
        nodes |= {a, b}
        if any(i.kind != "typing" for i in imps):
            succ[a].add(b)
    return _components(nodes, succ)


def circles(found: list[Import], root: Path) -> list[list[str]]:
    """Files of two or more rooms that import each other at module level.

    Parameters
    ----------
    found : list of Import
    root : pathlib.Path

    Returns
    -------
    list of list of str
        Each circle's modules, sorted; only circles that span two rooms or more.
    """
    packages = {name for name, path in modules(root).items() if path.name == "__init__.py"}
    succ: dict[str, set[str]] = defaultdict(set)
    nodes: set[str] = set()
    for imp in found:
        if imp.kind != "top":
            continue
        targets = {imp.target}
        parts = imp.target.split(".")
        for i in range(1, len(parts)):  # importing a.b.c runs a and a.b first
            parent = ".".join(parts[:i])
            if parent in packages and not imp.source.startswith(parent + "."):
                targets.add(parent)
        for t in targets:
            if t != imp.source:
                succ[imp.source].add(t)
                nodes |= {imp.source, t}
    return [c for c in _components(nodes, succ) if len({room_of(m) for m in c}) > 1]


def summary(root: Path, *, edges: bool = False) -> str:
    """The report printed by the command line.

    Parameters
    ----------
    root : pathlib.Path
    edges : bool, optional
        Also list every room edge with the imports behind it.

    Returns
    -------
    str
    """
    found = imports(root)
    floors = floor_of()
    rooms = sorted({room_of(m) for m in modules(root)})
    crossing = room_edges(found)
    n_files = len({(i.source, i.target) for i in found if room_of(i.source) != room_of(i.target)})
    n_inside = len({(i.source, i.target) for i in found
                    if room_of(i.source) != room_of(i.target) and i.kind == "inside"})
    lines = [f"{len(rooms)} rooms, {len(crossing)} room edges; "
             f"{n_files} file -> module imports between rooms, {n_inside} of them inside functions"]
    lines.append("floors (declared, ground first):")
    for i, group in enumerate(FLOORS):
        lines.append(f"  {i + 1:2d}  " + ", ".join(group))
    undeclared = [r for r in rooms if r not in floors]
    if undeclared:
        lines.append("rooms on no floor: " + ", ".join(undeclared))
    back = back_edges(found)
    lines.append(f"back edges: {len(back)}")
    for (a, b), imps in sorted(back.items()):
        kinds = ",".join(k for k in KINDS if any(i.kind == k for i in imps))
        where = "; ".join(f"{i.source}:{i.line}" for i in imps[:4])
        more = f" (+{len(imps) - 4})" if len(imps) > 4 else ""
        lines.append(f"  {a} -> {b} [{kinds}]  {where}{more}")
    cyc = cycles(found)
    lines.append(f"cycles between rooms (imports inside functions included): {len(cyc)}")
    for c in cyc:
        lines.append("  " + ", ".join(c))
    circ = circles(found, root)
    lines.append(f"circles of module-level imports across rooms: {len(circ)}")
    for c in circ:
        lines.append(f"  {len(c)} modules: " + ", ".join(c))
    if edges:
        lines.append("room edges:")
        for (a, b), imps in sorted(crossing.items()):
            kinds = ",".join(f"{k} {sum(i.kind == k for i in imps)}" for k in KINDS
                             if any(i.kind == k for i in imps))
            lines.append(f"  {a} -> {b}  ({kinds})")
            for i in imps:
                lines.append(f"      {i.source}:{i.line} {i.kind} {i.target}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the summary; exit 1 when there is a back edge, a cycle or a circle."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--edges", action="store_true", help="list every room edge")
    args = parser.parse_args(argv)
    print(summary(args.root, edges=args.edges))
    found = imports(args.root)
    bad = back_edges(found) or cycles(found) or circles(found, args.root)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
