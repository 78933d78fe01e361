"""The walk of a graph file's bandwidth to a transfer's time (issue 34's measure), from call stacks.

Runs ``dtsim train --network FILE`` on a small star written to a temporary
graph file and records the call stack (frames in ``sim/`` and ``topologies/``,
without the CLI, command and runner frames) each time the value moves on:
the file is read, an edge becomes a resource capacity, the network is fetched,
the network service is made, a transfer's flow is added, its arrival reaches
the flow. The walk is the functions on those stacks, each counted once; it
prints each stack, then the hops (functions), the files and the functions of
``sim/training/config.py`` on the walk.

    PYTHONPATH=TREE python tools/bandwidth_walk.py

measures the tree first on ``PYTHONPATH`` (so a checkout of another commit can
be measured the same way).
"""

from __future__ import annotations

import os
import sys
import tempfile

import networkx as nx

ROOT = os.path.abspath(os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or
                       os.path.join(os.path.dirname(__file__), ".."))
#: function (qualified name suffix) -> the moment it marks
TARGETS = {"read_graph": "read", "_add_resource": "build", "network_of": "fetch",
           "shared_network": "fetch", "NetworkService.__init__": "engine",
           "FlowEngine.add": "send", "Flow._landed": "arrive"}
SKIP = ("cli.py", "/commands/", "/runner/", "training/engines.py")


def main() -> None:
    from topologies import write_graph

    G = nx.Graph()
    for i in range(8):
        G.add_edge(f"h{i}", "sw", bandwidth=10.0, latency=0.01)
    path = os.path.join(tempfile.mkdtemp(), "star.edgelist")
    write_graph(G, path)
    seen: dict[str, list] = {}

    def prof(frame, event, arg):
        if event != "call":
            return
        name = frame.f_code.co_qualname
        for t, seg in TARGETS.items():
            if not name.endswith(t):
                continue
            if seg == "build" and frame.f_locals.get("cap") == float("inf"):
                return
            stack, f = [], frame
            while f is not None:
                fn = f.f_code.co_filename
                if fn.startswith(ROOT) and ("/sim/" in fn or "/topologies/" in fn):
                    stack.append((os.path.relpath(fn, ROOT), f.f_code.co_qualname))
                f = f.f_back
            got = seen.setdefault(seg, [])
            if len(got) < 3 and stack[::-1] not in got:
                got.append(stack[::-1])

    from sim.cli import main as dtsim

    sys.setprofile(prof)
    try:
        dtsim(["train", "--stages", "2", "--replicas", "1", "--network", path,
               "--activation-size", "5", "--param-size", "10", "--microbatches-per-step", "2",
               "--steps", "1", "--replications", "1", "--json"])
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    walk: list[tuple[str, str]] = []
    for seg in ("read", "build", "fetch", "engine", "send", "arrive"):
        for st in seen.get(seg, []):
            st = [x for x in st if not any(k in x[0] for k in SKIP)]
            print(f"[{seg}]", " -> ".join(f"{f.split('/')[-1]}:{q}" for f, q in st),
                  file=sys.stderr)
            walk.extend(x for x in st if x not in walk)
    files = sorted({f for f, _ in walk})
    cfg = [q for f, q in walk if f.endswith("training/config.py")]
    print(f"hops {len(walk)}, files {len(files)}: {files}; sim/training/config.py: {cfg}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
