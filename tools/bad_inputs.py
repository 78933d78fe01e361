"""Bad-input audit: run every bad input and fault in one table; write docs/bad_inputs.md.

Each case is one command (a ``dtsim`` subcommand, or a snippet of the public
Python API run by a small harness), a timeout and an expectation:

* ``refuse(param)``: exit status 2 and exactly one line on stderr, naming
  ``param`` (``'param'`` as :class:`sim.errors.ConfigError` writes it, or
  ``--param`` as argparse does), and no sign of work: nothing on stdout, no
  file created or changed in the scratch folder (the working folder of the
  cases), no progress bar, and at most :data:`REFUSE_CPU` seconds of CPU
  (a refusal comes before any work, so it costs about an import);
* ``fail(text)``: exit status 1 and exactly one line on stderr, containing
  ``text`` (an error while running or writing, after the work that finished
  was kept);
* ``ok(text)``: exit status 0, ``text`` on stdout, and a clean stderr (no
  warning, no traceback).

Every case also fails on a traceback (``Traceback`` on stderr) or a hang (the
timeout). A case that expected a refusal and got exit 0 is a *silent ignore*;
one that exited 2 naming another parameter is a *wrong parameter name*.

Usage::

    python tools/bad_inputs.py                   # every case; writes docs/bad_inputs.md
    python tools/bad_inputs.py --only pipeline   # cases whose id contains "pipeline"
    python tools/bad_inputs.py --list            # the table of cases, not run

Exit status 0 when every case meets its expectation, 1 otherwise.

Faults that need a read-only or a full location use small tmpfs mounts when
``mount -t tmpfs`` works here (root ignores file permissions, so ``chmod`` is
no test); otherwise an equivalent without mounts: a path below a regular
file (cannot be created) and ``/dev/full`` (every write fails with ENOSPC).
Every case runs with an address-space limit (``RLIMIT_AS``, 4 GiB by
default), so a config that would exhaust the machine fails fast instead.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "bad_inputs.md"
#: Address-space limit of every case (bytes).
MEMORY_LIMIT = 4 * 2**30
#: CPU seconds a refusal may take (the command and its children): an import of
#: the CLI and a check, not a run. CPU, not wall time, so a loaded machine does
#: not turn a refusal into a failure.
REFUSE_CPU = 6.0

# ----------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expect:
    """What a case must do: ``kind`` refuse / fail / ok, and the text to find."""

    kind: str
    text: str = ""


def refuse(param: str) -> Expect:
    """Exit 2 with a last stderr line naming ``param``."""
    return Expect("refuse", param)


def fail(text: str) -> Expect:
    """Exit 1 with one line containing ``text``."""
    return Expect("fail", text)


def ok(text: str = "") -> Expect:
    """Exit 0, ``text`` on stdout, nothing alarming on stderr."""
    return Expect("ok", text)


def benched(text: str = "") -> Expect:
    """A benchmark that runs through: exit 0, or exit 1 with one line naming the missed targets.

    Whether a speed target is met depends on the machine and its load, so the
    case judges what it is about (no traceback, nothing alarming on stderr,
    ``text`` on stdout), not the target.
    """
    return Expect("bench", text)


@dataclass
class Case:
    """One bad input or fault."""

    id: str
    argv: Sequence[str]
    expect: Expect
    timeout: float = 30.0
    note: str = ""
    parallel: int = 1          # start this many copies at one instant
    interrupt_after: float | None = None  # send SIGINT after this many seconds
    cwd: str | None = None
    #: CPU seconds a refusal may take (default :data:`REFUSE_CPU`)
    cpu_limit: float | None = None
    #: paths the command must not create (a marker the code of a data file would write)
    must_not_exist: Sequence[str] = ()
    #: a refusal that can only come after a task ran (its result is kept): files allowed
    allow_work: bool = False


@dataclass
class Outcome:
    case: Case
    status: int | None
    last: str
    traceback: bool
    hang: bool
    seconds: float
    verdict: str
    detail: str = ""
    statuses: list[int | None] = field(default_factory=list)
    cpu: float | None = None
    lines: int = 0
    changed: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- fixtures

API_HARNESS = textwrap.dedent("""
    import sys
    from sim.errors import ConfigError
    try:
        exec(compile(sys.argv[1], "<case>", "exec"), {"__name__": "__case__"})
    except ConfigError as exc:
        print(f"ConfigError: {exc}", file=sys.stderr)
        sys.exit(2)
""")


def api(snippet: str) -> list[str]:
    """argv running ``snippet`` in the API harness (ConfigError -> one line, exit 2)."""
    return [sys.executable, "-c", API_HARNESS, textwrap.dedent(snippet)]


def dtsim(*args: str) -> list[str]:
    """argv of one ``dtsim`` command (the current interpreter's ``sim``)."""
    return [sys.executable, "-m", "sim", *args]


def _override(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``base`` (option-value pairs) less the options ``extra`` sets, then ``extra``: an
    option typed twice with two values is refused (audit 7), so a case that changes a
    default of its group's options replaces it instead of repeating it."""
    given = {t for t in extra if t.startswith("--")}
    out: list[str] = []
    for opt, value in zip(base[::2], base[1::2], strict=True):
        if opt not in given:
            out += [opt, value]
    return [*out, *extra]


class Fixtures:
    """Files, folders and mounts the cases point at; removed by :meth:`close`."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dtsim-bad-inputs-"))
        self.mounts: list[Path] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        self.file = self._write("a_file.txt", "not a folder\n")
        self.under_file = str(self.file / "sub")
        self.binary = self.root / "binary.csv"
        self.binary.write_bytes(b"worker,start,end\n\xff\xfe\x00\x81garbage\x00\n")
        self.binary_graph = self.root / "binary.graphml"
        self.binary_graph.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x81garbage\x00\n")
        self.json_graph_directed = self.root / "directed.json"
        self.json_graph_directed.write_text('{"directed": true, "nodes": [{"id": 1}, {"id": 2}], '
                                            '"links": [{"source": 1, "target": 2}]}')
        self.json_graph_dangling = self.root / "dangling.json"
        self.json_graph_dangling.write_text('{"nodes": [{"id": "a"}], '
                                            '"links": [{"source": "a", "target": "b"}]}')
        self.json_not_graph = self.root / "fleet-like.json"
        self.json_not_graph.write_text('{"nodes": [{"gpu": "A100-40", "count": 2}]}')
        self.empty_dir = self.root / "empty"
        self.empty_dir.mkdir()
        self.dir = self.root / "a_dir"
        self.dir.mkdir()
        self.trace_ok = self._write("trace.csv", "worker,start,end\nw0,1,2\nw1,3,4\n")
        self.mountable = self._try_mount(self.root / "probe", "size=64k")
        if self.mountable:
            self.ro = self.root / "ro"
            self._mount(self.ro, "ro,size=64k")
            self.full = self.root / "full"
            self._mount(self.full, "size=8k,nr_inodes=64")
            self._fill(self.full)
            # one free page: a probe of a few bytes fits, a trace of many kB does not
            self.nearly_full = self.root / "nearly_full"
            self._mount(self.nearly_full, "size=16k,nr_inodes=64")
            self._fill(self.nearly_full, leave=4096)
            self.ro_results = self.root / "ro_results"
        else:
            self.ro = Path(self.under_file)
            self.full = Path("/dev/full")
            self.nearly_full = None
            self.ro_results = None
        self.experiments = self._experiments()
        self._hardening()

    def _hardening(self) -> None:
        """FIFOs in place of input files, a results folder whose manifest names code."""
        h = self.root / "hard"
        h.mkdir()
        self.fifo: dict[str, Path] = {}
        for name in ("trace.csv", "graph.graphml", "builder.py", "exp.py", "speeds.csv",
                     "objective.csv"):
            f = h / name
            os.mkfifo(f)
            self.fifo[name] = f
        # a results folder whose records.csv is a FIFO, and one whose records.csv is a folder
        for kind in ("fifo_records", "dir_records"):
            d = h / kind
            d.mkdir()
            (d / "manifest.json").write_text('{"experiment": "good", "seed": 0, '
                                             '"replications": 1, "points": []}\n')
            if kind == "fifo_records":
                os.mkfifo(d / "records.csv")
            else:
                (d / "records.csv").mkdir()
        # an experiments folder holding a FIFO named like a study file
        self.fifo_studies = h / "studies"
        self.fifo_studies.mkdir()
        os.mkfifo(self.fifo_studies / "study.py")
        # a marker-writing file that a results folder's manifest names
        self.marker = h / "MARKER"
        self.evil = self._write("hard/evil.py", textwrap.dedent(f"""
            from pathlib import Path
            Path({str(self.marker)!r}).write_text("code from a results folder ran")
            NAME = "good"
            def analyse(results, out_dir):
                Path({str(self.marker)!r}).write_text("its analyse ran")
        """))
        self.planted = h / "planted"  # filled by make_planted() when a case needs it
        # tables of 10^7 rows (about 100 MB), filled by make_long_tables() when a case needs them
        self.long_tables = {"steps": self.root / "u33" / "steps_1e7.csv",
                            "prices": self.root / "u33" / "prices_1e7.csv"}
        # user topology builders that raise, exit, or return a directed graph
        self.builders = self._write("hard/builders.py", textwrap.dedent("""
            import sys
            import networkx as nx
            def boom(n=8):
                raise RuntimeError("the builder failed")
            def leave(n=8):
                sys.exit(3)
            def directed(n=8):
                return nx.DiGraph(nx.cycle_graph(n))
        """))
        self.graphs = {}
        import networkx as nx

        for name, G in (("g20.graphml", nx.cycle_graph(20)),
                        ("selfloop.graphml", nx.Graph([(0, 1), (1, 2), (2, 0), (1, 1)])),
                        ("directed.graphml", nx.DiGraph([(0, 1), (1, 2), (2, 0)])),
                        ("multi.graphml", nx.MultiGraph([(0, 1), (1, 2), (2, 0), (0, 1)]))):
            f = h / name
            nx.write_graphml(G, f)
            self.graphs[name] = f
        self.graphs["dup.edges"] = self._write("hard/dup.edges", "0 1\n1 2\n2 0\n1 0\n")
        self.graphs["loop.edges"] = self._write("hard/loop.edges", "0 1\n1 2\n2 0\n2 2\n")
        self.nested_json = self._write("hard/nested.json", '{"metadata": {"gap_seconds": 60}, '
                                       '"data": ' + "[" * 100000 + "]" * 100000 + "}")
        head = "import sys\nfrom sim.failures import ClusterConfig, failures_model\n"
        good = ("BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)\n"
                "FACTORS = {'availability': [0.8, 0.9]}\nREPLICATIONS = 2\n"
                "def model(config, streams):\n    return failures_model(config, streams)\n")
        exps = {
            "selfref": "NAME = 'selfref'\nBASE = {'p': 0.5}\nBASE['self'] = BASE\n"
                       "FACTORS = {'p': [0.1]}\nREPLICATIONS = 2\n"
                       "def model(config, streams):\n    return {'x': 1.0}\n",
            "exitmodel": "NAME = 'exitmodel'\nBASE = {'p': 0.5}\nFACTORS = {'p': [0.1, 0.2]}\n"
                         "REPLICATIONS = 2\ndef model(config, streams):\n"
                         "    if config['p'] == 0.2:\n        sys.exit(3)\n"
                         "    return {'x': 1.0}\n",
            "analyse_raises": "NAME = 'analyse_raises'\n" + good
                              + "def analyse(results, out_dir):\n    raise KeyError('nope')\n",
            "analyse_exits": "NAME = 'analyse_exits'\n" + good
                             + "def analyse(results, out_dir):\n    sys.exit(4)\n",
            "analyse3": "NAME = 'analyse3'\n" + good + "analyse = 3\n",
            "rates_none": "NAME = 'rates_none'\n" + good + "RATES = {'no_such_metric': None}\n",
            "nonneg_none": "NAME = 'nonneg_none'\n" + good + "NONNEGATIVE = ('no_such_metric',)\n",
            "nonneg_neg": "NAME = 'nonneg_neg'\nBASE = {'p': 0.5}\nFACTORS = {'p': [0.1]}\n"
                          "REPLICATIONS = 2\nNONNEGATIVE = '*'\n"
                          "def model(config, streams):\n    return {'x': 1.0, 'wait': -1.0}\n",
            "base5": "NAME = 'base5'\nBASE = 5\nFACTORS = {}\nREPLICATIONS = 2\n"
                     "def model(config, streams):\n    return {'x': 1.0}\n",
            "base_nan": "NAME = 'base_nan'\nBASE = {'p': float('nan')}\nFACTORS = {}\n"
                        "REPLICATIONS = 2\ndef model(config, streams):\n"
                        "    return {'x': config['p']}\n",
        }
        self.hard_exp = {k: self._write(f"hard/{k}.py", head + v) for k, v in exps.items()}

    def make_planted(self) -> None:
        """Finished results folders of ``good``: one whose manifest names :attr:`evil`, and
        copies with a wrong-type or damaged manifest, a duplicated line, a renamed column."""
        import json

        subprocess.run(dtsim("run", str(self.experiments["good"]), "--executor", "serial",
                             "--quiet", "--out", str(self.planted)),
                       capture_output=True, timeout=300, cwd=self.root)
        subprocess.run(dtsim("run", str(self.hard_exp["analyse_raises"]), "--executor",
                             "serial", "--quiet", "--out", str(self.planted.with_name("analysed"))),
                       capture_output=True, timeout=300, cwd=self.root)
        for kind in ("wrong_type", "damaged", "duplicate", "renamed", "userfig"):
            shutil.copytree(self.planted, self.planted.with_name(kind))
        # smallfix8: a user's file at the name of each figure dtsim plot would draw
        header = (self.planted / "records.csv").read_text().split("\n", 1)[0]
        for col in header.split(","):
            (self.planted.with_name("userfig") / f"{col}.png").write_bytes(b"a photo")
        m = json.loads((self.planted / "manifest.json").read_text())
        m["file"] = str(self.evil)
        (self.planted / "manifest.json").write_text(json.dumps(m))
        h = self.planted.parent
        w = dict(m, points="x")
        (h / "wrong_type" / "manifest.json").write_text(json.dumps(w))
        (h / "damaged" / "manifest.json").write_text('{"experiment": "good", "poi')
        rec = h / "duplicate" / "records.csv"
        lines = rec.read_text().splitlines(keepends=True)
        rec.write_text("".join(lines) + lines[1])
        rec = h / "renamed" / "records.csv"
        header, body = rec.read_text().split("\n", 1)
        rec.write_text(header.replace(",joint_outage", ",joint_outage_renamed", 1) + "\n" + body)

    # -- helpers --------------------------------------------------------------
    def _write(self, name: str, text: str) -> Path:
        p = self.root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def _try_mount(self, where: Path, opts: str) -> bool:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            return False
        try:
            self._mount(where, opts)
        except (OSError, subprocess.CalledProcessError):
            return False
        return True

    def _mount(self, where: Path, opts: str) -> None:
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], check=True,
                       capture_output=True)
        self.mounts.append(where)

    @staticmethod
    def _fill(where: Path, leave: int = 0) -> None:
        with open(where / "filler", "wb", buffering=0) as fh:
            try:
                while True:
                    fh.write(b"\0" * 1024)
            except OSError:
                pass
        if leave:
            size = (where / "filler").stat().st_size
            os.truncate(where / "filler", max(0, size - leave))

    def make_long_tables(self) -> None:
        """A step-time table and a price series of 10^7 rows each (written once)."""
        heads = {"steps": ("workers,step_time\n", range(1, 10_000_001)),
                 "prices": ("time,price\n", range(10_000_000))}
        for kind, path in self.long_tables.items():
            if path.exists():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            head, rows = heads[kind]
            with open(path, "w") as fh:
                fh.write(head)
                fh.writelines(f"{i},1.5\n" for i in rows)

    def make_ro_results(self) -> None:
        """A finished results folder, then remounted read-only (its .lock cannot be opened)."""
        if self.ro_results is None:
            return
        self._mount(self.ro_results, "size=1m,nr_inodes=256")
        subprocess.run(dtsim("run", str(self.experiments["good"]), "--executor", "serial",
                             "--quiet", "--out", str(self.ro_results / "res")),
                       capture_output=True, timeout=120, cwd=self.root)
        subprocess.run(["mount", "-o", "remount,ro", str(self.ro_results)], check=True,
                       capture_output=True)

    def _experiments(self) -> dict[str, Path]:
        head = textwrap.dedent("""
            import sys
            import sim.runner
            from sim.failures import ClusterConfig, failures_model
        """)
        body = {
            "good": """
                NAME = "good"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.8, 0.9]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "grid": """
                NAME = "grid"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.5 + i * 1e-4 for i in range(1000)],
                           "domain_outage": [i * 1e-4 for i in range(1000)],
                           "horizon": [100.0 + i for i in range(1000)]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "reps": """
                NAME = "reps"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 10**12
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "unpicklable": """
                NAME = "unpicklable"
                BASE = {"gen": (i for i in range(3)), "scale": 1.0}
                FACTORS = {"scale": [1.0, 2.0]}
                REPLICATIONS = 2
                def model(config, streams):
                    return {"x": config["scale"]}
            """,
            "exit7": """
                sys.exit(7)
                NAME = "exit7"
            """,
            "raises": """
                raise RuntimeError("boom at import")
            """,
            "syntax": """
                NAME = "syntax"
                def model(config, streams)
                    return {}
            """,
            "escape": """
                NAME = "../escape"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "absname": """
                NAME = "/tmp/absolute_name"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "nomodel": """
                NAME = "nomodel"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 2
            """,
            "badfactor": """
                NAME = "badfactor"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availabilty": [0.9]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "badvalue": """
                NAME = "badvalue"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9, 1.5]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "unitvalue": """
                NAME = "unitvalue"
                from sim.training import TrainingConfig, training_model
                BASE = TrainingConfig(stages=1, replicas=2, steps=2)
                FACTORS = {"param_size": ["20 parsecs"]}
                REPLICATIONS = 1
                def model(config, streams):
                    return training_model(config, streams)
            """,
            "unithour": """
                NAME = "unithour"
                from sim.training import TrainingConfig, training_model
                BASE = TrainingConfig(stages=1, replicas=2, steps=2, hour=60.0)
                FACTORS = {"mtbf": ["30min"]}
                REPLICATIONS = 1
                def model(config, streams):
                    return training_model(config, streams)
            """,
            "modelrefuses": """
                NAME = "modelrefuses"
                from sim.training import TrainingConfig, training_model
                BASE = {"m": "diloco"}
                FACTORS = {"m": ["diloco", "streaming"]}
                REPLICATIONS = 1
                def model(config, streams):
                    sync = "diloco:every=2" + (",fragments=2,quorum=1" if config["m"] == "streaming"
                                               else "")
                    return training_model(TrainingConfig(stages=1, replicas=2, steps=2, sync=sync,
                                                         mtbf=60.0, replace_time=1.0), streams)
            """,
            "zeroreps": """
                NAME = "zeroreps"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 0
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "strreps": """
                NAME = "strreps"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = "5"
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "emptyfactor": """
                NAME = "emptyfactor"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": []}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "strbase": """
                NAME = "strbase"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0, availability="0.9")
                FACTORS = {"domain_outage": [0.0]}
                REPLICATIONS = 2
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "badquick": """
                NAME = "badquick"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 2
                QUICK = {"REPLICATONS": 1}
                def model(config, streams):
                    return failures_model(config, streams)
            """,
            "badreturn": """
                NAME = "badreturn"
                BASE = ClusterConfig(workers=4, domains=2, horizon=200.0)
                FACTORS = {"availability": [0.9]}
                REPLICATIONS = 2
                def model(config, streams):
                    return 42
            """,
        }
        out = {}
        for name, text in body.items():
            out[name] = self._write(f"exp/{name}.py", head + textwrap.dedent(text))
        out["not_py"] = self._write("exp/notes.txt", "hello\n")
        return out

    def close(self) -> None:
        for m in reversed(self.mounts):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


# ----------------------------------------------------------------------------- the table


def build_cases(fx: Fixtures) -> list[Case]:
    """Every case, grouped by subcommand; ids are ``command/what``."""
    exp = fx.experiments
    T = fx.root
    full = str(fx.full)
    ro = str(fx.ro)
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    big = "1000000000"

    # -- pipeline ---------------------------------------------------------------
    P = lambda *a: dtsim("pipeline", *a)  # noqa: E731
    # the event log of replication 0 (--event-log; called --trace before the traces landed)
    EV = "--event-log" if _has_option("pipeline", "--event-log") else "--trace"
    EVN = EV[2:].replace("-", "_")
    add("pipeline/stages-zero", P("--stages", "0"), refuse("stages"))
    add("pipeline/stages-not-int", P("--stages", "x"), refuse("stages"))
    add("pipeline/stages-1e9", P("--stages", big), refuse("stages"), timeout=60,
        note="memory: refused before it is allocated")
    add("pipeline/replicas-zero", P("--replicas", "0"), refuse("replicas"))
    add("pipeline/replicas-wrong-count", P("--stages", "3", "--replicas", "2,2"), refuse("replicas"))
    add("pipeline/replicas-1e9-des", P("--stages", "4", "--replicas", big, "--engine", "des"),
        refuse("replicas"), timeout=60, note="memory: 4e9 simulated workers")
    add("pipeline/replicas-1e9-vector", P("--stages", "4", "--replicas", big), ok("drop rate"),
        timeout=60, note="the vector engine draws stage outages, not workers: it fits")
    add("pipeline/skip-budget-above-L", P("--stages", "3", "--skip-budget", "4"), refuse("skip_budget"))
    # (audit 7) an option typed twice with two values: argparse kept the last, silently
    for cmd, opt, a, b in (("pipeline", "--stages", "2", "3"), ("train", "--stages", "2", "3"),
                           ("learners", "--learners", "2", "3"), ("gossip", "--nodes", "8", "9"),
                           ("failures", "--horizon", "10", "20")):
        add(f"{cmd}/option-twice", dtsim(cmd, opt, a, opt, b), refuse(opt[2:].replace("-", "_")))
    add("learners/option-twice-abbreviated", dtsim("learners", "--learn", "2", "--learners",
                                                   "3"),
        refuse("learners"), note="argparse's unique prefix is the same option")
    add("train/option-twice-with-equals", dtsim("train", "--steps=2", "--steps", "3"),
        refuse("steps"))
    add("plan/fleet-twice", dtsim("plan", "--model", "OPT-350", "--fleet", "a.json", "--fleet",
                                  "b.json"), refuse("fleet"))
    add("train/option-twice-same-value-runs", dtsim("train", "--replications", "1", "--steps",
                                                    "2", "--steps", "2"), ok("throughput"),
        note="nothing ignored: the same value twice")
    add("pipeline/availability-above-1", P("--availability", "1.5"), refuse("availability"))
    add("pipeline/availability-nan", P("--availability", "nan"), refuse("availability"))
    add("pipeline/domain-outage-negative", P("--domain-outage", "-0.1"), refuse("domain_outage"))
    add("pipeline/skip-penalty-above-1", P("--skip-budget", "1", "--skip-penalty", "2"),
        refuse("skip_penalty"))
    add("pipeline/penalty-unknown", P("--skip-budget", "1", "--skip-penalty", "0.1", "--penalty",
                                      "bogus"), refuse("penalty"))
    # (audit 7) without a skip budget nothing is skipped: kappa and its form were ignored
    add("pipeline/skip-penalty-without-skip-budget", P("--skip-penalty", "0.1"),
        refuse("skip_penalty"), note="s = 0: accepted and ignored (kappa only in the header)")
    add("pipeline/penalty-without-skip-penalty", P("--penalty", "additive"), refuse("penalty"),
        note="accepted and ignored, as dtsim design refuses it")
    add("pipeline/distribution-unknown", P("--distribution", "bogus"), refuse("failure_distribution"))
    add("pipeline/mean-downtime-zero", P("--mean-downtime", "0"), refuse("mean_downtime"))
    add("pipeline/rate-zero", P("--rate", "0"), refuse("rate"))
    add("pipeline/rate-inf", P("--rate", "inf"), refuse("rate"))
    add("pipeline/arrival-unknown", P("--arrival", "bogus"), refuse("arrival"))
    add("pipeline/bandwidth-zero", P("--bandwidth", "0"), refuse("bandwidth"))
    add("pipeline/latency-wrong-count", P("--stages", "4", "--latency", "1,2"), refuse("latency"))
    # a value whose run would overflow to inf (was a hang: --latency 1e308)
    add("pipeline/overflow-latency", P("--latency", "1e308"), refuse("latency"))
    add("pipeline/overflow-stage-time", P("--stages", "2", "--stage-time", "1,1e308"),
        refuse("stage_time"))
    add("pipeline/overflow-bandwidth", P("--transfer-size", "1", "--bandwidth", "1e-308"),
        refuse("bandwidth"))
    add("pipeline/overflow-rate", P("--rate", "1e-308"), refuse("rate"))
    # finite values whose DES would simulate billions of outages (was a runaway: hours)
    add("pipeline/des-runaway-latency", P("--latency", "1e6"), refuse("latency"),
        note="1.4e9 expected up/down transitions, budget 1e8")
    add("pipeline/des-runaway-downtime", P("--mean-downtime", "1e-5", "--stage-time", "0.01"),
        refuse("mean_downtime"))
    add("pipeline/des-runaway-domain", P("--domain-outage", "0.1", "--domain-downtime", "1e-6",
                                         "--stage-time", "1"), refuse("domain_downtime"))
    add("pipeline/des-runaway-engine-des", P("--mean-downtime", "1e-7", "--engine", "des"),
        refuse("mean_downtime"), note="auto picks the vector engine for it; the DES would not end")
    add("pipeline/stage-time-negative", P("--stage-time", "-1"), refuse("stage_time"))
    add("pipeline/microbatches-zero", P("--microbatches", "0"), refuse("microbatches"))
    add("pipeline/microbatches-1e12-records", api(
        "import sim; sim.PipelineConfig(microbatches=10**12, records=True)"), refuse("microbatches"),
        timeout=60, note="memory: per-microbatch records")
    add("pipeline/replications-zero", P("--replications", "0"), refuse("replications"))
    add("pipeline/replications-1e9", P("--stages", "2", "--microbatches", "10",
                                       "--replications", big), refuse("replications"), timeout=60,
        note="memory: the records of 1e9 replications")
    add("pipeline/engine-unknown", P("--engine", "bogus"), refuse("engine"))
    add("pipeline/method-unknown", P("--method", "bogus"), refuse("method"))
    add("pipeline/executor-unknown", P("--executor", "bogus"), refuse("executor"))
    add("pipeline/workers-zero", P("--executor", "local", "--workers", "0"), refuse("workers"))
    add("pipeline/topology-unknown", P("--topology", "bogus"), refuse("topology"))
    add("pipeline/placement-unknown", P("--topology", "datacenter:regions=2,racks=2,hosts=4",
                                        "--stages", "4", "--placement", "bogus"), refuse("placement"))
    add("pipeline/tree-placement-ok", P("--topology", "tree:racks=2,hosts=4", "--stages", "2",
                                        "--replicas", "4", "--microbatches", "200"),
        ok("latency mean"), note="hosts linked through switches; each stage in a rack")
    add("pipeline/tree-placement-too-many", P("--topology", "tree:racks=2,hosts=4", "--stages",
                                              "3", "--replicas", "4", "--placement", "packed"),
        refuse("placement"), note="8 hosts: the 3 switches hold no worker")
    add("pipeline/max-wait-inf-dead", P("--availability", "0", "--max-wait", "inf",
                                        "--stage-time", "1"), refuse("max_wait"))
    add("pipeline/samples-without-importance", P("--samples", "100"), refuse("samples"))
    add("pipeline/trace-is-dir", P("--stages", "2", EV, str(fx.dir)), refuse(EVN),
        note="checked before the simulation runs")
    add("pipeline/trace-under-file", P("--stages", "2", EV, fx.under_file + "/t.csv"),
        refuse(EVN))
    add("pipeline/trace-read-only", P("--stages", "2", EV, ro + "/t.csv"), refuse(EVN))
    add("pipeline/trace-full-disk", P("--stages", "2", EV,
                                      (full + "/t.csv") if fx.mountable else full),
        refuse(EVN))
    if fx.nearly_full is not None:
        add("pipeline/trace-disk-fills-while-writing",
            P("--stages", "4", "--microbatches", "20000", "--replications", "2", EV,
              str(fx.nearly_full / "t.csv")), fail(EVN.replace("_", " ")), timeout=120,
            note="one line; the simulated results are printed first")
    add("pipeline/trace-with-vector", P("--engine", "vector", EV, str(T / "t.csv")),
        refuse(EVN))
    # inapplicable flags
    add("pipeline/placement-without-topology", P("--placement", "spread"), refuse("placement"))
    add("pipeline/show-placement-without-topology", P("--show-placement"), refuse("show_placement"))
    add("pipeline/no-layout-latency-without-topology", P("--no-layout-latency"),
        refuse("no_layout_latency"))
    add("pipeline/shape-with-exponential", P("--shape", "0.7"), refuse("shape"))
    add("pipeline/stage-time-shape-deterministic", P("--stage-time", "1", "--stage-time-shape", "2"),
        refuse("stage_time_shape"))
    add("pipeline/workers-with-serial", P("--workers", "2"), refuse("workers"))
    add("pipeline/rate-with-back-to-back", P("--stage-time", "1", "--arrival", "back_to_back",
                                             "--rate", "3"), refuse("rate"))
    add("pipeline/domain-outage-with-topology", P("--topology", "datacenter:regions=2,racks=2,hosts=4",
                                                  "--stages", "4", "--domain-outage", "0.1"),
        refuse("domain_outage"))
    add("pipeline/latency-with-topology", P("--topology", "datacenter:regions=2,racks=2,hosts=4",
                                            "--stages", "4", "--latency", "0.5"), refuse("latency"))
    add("pipeline/transfer-size-with-infinite-bandwidth", P("--transfer-size", "5"),
        refuse("transfer_size"))
    add("pipeline/one-replication-no-interval", P("--stages", "4", "--microbatches", "200",
                                                  "--replications", "1"), ok("no interval"),
        note="an infinite interval is not agreement")
    add("pipeline/ctrl-c", P("--stages", "48", "--microbatches", "3000000", "--engine", "des",
                             "--replications", "1"), Expect("interrupt", "interrupted"),
        interrupt_after=4.0, timeout=30,
        note="8.6e7 expected transitions: under the budget, many minutes (1e8 micro-batches "
             "are refused as a runaway)")
    add("pipeline/des-runaway-microbatches", P("--stages", "48", "--microbatches", "100000000",
                                               "--engine", "des"), refuse("microbatches"))

    # -- design -----------------------------------------------------------------
    D = lambda *a: dtsim("design", *a)  # noqa: E731
    add("design/stages-zero", D("--stages", "0"), refuse("stages"))
    add("design/availability-above-1", D("--availability", "2"), refuse("availability"))
    add("design/target-drop-zero", D("--target-drop", "0"), refuse("target_drop"))
    add("design/target-drop-string", D("--target-drop", "abc"), refuse("target_drop"))
    add("design/skip-budget-above-L", D("--stages", "4", "--skip-budget", "5"), refuse("skip_budget"))
    add("design/penalty-unknown", D("--skip-penalty", "0.1", "--penalty", "bogus"), refuse("penalty"))
    add("design/max-replicas-zero", D("--max-replicas", "0"), refuse("max_replicas"))
    add("design/stages-1e9", D("--stages", big), ok("replicas"), timeout=60,
        note="a closed form: answered at once, nothing to refuse")
    add("design/microbatches-without-verify", D("--microbatches", "100"), refuse("microbatches"))
    add("design/replications-without-verify", D("--replications", "3"), refuse("replications"))
    add("design/seed-without-verify", D("--seed", "3"), refuse("seed"))
    add("design/workers-without-verify", D("--workers", "2"), refuse("workers"))
    add("design/penalty-without-skip-penalty", D("--penalty", "additive"), refuse("penalty"))
    add("design/target-drop-in-optimal-mode", D("--skip-penalty", "0.1", "--target-drop", "0.01"),
        refuse("target_drop"))
    add("design/verify-replications-zero", D("--verify", "--replications", "0"), refuse("replications"))
    add("design/verify-workers-with-serial", D("--verify", "--workers", "2"), refuse("workers"))
    add("design/verify-one-replication", D("--stages", "4", "--availability", "0.8",
                                           "--target-drop", "0.05", "--verify", "--replications",
                                           "1", "--microbatches", "2000"), ok("no interval"))

    # -- failures ---------------------------------------------------------------
    F = lambda *a: dtsim("failures", *a)  # noqa: E731
    add("failures/workers-zero", F("--workers", "0"), refuse("workers"))
    add("failures/workers-1e9", F("--workers", big), refuse("workers"), timeout=60, note="memory")
    add("failures/domains-zero", F("--domains", "0"), refuse("domains"))
    add("failures/availability-negative", F("--availability", "-1"), refuse("availability"))
    add("failures/horizon-zero", F("--horizon", "0"), refuse("horizon"))
    # finite values whose run would simulate billions of outages (was a runaway: hours)
    add("failures/runaway-horizon", F("--horizon", "1e9"), refuse("horizon"),
        note="3.2e9 expected up/down transitions a replication, budget 1e8")
    add("failures/runaway-downtime", F("--mean-downtime", "1e-6"), refuse("mean_downtime"))
    add("failures/runaway-domain-downtime", F("--availability", "1", "--domain-outage", "0.2",
                                              "--domain-downtime", "1e-6"),
        refuse("domain_mean_downtime"))
    add("failures/horizon-3e6-ctrl-c", F("--horizon", "3e6", "--replications", "1"),
        Expect("interrupt", "interrupted"), interrupt_after=4.0, timeout=30,
        note="under the transition budget but minutes long: Ctrl-C stops it in one line")
    add("failures/horizon-1e15", F("--horizon", "1e15"), refuse("horizon"),
        note="used to fit in memory and never end (Ctrl-C); now a runaway refused at once")
    add("failures/runaway-workers", F("--workers", "10000000", "--horizon", "100"),
        refuse("workers"))
    add("failures/distribution-unknown", F("--distribution", "bogus"), refuse("distribution"))
    add("failures/replications-zero", F("--replications", "0"), refuse("replications"))
    add("failures/replications-1e9", F("--horizon", "10", "--replications", big),
        refuse("replications"), timeout=60)
    add("failures/executor-unknown", F("--executor", "bogus"), refuse("executor"))
    add("failures/trace-missing", F("--trace", str(T / "missing.csv")), refuse("trace|failure_trace"))
    add("failures/trace-binary", F("--trace", str(fx.binary)), refuse("trace|failure_trace"),
        note="--trace is the alias of --failure-trace")
    add("failures/trace-is-dir", F("--trace", str(fx.dir)), refuse("trace|failure_trace"))
    add("failures/shape-with-exponential", F("--shape", "0.7"), refuse("shape"))
    add("failures/availability-with-trace", F("--trace", str(fx.trace_ok), "--workers", "2",
                                              "--availability", "0.5"), refuse("availability"))
    add("failures/mean-downtime-with-trace", F("--trace", str(fx.trace_ok), "--workers", "2",
                                               "--mean-downtime", "3"), refuse("mean_downtime"))
    add("failures/one-replication-no-interval", F("--horizon", "100", "--replications", "1"),
        ok("no interval"))

    # -- gossip -----------------------------------------------------------------
    G = lambda *a: dtsim("gossip", *a)  # noqa: E731
    add("gossip/nodes-odd-complete", G("--nodes", "15"), refuse("nodes"))
    add("gossip/nodes-1e9", G("--nodes", big), refuse("nodes"), timeout=60, note="memory")
    add("gossip/rounds-1e9", G("--rounds", big), refuse("rounds"), timeout=60, note="memory")
    add("gossip/dim-1e9", G("--dim", big), refuse("dim"), timeout=60, note="memory")
    add("gossip/ring-1e9", G("--topology", "ring", "--nodes", big), refuse("nodes"), timeout=60)
    add("gossip/rounds-zero", G("--rounds", "0"), refuse("rounds"))
    add("gossip/protocol-unknown", G("--protocol", "bogus"), refuse("protocol"))
    add("gossip/adversary-unknown", G("--adversary", "bogus"), refuse("adversary"))
    named = fx._write("gossip/named.edges", "lab-a-01 lab-a-02\nlab-a-02 lab-b-01\nlab-b-01 lab-a-01\n")
    add("gossip/adversary-nodes-unknown-name",
        G("--topology", str(named), "--adversary", "stubborn", "--adversary-nodes", "lab-c-09"),
        refuse("adversary_nodes"))
    add("gossip/adversary-nodes-by-name-ok",
        G("--topology", str(named), "--adversary", "stubborn", "--adversary-nodes", "lab-b-01",
          "--rounds", "5", "--replications", "2"), ok("gossip"))
    # (audit 7) an empty item of a list was dropped silently: 1,,2 ran as 1,2 and 1, as 1
    for id_, opt, text in (("adversary-nodes-empty-item", "--adversary-nodes", "1,,2"),
                           ("adversary-nodes-trailing-comma", "--adversary-nodes", "1,"),
                           ("adversary-nodes-empty-name", "--adversary-nodes", "lab-b-01,,"),
                           ("stubborn-values-empty-item", "--stubborn-values", "1,,2")):
        extra = ("--topology", str(named)) if "name" in id_ else ("--num-adversaries", "2") \
            if opt == "--stubborn-values" else ()
        add(f"gossip/{id_}", G(*extra, "--adversary", "stubborn", opt, text),
            refuse(opt[2:].replace("-", "_")))
    add("gossip/step-time-empty-item", G("--objective", "quadratic", "--step-time", "1,,2"),
        refuse("step_time"))
    add("gossip/num-adversaries-too-many", G("--adversary", "stubborn", "--num-adversaries", "16"),
        refuse("num_adversaries"))
    add("gossip/noise-negative", G("--noise", "-1"), refuse("noise"))
    add("gossip/clip-and-adaptive", G("--clip", "1", "--adaptive-clip"), refuse("clip"))
    add("gossip/topology-unknown", G("--topology", "bogus"), refuse("topology"))
    add("gossip/topology-bad-param", G("--topology", "ring:n=abc"), refuse("n"))
    add("gossip/nodes-contradict-spec", G("--topology", "ring:n=8", "--nodes", "10"), refuse("nodes"))
    add("gossip/engine-vector-async", G("--protocol", "async", "--engine", "vector"), refuse("engine"))
    add("gossip/replications-1e9", G("--rounds", "2", "--replications", big), refuse("replications"),
        timeout=60)
    add("gossip/adversary-value-without-adversary", G("--adversary-value", "5"),
        refuse("adversary_value"))
    add("gossip/wake-rate-with-matching", G("--wake-rate", "2"), refuse("wake_rate"))
    add("gossip/availability-with-matching", G("--availability", "0.5"), refuse("availability"))
    add("gossip/mean-downtime-with-matching", G("--mean-downtime", "2"), refuse("mean_downtime"))
    add("gossip/topology-seed-deterministic", G("--topology-seed", "3"), refuse("topology_seed"))
    add("gossip/record-every-zero", G("--record-every", "0"), refuse("record_every"))
    add("gossip/burn-in-negative", G("--burn-in", "-1"), refuse("burn_in"))
    add("gossip/workers-with-serial", G("--workers", "2"), refuse("workers"))
    add("gossip/size-with-infinite-bandwidth", G("--size", "5"), refuse("size"))
    add("gossip/size-with-finite-bandwidth", G("--topology", "ring:n=8,bandwidth=2", "--size", "3",
                                              "--rounds", "3", "--replications", "2"), ok("gossip"),
        timeout=120, note="the first case to compile its numba kernel in a fresh clone (18 s "
                          "beside the slow suite; 30 s hit the default limit under more load)")

    # -- topologies -------------------------------------------------------------
    TP = lambda *a: dtsim("topologies", *a)  # noqa: E731
    add("topologies/unknown-family", TP("bogus"), refuse("topology"))
    add("topologies/ring-1e12", TP("ring", "--nodes", "1000000000000"), refuse("nodes"), timeout=60,
        note="memory")
    add("topologies/ring-n-1e9-spec", TP("ring:n=1000000000"), refuse("n"), timeout=60)
    add("topologies/torus-huge", TP("torus:dims=100000x100000"), refuse("dims"), timeout=60)
    add("topologies/datacenter-huge", TP("datacenter:regions=1000,racks=1000,hosts=1000"),
        refuse("hosts"), timeout=60)
    add("topologies/geo-regions-huge-hosts-one", TP("geo:regions=100000,hosts=1"),
        refuse("regions"), timeout=60, note="used to name 'hosts' with its value 1")
    add("topologies/geo-one-node", TP("geo:regions=1,hosts=1"), refuse("topology"),
        note="used to end in a numpy traceback")
    add("topologies/ring-bad-n", TP("ring:n=-3"), refuse("n"))
    add("topologies/unknown-param", TP("ring:n=8,bogus=1"), refuse("topology"),
        note="the spec is the parameter; the message lists the family's parameters")
    add("topologies/graph-file-binary", TP(str(fx.binary_graph)), refuse("topology"))
    add("topologies/json-graph-directed", TP(str(fx.json_graph_directed)), refuse("topology"))
    add("topologies/json-graph-link-to-no-node", TP(str(fx.json_graph_dangling)),
        refuse("topology"))
    add("topologies/json-not-node-link", TP(str(fx.json_not_graph)), refuse("topology"),
        note="a JSON file of another kind (a fleet): its first node has no id")
    add("topologies/stages-too-many", TP("datacenter:regions=1,racks=2,hosts=2", "--stages", "50"),
        refuse("stages"))
    add("topologies/policy-unknown", TP("datacenter:regions=1,racks=2,hosts=4", "--stages", "2",
                                        "--policy", "bogus"), refuse("policy"))
    add("topologies/replicas-without-stages", TP("ring:n=8", "--replicas", "3"), refuse("replicas"))
    add("topologies/policy-without-stages", TP("ring:n=8", "--policy", "spread"), refuse("policy"))
    add("topologies/nodes-without-spec", TP("--nodes", "8"), refuse("nodes"))
    add("topologies/stages-without-spec", TP("--stages", "2"), refuse("stages"))
    add("topologies/seed-deterministic-family", TP("ring:n=8", "--seed", "3"), refuse("seed"))
    add("topologies/seed-random-family", TP("random_regular:n=8", "--seed", "3"), ok("edges"))

    # -- run ----------------------------------------------------------------------
    R = lambda *a: dtsim("run", *a)  # noqa: E731
    good = str(exp["good"])
    add("run/missing-file", R(str(T / "missing.py")), refuse("experiment"))
    add("run/not-python", R(str(exp["not_py"])), refuse("experiment"))
    add("run/syntax-error", R(str(exp["syntax"]), "--out", str(T / "o1")), refuse("experiment"))
    add("run/raises-at-import", R(str(exp["raises"]), "--out", str(T / "o2")), refuse("experiment"))
    add("run/sys-exit-7-at-import", R(str(exp["exit7"]), "--out", str(T / "o3")), refuse("experiment"))
    add("run/no-model", R(str(exp["nomodel"]), "--out", str(T / "o4")), refuse("experiment"))
    add("run/factor-not-a-field", R(str(exp["badfactor"]), "--out", str(T / "o5")), refuse("availabilty"))
    add("run/factor-bad-value", R(str(exp["badvalue"]), "--out", str(T / "o6")), refuse("availability"))
    add("run/factor-text-with-unit", R(str(exp["unitvalue"]), "--out", str(T / "o6u")),
        refuse("param_size"), note="user trial 3: said must be >= 0: '20GB'; TrainingConfig "
        "reads units since user trial 15 (20GB is 2e10): an unknown unit is refused")
    add("run/factor-time-with-unit-off-the-second", R(str(exp["unithour"]), "--out",
                                                      str(T / "o6h")), refuse("hour"),
        note="a time with a unit is in seconds: refused on a clock of hour=60, as --hour")
    add("run/model-refuses-its-point", R(str(exp["modelrefuses"]), "--out", str(T / "o6m"),
                                         "--executor", "serial"),
        refuse("sync"), allow_work=True,
        note="user trial 5: a config built in model, known once its task runs; names the point")
    add("run/replications-zero", R(str(exp["zeroreps"]), "--out", str(T / "o7")), refuse("REPLICATIONS"))
    add("run/replications-string", R(str(exp["strreps"]), "--out", str(T / "o8")), refuse("REPLICATIONS"))
    add("run/replications-1e12", R(str(exp["reps"]), "--out", str(T / "o9"), "--executor", "serial"),
        refuse("REPLICATIONS"), timeout=60)
    add("run/grid-1e9-points", R(str(exp["grid"]), "--out", str(T / "o10"), "--executor", "serial"),
        refuse("FACTORS"), timeout=90, note="a 10^9-point grid is refused, not expanded")
    add("run/empty-factor", R(str(exp["emptyfactor"]), "--out", str(T / "o11")),
        refuse("factors['availability']"))
    add("run/base-numeric-string", R(str(exp["strbase"]), "--out", str(T / "o12")), refuse("availability"))
    add("run/quick-bad-key", R(str(exp["badquick"]), "--quick", "--out", str(T / "o13")), refuse("QUICK"))
    add("run/unpicklable-base", R(str(exp["unpicklable"]), "--out", str(T / "o14"), "--executor",
                                  "local", "--workers", "1"), refuse("base|gen"),
        note="'gen' is the BASE key whose value cannot be sent to a worker")
    add("run/name-escapes-out", R(str(exp["escape"]), "--executor", "serial", "--quiet"),
        refuse("NAME"), cwd=str(T))
    add("run/name-absolute", R(str(exp["absname"]), "--executor", "serial", "--quiet"),
        refuse("NAME"), cwd=str(T))
    add("run/model-returns-int", R(str(exp["badreturn"]), "--out", str(T / "o15"), "--executor",
                                   "serial", "--quiet"), fail("failed"))
    add("run/quick-without-QUICK", R(good, "--quick", "--executor", "serial", "--out",
                                     str(T / "o24")), refuse("quick"))
    add("run/executor-unknown", R(good, "--executor", "bogus", "--out", str(T / "o16")), refuse("executor"))
    add("run/workers-zero", R(good, "--workers", "0", "--out", str(T / "o17")), refuse("workers"))
    add("run/batch-zero", R(good, "--batch", "0", "--out", str(T / "o18")), refuse("batch"))
    add("run/workers-with-serial", R(good, "--executor", "serial", "--workers", "2",
                                     "--out", str(T / "o19")), refuse("workers"))
    add("run/scheduler-with-local", R(good, "--executor", "local", "--scheduler",
                                      "tcp://127.0.0.1:8786", "--out", str(T / "o20")),
        refuse("scheduler"))
    add("run/scheduler-notaurl", R(good, "--scheduler", "notaurl", "--out", str(T / "o21")),
        refuse("scheduler"), timeout=12, note="one line in about 5 s")
    add("run/scheduler-unroutable", R(good, "--scheduler", "tcp://127.0.0.1:1", "--out",
                                      str(T / "o22")), refuse("scheduler"), timeout=12,
        note="one line in about 5 s")
    add("run/out-is-file", R(good, "--out", str(fx.file)), refuse("out"))
    add("run/out-under-file", R(good, "--out", fx.under_file), refuse("out"))
    add("run/out-read-only", R(good, "--out", ro + "/res"), refuse("out"))
    add("run/out-full-disk", R(good, "--out", (full + "/res") if fx.mountable else full,
                               "--executor", "serial"), refuse("out"))
    if fx.ro_results is not None:
        add("run/out-read-only-existing-results", R(good, "--out", str(fx.ro_results / "res"),
                                                    "--executor", "serial"), refuse("out"),
            note="an existing folder whose .lock cannot be opened")
    add("run/two-at-one-instant", R(good, "--executor", "serial", "--quiet", "--out",
                                    str(T / "race")), Expect("race"), parallel=8, timeout=120,
        note="8 synchronised starts into one new folder: one runs, the others refuse in one line")
    add("run/dask-clean-shutdown", R(good, "--executor", "dask", "--workers", "1", "--quiet",
                                     "--out", str(T / "o23")), ok("good"), timeout=120,
        note="no shutdown tracebacks on stderr")

    # -- reproduce ----------------------------------------------------------------
    RP = lambda *a: dtsim("reproduce", *a)  # noqa: E731
    add("reproduce/out-is-file", RP("--quick", "--out", str(fx.file)), refuse("out"))
    add("reproduce/out-read-only", RP("--quick", "--out", ro + "/rep"), refuse("out"))
    add("reproduce/out-full-disk", RP("--quick", "--out", (full + "/rep") if fx.mountable else full),
        refuse("out"))
    add("reproduce/no-study-files", RP("--quick", "--experiments", str(fx.empty_dir), "--out",
                                       str(T / "r1")), refuse("experiments"))
    add("reproduce/experiments-missing", RP("--experiments", str(T / "nope")), refuse("experiments"))
    add("reproduce/executor-unknown", RP("--executor", "bogus"), refuse("executor"))
    add("reproduce/workers-zero", RP("--workers", "0"), refuse("workers"))
    add("reproduce/workers-with-serial", RP("--executor", "serial", "--workers", "2",
                                            "--out", str(T / "r2")), refuse("workers"))
    add("reproduce/scheduler-notaurl", RP("--quick", "--scheduler", "notaurl", "--out",
                                          str(T / "r3")), refuse("scheduler"), timeout=30,
        note="refused before the study files are imported")

    # -- plot -------------------------------------------------------------------
    PL = lambda *a: dtsim("plot", *a)  # noqa: E731
    add("plot/missing-folder", PL(str(T / "nope")), refuse("OUTDIR"))
    add("plot/not-a-results-folder", PL(str(fx.empty_dir)), refuse("OUTDIR"))
    add("plot/a-file", PL(str(fx.file)), refuse("OUTDIR"))
    add("plot/experiment-missing", PL(str(T / "nope"), "--experiment", str(T / "x.py")), refuse("OUTDIR"))

    # -- bench ------------------------------------------------------------------
    B = lambda *a: dtsim("bench", *a)  # noqa: E731
    add("bench/parts-empty", B("--parts", "", "--out", "-"), refuse("parts"), timeout=20,
        note="was the whole suite")
    add("bench/parts-commas", B("--parts", ",", "--out", "-"), refuse("parts"), timeout=20)
    add("bench/parts-unknown", B("--parts", "bogus", "--out", "-"), refuse("parts"))
    add("bench/out-is-dir", B("--quick", "--parts", "simpy", "--out", str(fx.dir)), refuse("out"),
        timeout=20, note="checked before the benchmark runs")
    add("bench/out-under-file", B("--quick", "--parts", "simpy", "--out", fx.under_file + "/b.jsonl"),
        refuse("out"), timeout=20)
    add("bench/out-read-only", B("--quick", "--parts", "simpy", "--out", ro + "/b.jsonl"),
        refuse("out"), timeout=20)
    add("bench/out-full-disk", B("--quick", "--parts", "simpy", "--out",
                                 (full + "/b.jsonl") if fx.mountable else full),
        refuse("out"), timeout=20)
    add("bench/sweep-no-dask-tracebacks", B("--quick", "--parts", "sweep", "--out", "-"),
        benched("sweep"), timeout=900, note="a successful run prints no Dask shutdown tracebacks")

    # -- the public API -------------------------------------------------------------
    add("api/PipelineConfig-availability-string", api(
        "import sim; sim.PipelineConfig(availability='0.5')"), refuse("availability"))
    add("api/PipelineConfig-stages-string", api(
        "import sim; sim.PipelineConfig(stages='4')"), refuse("stages"))
    add("api/PipelineConfig-stages-float", api(
        "import sim; sim.PipelineConfig(stages=4.0)"), refuse("stages"))
    add("api/PipelineConfig-stages-bool", api(
        "import sim; sim.PipelineConfig(stages=True)"), refuse("stages"))
    add("api/PipelineConfig-stages-1e9", api(
        "import sim; sim.PipelineConfig(stages=10**9)"), refuse("stages"), timeout=60)
    add("api/PipelineConfig-rate-string", api(
        "import sim; sim.PipelineConfig(rate='2')"), refuse("rate"))
    add("api/PipelineConfig-skip-penalty-string", api(
        "import sim; sim.PipelineConfig(skip_penalty='0.1')"), refuse("skip_penalty"))
    add("api/PipelineConfig-latency-string", api(
        "import sim; sim.PipelineConfig(stages=3, latency='1')"), refuse("latency"))
    add("api/PipelineConfig-replicas-tuple-string", api(
        "import sim; sim.PipelineConfig(stages=2, replicas=('2', 2))"), refuse("replicas"))
    add("api/PipelineConfig-shape-string", api(
        "import sim; sim.PipelineConfig(failure_distribution='weibull', failure_shape='0.7')"),
        refuse("failure_shape"))
    add("api/TrainingConfig-allreduce-buckets-alone", api(
        "from sim.training import TrainingConfig; TrainingConfig(allreduce_buckets=((1.0, 2.0),))"),
        refuse("allreduce_buckets"), note="a plan's overlapped buckets without its times")
    add("api/TrainingConfig-trace-hosts-number", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, replicas=2, "
        "trace_hosts=(('h0', 3),))"), refuse("trace_hosts"),
        note="a plan's host names for a trace replayed by name (usertrial16)")
    add("api/TrainingConfig-trace-hosts-shape", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, replicas=2, "
        "trace_hosts=(('h0',),))"), refuse("trace_hosts"))
    add("api/TrainingConfig-group-steps-without-diloco", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, replicas=2, "
        "group_steps=((('optimizer_times', (1.0,)),),))"), refuse("group_steps"),
        note="a DiLoCo group's step times without DiLoCo")
    add("api/TrainingConfig-group-steps-count", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, replicas=2, steps=2, "
        "sync='diloco:every=1', group_steps=((('optimizer_times', (1.0,)),),))"),
        refuse("group_steps"), note="one entry for 2 groups")
    add("api/TrainingConfig-group-steps-field", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, replicas=2, steps=2, "
        "sync='diloco:every=1', group_steps=((('steps', 3),), (('steps', 3),)))"),
        refuse("group_steps"), note="a field that is no step time of a group")
    add("api/TrainingConfig-allreduce-buckets-negative", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=1, schedule='1f1b', allreduce_times=(1.0,), "
        "param_size=0.0, sync='allreduce:overlap=backward', "
        "allreduce_buckets=(((1.0, -2.0),),))"), refuse("allreduce_buckets"))
    add("api/TrainingConfig-allreduce-buckets-rows", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=2, schedule='1f1b', allreduce_times=(1.0, 1.0), "
        "param_size=0.0, sync='allreduce:overlap=backward', "
        "allreduce_buckets=(((1.0, 2.0),),))"), refuse("allreduce_buckets"))
    rg = ("from sim.training import TrainingConfig; TrainingConfig(stages=2, schedule='1f1b', "
          "replica_times=(((1.0, 1.0),), ((1.0, 1.0),)), ")
    add("api/TrainingConfig-recv-gather-times-overlapped", api(
        rg + "recv_gather_times=((1.0,), (0.0,)))"), refuse("recv_gather_times"),
        note="DeepSpeed 0.3.13's all-gather before a blocking gradient receive")
    add("api/TrainingConfig-recv-gather-times-last-stage", api(
        rg + "p2p='blocking', recv_gather_times=((1.0,), (0.5,)))"), refuse("recv_gather_times"),
        note="the last stage receives no gradient")
    add("api/TrainingConfig-recv-gather-times-negative", api(
        rg + "p2p='blocking', recv_gather_times=((-1.0,), (0.0,)))"), refuse("recv_gather_times"))
    add("api/program_makespan-gather-missing", api(
        "from sim.analytic.training import program_makespan; "
        "from sim.training.schedules import device_program; program_makespan("
        "[device_program('1f1b', 2, 2, j, blocking=True, recv_gather=True) for j in (0, 1)], "
        "[1.0, 1.0], [1.0, 1.0], [0.0], [0.0], blocking=True)"), refuse("gather"),
        note="programs with an all-gather need its times")
    add("api/TrainingConfig-no-barrier-times-on-a-network", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=2, replicas=2, "
        "schedule='1f1b', allreduce_times=(1.0, 1.0), allreduce_barrier=False, "
        "network='ring:n=8,bandwidth=10,latency=0.01')"), refuse("allreduce_barrier"),
        note="over a network a plan's collectives are flows of its sizes")
    add("api/TrainingConfig-tied-allreduce-times-length", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=2, replicas=2, "
        "schedule='1f1b', allreduce_times=(1.0, 1.0), tied_allreduce_time=2.0, "
        "tied_allreduce_times=(2.0, 1.0, 1.0))"), refuse("tied_allreduce_times"),
        note="one per pipeline")
    add("api/TrainingConfig-tied-allreduce-times-not-the-max", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=2, replicas=2, "
        "schedule='1f1b', allreduce_times=(1.0, 1.0), tied_allreduce_time=2.0, "
        "tied_allreduce_times=(1.0, 1.5))"), refuse("tied_allreduce_times"),
        note="tied_allreduce_time is their largest")
    add("api/TrainingConfig-tied-allreduce-times-negative", api(
        "from sim.training import TrainingConfig; TrainingConfig(stages=2, replicas=2, "
        "schedule='1f1b', allreduce_times=(1.0, 1.0), tied_allreduce_time=2.0, "
        "tied_allreduce_times=(2.0, -1.0))"), refuse("tied_allreduce_times"))
    add("api/GossipConfig-noise-string", api(
        "import sim; sim.GossipConfig(noise='0.5')"), refuse("noise"))
    add("api/GossipConfig-nodes-1e9", api(
        "import sim; sim.GossipConfig(nodes=10**9)"), refuse("nodes"), timeout=60)
    add("api/GossipConfig-rounds-1e12", api(
        "import sim; sim.GossipConfig(rounds=10**12)"), refuse("rounds"), timeout=60)
    add("api/GossipConfig-dim-1e12", api(
        "import sim; sim.GossipConfig(dim=10**12)"), refuse("dim"), timeout=60)
    add("api/GossipConfig-availability-string", api(
        "import sim; sim.GossipConfig(protocol='async', availability='0.5')"), refuse("availability"))
    add("api/GossipConfig-adversary-value-string", api(
        "import sim; sim.GossipConfig(adversary='stubborn', adversary_value='x')"),
        refuse("adversary_value"))
    add("api/ClusterConfig-availability-string", api(
        "import sim; sim.ClusterConfig(availability='0.9')"), refuse("availability"))
    add("api/ClusterConfig-horizon-string", api(
        "import sim; sim.ClusterConfig(horizon='100')"), refuse("horizon"))
    add("api/ClusterConfig-workers-1e12", api(
        "import sim; sim.ClusterConfig(workers=10**12)"), refuse("workers"), timeout=60)
    add("api/ClusterConfig-trace-binary", api(
        f"import sim; sim.ClusterConfig(workers=1, trace={str(fx.binary)!r})"), refuse("trace"))
    add("api/read_trace-binary", api(
        f"import sim; sim.read_trace({str(fx.binary)!r})"), refuse("trace"))
    add("api/mean_ci-nan-says-so", api(
        "import math, sim; print(sim.mean_ci([1.0, math.nan, 3.0]))"), ok("1 NaN left out"),
        note="a NaN left out is counted (Estimate.dropped) and said")
    add("api/mean_ci-nan-raise", api(
        "import math, sim; sim.mean_ci([1.0, math.nan, 3.0], nan='raise')"), refuse("values"))
    add("api/mean_ci-confidence", api(
        "import sim; sim.mean_ci([1.0, 2.0], confidence=1.5)"), refuse("confidence"))
    add("api/replicate-replications-zero", api(
        "import sim; sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=0, seed=0)"), refuse("replications"))
    add("api/replicate-replications-1e12", api(
        "import sim; sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=10**12, seed=0)"), refuse("replications"), timeout=60)
    add("api/replicate-executor-unknown", api(
        "import sim; sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=2, seed=0, executor='bogus')"), refuse("executor"))
    add("api/Streams-negative-seed", api("import sim; sim.Streams(-1)"), refuse("seed"))
    add("api/numpy-warnings-one-replication", api(
        "import sim, warnings; warnings.simplefilter('default'); "
        "sim.summarize(sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=1, seed=0))"), ok(), note="no numpy RuntimeWarning on stderr")
    add("api/numpy-warnings-gossip", api(
        "import sim, warnings; warnings.simplefilter('default'); "
        "sim.replicate(sim.gossip_model, sim.GossipConfig(rounds=3, noise=0.0), replications=1, seed=0)"),
        ok(), note="no numpy RuntimeWarning on stderr")
    add("api/numpy-warnings-pipeline", api(
        "import sim, warnings; warnings.simplefilter('default'); "
        "sim.summarize(sim.replicate(sim.pipeline_model, sim.PipelineConfig(stages=2, "
        "availability=0.0, microbatches=10), replications=2, seed=0))"),
        ok(), note="no numpy RuntimeWarning on stderr (nothing delivered)")

    # -- whole-command stderr hygiene -------------------------------------------------
    add("pipeline/nothing-delivered-no-warnings", P("--stages", "2", "--availability", "0",
                                                    "--microbatches", "50", "--replications", "2",
                                                    "--engine", "des"),
        ok("drop rate"), note="no numpy RuntimeWarning")
    add("gossip/overflow-noise", G("--nodes", "10", "--rounds", "5", "--noise", "1e200"),
        refuse("noise"), note="was an OverflowError traceback in the prediction")
    add("gossip/no-warnings-noise-zero", G("--rounds", "4", "--replications", "2"), ok("gossip"),
        note="no numpy RuntimeWarning")

    # -- train (when present) -------------------------------------------------------
    if _has_command("train"):
        TR = lambda *a: dtsim("train", *a)  # noqa: E731
        add("train/stages-zero", TR("--stages", "0"), refuse("stages"))
        # a value whose run would overflow to inf (TIME_LIMIT: the run's time bound <= 1e300 s)
        add("train/overflow-latency", TR("--latency", "1e308"), refuse("latency"))
        add("train/overflow-latency-one-hop", TR("--latency", "1,1e308,1"), refuse("latency"))
        add("train/overflow-latency-ok", TR("--latency", "1e280", "--replications", "1"),
            ok("step time"), note="large but finite: runs")
        add("train/overflow-forward-time", TR("--forward-time", "1e307"), refuse("forward_time"))
        add("train/overflow-backward-ratio", TR("--backward-ratio", "1e308"),
            refuse("backward_ratio"))
        add("train/overflow-backward-time", TR("--backward-time", "1e306"),
            refuse("backward_times"))
        add("train/overflow-optimizer-time", TR("--optimizer-time", "1e308"),
            refuse("optimizer_time"))
        add("train/overflow-bandwidth", TR("--bandwidth", "1e-308", "--activation-size", "1"),
            refuse("bandwidth"))
        add("train/overflow-activation-size", TR("--bandwidth", "1", "--activation-size", "1e305"),
            refuse("activation_size"))
        add("train/overflow-checkpoint-cost", TR("--checkpoint-every", "1", "--checkpoint-cost",
                                                 "1e308", "--restart-cost", "1"),
            refuse("checkpoint_cost"))
        add("train/overflow-restart-cost", TR("--checkpoint-every", "1", "--restart-cost",
                                              "1e308"), refuse("restart_cost"))
        add("train/overflow-samples", TR("--samples-per-microbatch", "1e308"),
            refuse("samples_per_microbatch"))
        add("train/overflow-speed-spread", TR("--speed-spread", "1e308"), refuse("speed_spread"),
            note="was a ZeroDivisionError in every replication")
        add("train/stages-1e9", TR("--stages", big), refuse("stages"), timeout=60, note="memory")
        add("train/replicas-1e9", TR("--replicas", big), refuse("replicas"), timeout=60,
            note="memory")
        add("train/microbatches-1e9", TR("--microbatches-per-step", big), refuse("microbatches"),
            timeout=60, note="memory: a step's microbatches")
        add("train/replications-1e9", TR("--replications", big), refuse("replications"), timeout=60)
        add("train/schedule-unknown", TR("--schedule", "bogus"), refuse("schedule"))
        add("train/availability-above-1", TR("--availability", "2"), refuse("availability"))
        add("train/bandwidth-zero", TR("--bandwidth", "0"), refuse("bandwidth"))
        add("train/speeds-missing", TR("--speeds", str(T / "nope.csv")), refuse("speeds"))
        add("train/speeds-binary", TR("--speeds", str(fx.binary)), refuse("speeds"))
        add("train/failure-trace-missing", TR("--failure-trace", str(T / "nope.csv")),
            refuse("failure_trace"))
        add("train/failure-trace-binary", TR("--failure-trace", str(fx.binary)),
            refuse("failure_trace"))
        add("train/skip-budget-above-L", TR("--skip-budget", "9"), refuse("skip_budget"))
        add("train/engine-unknown", TR("--engine", "bogus"), refuse("engine"))
        add("train/engine-compiled-gpipe", TR("--schedule", "gpipe", "--engine", "compiled"),
            refuse("engine"))
        add("train/placement-without-topology", TR("--placement", "spread"), refuse("placement"))
        add("train/failure-shape-with-exponential", TR("--failure-shape", "0.7"),
            refuse("failure_shape"))
        add("train/workers-with-serial", TR("--workers", "2"), refuse("workers"))
        add("train/arrival-rate-when-saturated", TR("--arrival-rate", "2"), refuse("arrival_rate"))
        add("train/replace-time-without-mtbf", TR("--replace-time", "3"), refuse("replace_time"))
        add("train/checkpoint-cost-without-checkpoints", TR("--checkpoint-cost", "2"),
            refuse("checkpoint_cost"))
        add("train/domain-downtime-without-domain-outage", TR("--domain-downtime", "3"),
            refuse("domain_downtime"))
        # the time options take a unit, as --latency does (a bare number is the run's unit)
        add("train/mtbf-rate-unit", TR("--mtbf", "10Gbit/s"), refuse("mtbf"))
        add("train/mtbf-unknown-unit", TR("--mtbf", "2 parsecs"), refuse("mtbf"))
        add("train/forward-time-size-unit", TR("--forward-time", "1s,2GB"), refuse("forward_time"))
        add("train/max-time-negative-unit", TR("--max-time=-5h"), refuse("max_time"))
        add("train/stall-limit-size-unit", TR("--stall-limit", "5MB"), refuse("stall_limit"))
        add("train/time-unit-off-the-second", TR("--hour", "60", "--mtbf", "2h"), refuse("hour"),
            note="a unit converts to seconds; --hour 60 makes the time unit a minute")
        add("train/notice-unit-off-the-second", TR("--hour", "60", "--mtbf", "100",
                                                   "--strategy", "redundancy",
                                                   "--preemption-notice", "30s"), refuse("hour"))
        add("train/notice-size-unit", TR("--mtbf", "100", "--strategy", "redundancy",
                                         "--preemption-notice", "2GB"), refuse("preemption_notice"))
        add("train/trace-start-size-unit", TR("--failure-trace", "aws-g4dn-24h",
                                              "--trace-start", "5GB"), refuse("trace_start"),
            note="trace seconds take a time unit (6h); a size is not one")
        add("train/trace-block-unknown-unit", TR("--failure-trace", "aws-g4dn-24h",
                                                 "--trace-loop", "--trace-resample", "block",
                                                 "--trace-block", "2 fortnights"),
            refuse("trace_block"))
        # audit4: a number beyond the largest double reads the same with and without a unit
        # (inf where the option means none, refused where it takes a finite time), and inf
        # where only a finite time is taken names that rule (it said '>= 0: inf')
        run2 = ("--stages", "2", "--steps", "3", "--replications", "1")
        add("train/max-time-1e400s-is-no-limit", TR(*run2, "--max-time", "1e400s"),
            ok("throughput"), note="as 1e400 and inf (it was refused as not finite)")
        add("train/mtbf-1e400s-is-no-failure", TR(*run2, "--mtbf", "1e400s"), ok("throughput"))
        add("train/max-wait-1e400s-waits", TR(*run2, "--max-wait", "1e400s"), ok("throughput"))
        # audit5: a clock whose worker-hours overflow, and figures a run did not measure
        add("train/hour-1e-300", TR("--hour", "1e-300"), refuse("hour"),
            note="a time unit of 3.6e303 s: the run's hours overflow (it ran)")
        add("train/hour-denormal", TR("--hour", "5e-324"), refuse("hour"))
        add("train/hour-1e308-names-hour", TR("--hour", "1e308"), refuse("hour"),
            note="samples per hour overflow: it named samples_per_microbatch, not given")
        add("train/max-time-denormal-not-measured",
            TR(*run2, "--max-time", "5e-324", "--price", "1"),
            ok("samples per worker-hour not measured, cost $0"),
            note="no step done and 0 worker-hours: it printed 'bubble nan' and 'samples per "
            "worker-hour nan' (--json: null)")
        add("train/price-zero-per-dollar-not-measured", TR(*run2, "--price", "0"),
            ok("samples per dollar not measured"), note="it printed 'nan'")
        add("train/price-denormal-per-dollar-not-measured", TR(*run2, "--price", "1e-320"),
            ok("samples per dollar not measured"), note="samples over $2e-321: it printed 'inf'")
        add("train/restart-cost-1e400-plain", TR("--restart-cost", "1e400"),
            refuse("restart_cost"), note="as 1e400s: a finite time (it was read as inf)")
        add("train/forward-time-1e400-list", TR("--forward-time", "1,1e400"),
            refuse("forward_time"))
        add("train/trace-start-1e400-plain", TR("--failure-trace", "aws-g4dn-24h",
                                                "--trace-start", "1e400"), refuse("trace_start"))
        add("train/trace-start-inf", TR("--failure-trace", "aws-g4dn-24h", "--trace-start",
                                        "inf"), refuse("trace_start"),
            note="'a finite number >= 0: inf' (it said '>= 0: inf', a rule inf meets)")
        add("train/optimizer-time-inf", TR("--optimizer-time", "inf"), refuse("optimizer_time"))
        add("train/trace-block-1e-300", TR("--stages", "2", "--replicas", "2", "--restart-cost",
                                           "5", "--failure-trace", "aws-g4dn-24h",
                                           "--trace-loop", "--trace-resample", "block",
                                           "--trace-block", "1e-300"), refuse("trace_block"),
            timeout=60, note="10^305 blocks laid one by one: a hang before")
        add("failures/trace-block-1e-300", dtsim("failures", "--failure-trace", "aws-g4dn-24h",
                                                 "--trace-loop", "--trace-resample", "block",
                                                 "--trace-block", "1e-300"),
            refuse("trace_block"), timeout=60)
        add("train/ok-trace-start-unit", TR("--stages", "2", "--replicas", "2", "--steps", "5",
                                            "--replications", "1", "--restart-cost", "5",
                                            "--failure-trace", "aws-g4dn-24h",
                                            "--trace-start", "6h"), ok("throughput"))
        add("train/ok-time-units", TR("--stages", "2", "--steps", "20", "--replications", "2",
                                      "--mtbf", "2h", "--replace-time", "5min",
                                      "--checkpoint-every", "5", "--checkpoint-cost", "10s",
                                      "--restart-cost", "30s", "--forward-time", "1s,1500ms"),
            ok("throughput"))
        add("train/skip-penalty-without-skip-budget", TR("--skip-penalty", "0.1"),
            refuse("skip_penalty"))
        add("train/penalty-without-skip-penalty", TR("--penalty", "additive"), refuse("penalty"),
            note="audit 7: accepted and ignored (no skip loses quality), as dtsim design "
                 "refuses it")
        add("train/one-replication-no-interval",
            TR("--replications", "1", "--pass-time-distribution", "exponential"),
            ok("no interval"),
            note="random pass times: one replication has no interval (a config with nothing "
                 "random prints exact values instead, see train/one-replication-exact)")
        add("train/one-replication-exact", TR("--replications", "1"), ok("(exact)"),
            note="nothing random: every metric is exact, with or without replications")
        add("train/steps-1e12-ctrl-c", TR("--steps", "1000000000000", "--replications", "1"),
            Expect("interrupt", "interrupted"), interrupt_after=4.0, timeout=30,
            note="fits in memory but never ends: Ctrl-C stops it in one line")
    # -- issue 37: DiLoCo (--sync diloco:...), --value-bits, dtsim learners, geo pairs -------
    if _has_option("train", "--value-bits"):
        TR = lambda *a: dtsim("train", *a)  # noqa: E731
        D4 = ("--replicas", "4", "--microbatches-per-step", "4", "--steps", "8")
        # (the kinds and keys of every sync: the sync/ group of traffic_cases)
        add("train/diloco-key-of-allreduce", TR(*D4, "--sync", "diloco:every=4,bucket_size=2"),
            refuse("sync"))
        add("train/allreduce-key-of-diloco", TR("--sync", "allreduce:every=2"), refuse("sync"))
        add("train/diloco-without-every", TR(*D4, "--sync", "diloco"), refuse("sync"))
        add("train/diloco-unknown-option", TR(*D4, "--sync", "diloco:every=4,foo=1"),
            refuse("sync"))
        add("train/diloco-every-zero", TR(*D4, "--sync", "diloco:every=0"), refuse("sync"))
        add("train/diloco-every-text", TR(*D4, "--sync", "diloco:every=x"), refuse("sync"))
        add("train/diloco-fragments-not-dividing", TR(*D4, "--sync", "diloco:every=4,fragments=3"),
            refuse("sync"))
        add("train/diloco-order-unknown", TR(*D4, "--sync", "diloco:every=4,order=random"),
            refuse("sync"))
        add("train/diloco-overlap-every", TR(*D4, "--sync", "diloco:every=4,overlap=4"),
            refuse("sync"))
        add("train/diloco-bits-5", TR(*D4, "--sync", "diloco:every=4,bits=5"), refuse("sync"))
        add("train/diloco-topk-zero", TR(*D4, "--sync", "diloco:every=4,topk=0"), refuse("sync"))
        add("train/diloco-topk-nan", TR(*D4, "--sync", "diloco:every=4,topk=nan"), refuse("sync"))
        add("train/diloco-groups-not-dividing", TR(*D4, "--sync", "diloco:every=4,groups=3"),
            refuse("sync"))
        add("train/diloco-quorum-over-groups", TR(*D4, "--sync", "diloco:every=4,quorum=9"),
            refuse("sync"))
        add("train/diloco-grace-with-quorum-of-all-groups",
            TR(*D4, "--sync", "diloco:every=4,quorum=4,grace=2"), refuse("sync"),
            note="audit 7: quorum = groups: the window had no effect (accepted)")
        add("train/diloco-grace-without-quorum", TR(*D4, "--sync", "diloco:every=4,grace=2"),
            refuse("sync"))
        add("train/diloco-grace-unit-without-quorum",
            TR(*D4, "--sync", "diloco:every=4,grace=5min"), refuse("sync"),
            note="shows 5min as written (it showed 300.0)")
        # dlabort: a member lost during the outer all-reduce (heartbeat, on_loss, retries)
        F4 = ("--mtbf", "100", "--replace-time", "5")
        add("train/diloco-heartbeat-zero", TR(*D4, *F4, "--sync", "diloco:every=4,heartbeat=0"),
            refuse("sync"))
        add("train/diloco-heartbeat-negative-unit",
            TR(*D4, *F4, "--sync", "diloco:every=4,heartbeat=-5s"), refuse("sync"))
        add("train/diloco-heartbeat-text", TR(*D4, *F4, "--sync", "diloco:every=4,heartbeat=x"),
            refuse("sync"))
        add("train/diloco-heartbeat-unit-off-the-second",
            TR(*D4, *F4, "--hour", "60", "--sync", "diloco:every=4,heartbeat=10s"),
            refuse("hour"), note="10s is 10 s; with --hour 60 a time unit is a minute")
        add("train/diloco-heartbeat-without-failures",
            TR(*D4, "--sync", "diloco:every=4,heartbeat=6"), refuse("sync"),
            note="no member is ever lost: it would have no effect")
        add("train/diloco-heartbeat-past-stall-limit",
            TR(*D4, *F4, "--param-size", "1GB", "--bandwidth", "1Gbit/s",
               "--sync", "diloco:every=4,heartbeat=1e300"), refuse("sync"),
            note="smallfix7: stalled after the first aborted try, blamed on the groups' failures")
        add("train/diloco-on-loss-unknown", TR(*D4, *F4, "--sync", "diloco:every=4,on_loss=retry"),
            refuse("sync"))
        add("train/diloco-on-loss-without-failures",
            TR(*D4, "--sync", "diloco:every=4,on_loss=discard"), refuse("sync"))
        add("train/diloco-retries-zero", TR(*D4, *F4, "--sync", "diloco:every=4,retries=0"),
            refuse("sync"))
        add("train/diloco-retries-with-discard",
            TR(*D4, *F4, "--sync", "diloco:every=4,on_loss=discard,retries=2"), refuse("sync"),
            note="a discarded outer step is not tried again")
        add("train/diloco-retries-without-failures", TR(*D4, "--sync", "diloco:every=4,retries=5"),
            refuse("sync"))
        # dlpayload: what a group back fetches (prime, torchft, params)
        add("train/diloco-recovery-unknown",
            TR(*D4, *F4, "--sync", "diloco:every=4,recovery=deepspeed"), refuse("sync"))
        add("train/diloco-recovery-without-failures",
            TR(*D4, "--sync", "diloco:every=4,recovery=torchft"), refuse("sync"),
            note="no group ever comes back: it would have no effect")
        # smallfix8: without a parameter size every payload is empty (as dtsim learners
        # refuses --recovery, --bits and --topk without --size)
        add("train/diloco-recovery-without-size",
            TR(*D4, *F4, "--sync", "diloco:every=4,recovery=torchft"), refuse("sync"),
            note="smallfix8: ran; a group's download moved 0 bytes in 0 s")
        add("train/diloco-bits-without-size", TR(*D4, "--sync", "diloco:every=4,bits=4"),
            refuse("sync"), note="smallfix8: ran; an outer sync of nothing, whatever its bits")
        add("train/diloco-topk-without-size", TR(*D4, "--sync", "diloco:every=4,topk=0.1"),
            refuse("sync"), note="smallfix8: ran; an outer sync of nothing, whatever its top-k")
        add("train/diloco-recovery-with-size-runs",
            TR(*D4, *F4, "--param-size", "1e6", "--sync", "diloco:every=4,recovery=torchft",
               "--replications", "1"), ok("DiLoCo"))
        # polish6: one group has no one to average with: it runs (a one-zone baseline), warned
        add("train/diloco-one-replica-one-group-warns",
            TR("--microbatches-per-step", "4", "--steps", "4", "--sync", "diloco:every=2"),
            ok("1 group of 1 pipeline"), note="one warning line: times as --sync allreduce")
        add("train/diloco-groups-1-warns", TR(*D4, "--sync", "diloco:every=4,groups=1"),
            ok("1 group of 4 pipelines"), note="one warning line: times as --sync allreduce")
        add("train/diloco-groups-1-failures-warns",
            TR(*D4, "--sync", "diloco:every=4,groups=1", "--mtbf", "200"),
            ok("1 group of 4 pipelines"), note="one warning line: DiLoCo's failure rules, so "
            "not --sync allreduce's times (review10: it said it times as --sync allreduce)")
        add("train/diloco-every-unicode-digit", TR(*D4, "--sync", "diloco:every=\u0664"),
            refuse("sync"), note="an Arabic-Indic 4: int() read it")
        add("train/seed-unicode-digit", TR("--seed", "\u0661"), refuse("seed"),
            note="an Arabic-Indic 1: int() read it")
        add("train/replicas-unicode-digit", TR("--replicas", "\u0662"), refuse("replicas"))
        add("train/diloco-grace-inf", TR(*D4, "--sync", "diloco:every=4,quorum=2,grace=inf"),
            refuse("sync"))
        add("train/diloco-grace-size-unit",
            TR(*D4, "--sync", "diloco:every=4,quorum=2,grace=5GB"), refuse("sync"),
            note="a size where a time is wanted")
        add("train/diloco-grace-minute-m", TR(*D4, "--sync", "diloco:every=4,quorum=2,grace=5m"),
            refuse("sync"), note="m: minute or milli?")
        add("train/diloco-grace-negative-unit",
            TR(*D4, "--sync", "diloco:every=4,quorum=2,grace=-5s"), refuse("sync"))
        add("train/diloco-grace-unit-off-the-second",
            TR(*D4, "--hour", "60", "--sync", "diloco:every=4,quorum=2,grace=5min"),
            refuse("hour"), note="5min is 300 s; with --hour 60 a time unit is a minute")
        add("train/strategy-time-unit-off-the-second",
            TR(*D4, "--hour", "60", "--strategy", "checkpoint-restart:checkpoint=2min"),
            refuse("hour"), note="2min is 120 s; with --hour 60 a time unit is a minute")
        add("train/strategy-time-size-unit",
            TR(*D4, "--strategy", "checkpoint-restart:checkpoint=2GB"), refuse("checkpoint"),
            note="a size where a time is wanted")
        add("train/strategy-time-unknown-unit",
            TR(*D4, "--strategy", "redundancy:rebalance=2parsec"), refuse("rebalance"))
        add("train/strategy-count-with-unit",
            TR(*D4, "--strategy", "checkpoint-restart:every=2min"), refuse("every"),
            note="a count of steps, not a time")
        add("train/strategy-factor-with-unit",
            TR(*D4, "--strategy", "redundancy:slowdown=2min"), refuse("slowdown"))
        add("train/diloco-steps-not-multiple", TR(*D4, "--sync", "diloco:every=3"),
            refuse("steps"))
        add("train/least-assigned-time-fixed-pipelines",
            TR(*D4, "--schedule", "gpipe", "--routing", "least-assigned-time"), refuse("routing"),
            note="SWARM's balancer routes every pass afresh: swarm and async schedules only")
        add("train/trainer-balancer-fixed-pipelines",
            TR(*D4, "--schedule", "gpipe", "--routing", "trainer-balancer"), refuse("routing"),
            note="a balancer a trainer routes every pass afresh: the swarm schedule only")
        add("train/trainer-balancer-async",
            TR(*D4, "--schedule", "async", "--routing", "trainer-balancer"), refuse("routing"),
            note="a balancer a trainer needs trainers: micro-batch k of every swarm step")
        add("train/strategy-swarm-routes-by-trainer",
            TR(*D4, "--strategy", "swarm", "--routing", "trainer-balancer"),
            ok("swarm/trainer-balancer"),
            note="SWARM's balancers a trainer, given (not the default: the swarm schedule's "
                 "step barrier is not SWARM's)")
        add("train/diloco-swarm", TR(*D4, "--schedule", "swarm", "--routing", "queue", "--sync",
                                     "diloco:every=4"), refuse("schedule"))
        # streaming DiLoCo runs with failures (its rules follow vanilla's); with a quorum not
        add("train/diloco-fragments-with-quorum",
            TR(*D4, "--sync", "diloco:every=4,fragments=2,quorum=2", "--mtbf", "100"),
            refuse("sync"))
        add("train/diloco-overlap-with-quorum",
            TR(*D4, "--sync", "diloco:every=4,overlap=1,quorum=2"), refuse("sync"))
        add("train/diloco-with-checkpoints",
            TR(*D4, "--sync", "diloco:every=4", "--mtbf", "100", "--checkpoint-every", "2",
               "--checkpoint-cost", "1", "--restart-cost", "1"), refuse("checkpoint_every"))
        add("train/diloco-sync-wait", TR(*D4, "--sync", "diloco:every=4", "--sync-wait", "2"),
            refuse("sync_wait"))
        add("train/diloco-stall-limit", TR(*D4, "--sync", "diloco:every=4", "--stall-limit",
                                           "100"), refuse("stall_limit"))
        add("train/diloco-groups-never-reach-an-outer-step",
            TR(*D4, "--sync", "diloco:every=4", "--mtbf", "1e-6", "--replace-time", "1",
               "--replications", "1"), ok("no outer step in the last"), timeout=120,
            note="workers fail every microsecond: the run used to go on for ever; it stops "
                 "after 1000 failure-free rounds without an outer sync and says why")
        add("train/value-bits-without-diloco", TR("--value-bits", "32"), refuse("value_bits"))
        add("train/value-bits-zero", TR(*D4, "--sync", "diloco:every=4", "--value-bits", "0"),
            refuse("value_bits"))
        add("train/diloco-bits-above-value-bits",
            TR(*D4, "--sync", "diloco:every=4", "--value-bits", "8"), refuse("sync"))
        add("train/diloco-bandwidth-without-size",
            TR(*D4, "--sync", "diloco:every=4", "--bandwidth", "1Gbit/s"), refuse("bandwidth"),
            note="user trial 3: nothing moved over it; printed utilisation 1")
        add("train/bandwidth-without-size", TR("--bandwidth", "5"), refuse("bandwidth"),
            note="user trial 3: as dtsim pipeline refuses it without --transfer-size")
        add("train/diloco-order-one-fragment", TR(*D4, "--sync", "diloco:every=4,order=strided"),
            refuse("sync"), note="user trial 3: one fragment is the whole model; was ignored")
        add("train/diloco-layers-one-fragment", TR(*D4, "--sync", "diloco:every=4,layers=3"),
            refuse("sync"), note="user trial 3: one fragment is the whole model; was ignored")
        add("train/diloco-strategy", TR(*D4, "--sync", "diloco:every=4", "--strategy",
                                        "checkpoint-restart"), refuse("strategy"))
        add("train/diloco-ok", TR(*D4, "--param-size", "10", "--bandwidth", "5", "--sync",
                                  "diloco:every=4,fragments=2,overlap=1,bits=4",
                                  "--replications", "1"), ok("DiLoCo"))
        add("train/geo-pairs-missing", TR("--network", "geo:pairs=" + str(T / "nope.csv"),
                                          "--replicas", "2"), refuse("network"))
        add("train/geo-bandwidth-matrix-asymmetric",
            TR("--network", "geo:regions=2,hosts=1,bandwidth_matrix=0/1;2/0"), refuse("network"))
        add("train/geo-bandwidth-matrix-size-unit",
            TR("--network", "geo:regions=2,hosts=1,bandwidth_matrix=0/10GB;10GB/0"),
            refuse("network"))
        add("train/geo-nic-size-unit", TR("--network", "geo:regions=2,hosts=1,nic=10GB"),
            refuse("network"))
        add("train/geo-units-ok", TR("--network", "geo:regions=2,hosts=4,bandwidth_matrix="
                                     "0/10Gbit/s;10Gbit/s/0,nic=25Gbps,inter_region_latency=40ms,"
                                     "intra_region_bandwidth=100Gbit/s,intra_region_latency=1ms",
                                     "--param-size", "1GB", "--replicas", "2",
                                     "--replications", "1"), ok("step time"))
    if _has_command("learners"):
        LR = lambda *a: dtsim("learners", *a)  # noqa: E731
        add("learners/learners-zero", LR("--learners", "0"), refuse("learners"))
        add("learners/chips-zero", LR("--chips", "0"), refuse("chips"))
        add("learners/steps-not-multiple", LR("--steps", "150"), refuse("steps"))
        add("learners/quorum-over-learners", LR("--quorum", "9"), refuse("quorum"))
        add("learners/grace-without-quorum", LR("--grace", "5"), refuse("grace"))
        add("learners/grace-with-quorum-of-all", LR("--quorum", "4", "--grace", "5"),
            refuse("grace"), note="audit 7: the 4th report of 4 is the last: no window "
            "follows it (accepted, results bit-identical)")
        add("learners/mtbf-zero", LR("--mtbf", "0"), refuse("mtbf"))
        add("learners/heartbeat-without-mtbf", LR("--heartbeat", "6"), refuse("heartbeat"))
        add("learners/heartbeat-zero", LR("--mtbf", "1e5", "--heartbeat", "0"),
            refuse("heartbeat"))
        add("learners/heartbeat-text", LR("--mtbf", "1e5", "--heartbeat", "x"),
            refuse("heartbeat"))
        add("learners/size-recovery-download-overflows",
            LR("--size", "5e295", "--bandwidth", "1", "--mtbf", "1e5", "--max-time", "1e3"),
            refuse("size"), note="smallfix7: the bound took the parameters alone, not prime's "
            "recovery download (8 x them at 16 bits)")
        add("learners/heartbeat-failures-during-the-wait",
            LR("--mtbf", "30", "--size", "1GB", "--bandwidth", "1Gbit/s", "--every", "4",
               "--steps", "8", "--heartbeat", "1e9"), refuse("heartbeat"),
            note="smallfix7: a replication never ended (a wait the stall rule does not see)")
        add("learners/on-loss-unknown", LR("--mtbf", "1e5", "--on-loss", "retry"),
            refuse("on_loss"))
        add("learners/on-loss-without-mtbf", LR("--on-loss", "discard"), refuse("on_loss"))
        add("learners/retries-zero", LR("--mtbf", "1e5", "--retries", "0"), refuse("retries"))
        add("learners/recovery-unknown", LR("--mtbf", "1e5", "--recovery", "deepspeed"),
            refuse("recovery"))
        add("learners/recovery-without-mtbf", LR("--recovery", "torchft"), refuse("recovery"),
            note="review15: no learner is ever down, so none downloads (ran, ignored)")
        add("learners/recovery-without-size", LR("--mtbf", "1e5", "--recovery", "torchft"),
            refuse("recovery"), note="review15: a download of no model (ran, ignored)")
        add("learners/retries-with-discard",
            LR("--mtbf", "1e5", "--on-loss", "discard", "--retries", "2"), refuse("retries"))
        add("learners/step-time-shape-deterministic", LR("--step-time-shape", "0.9"),
            refuse("step_time_shape"))
        add("learners/replace-time-without-mtbf", LR("--replace-time", "5"),
            refuse("replace_time"))
        add("learners/chip-download-without-mtbf", LR("--chip-download", "5"),
            refuse("chip_download"))
        add("learners/workers-serial", LR("--workers", "2"), refuse("workers"))
        add("learners/never-reach-an-outer-step",
            LR("--chips", "8", "--every", "10", "--steps", "100", "--mtbf", "1e-9",
               "--replace-time", "1", "--replications", "1"),
            ok("replications stopped without an outer step"), timeout=120,
            note="chips fail every nanosecond: the engine used to run for ever; it stops "
                 "after 1000 failure-free rounds without an outer step and says why")
        add("learners/step-law-unknown", LR("--step-time-distribution", "pareto"),
            refuse("step_time_distribution"))
        add("learners/bits-5", LR("--size", "1GB", "--bits", "5"), refuse("bits"))
        # user trial 3: the payload options act on --size (default 0: nothing moves)
        for opt, val in (("--bandwidth", "1Gbit/s"), ("--bits", "4"), ("--topk", "0.01"),
                         ("--value-bits", "32")):
            add(f"learners/{opt[2:]}-without-size", LR(opt, val),
                refuse(opt[2:].replace("-", "_")), note="ran as if applied (utilisation 1)")
        add("learners/replications-zero", LR("--replications", "0"), refuse("replications"))
        add("learners/size-rate-unit", LR("--size", "10GB/s"), refuse("size"))
        add("learners/bandwidth-size-unit", LR("--bandwidth", "10GB"), refuse("bandwidth"))
        add("learners/latency-size-unit", LR("--latency", "5GB"), refuse("latency"))
        add("learners/overflow-latency", LR("--latency", "1e308"), refuse("latency"),
            note="was inf in the output")
        add("learners/overflow-step-time", LR("--step-time", "1e308"), refuse("step_time"))
        # the time options take a unit, as --latency does (a bare number is seconds)
        add("learners/step-time-size-unit", LR("--step-time", "2GB"), refuse("step_time"))
        add("learners/mtbf-rate-unit", LR("--mtbf", "10Gbit/s"), refuse("mtbf"))
        add("learners/mtbf-unknown-unit", LR("--mtbf", "2 parsecs"), refuse("mtbf"))
        add("learners/grace-size-unit", LR("--quorum", "2", "--grace", "5MB"), refuse("grace"))
        add("learners/replace-time-unknown-unit", LR("--mtbf", "1e6", "--replace-time", "5 fortnights"),
            refuse("replace_time"))
        add("learners/chip-download-size-unit", LR("--mtbf", "1e6", "--chip-download", "5GB"),
            refuse("chip_download"))
        add("learners/max-time-negative-unit", LR("--max-time=-5h"), refuse("max_time"))
        # audit5: runaways refused before any work
        add("learners/learners-1e12", LR("--learners", "1000000000000"), refuse("learners"),
            timeout=60, note="a hang with nothing printed before")
        add("learners/learners-1e7", LR("--learners", "10000000", "--steps", "100"),
            refuse("learners"), timeout=60,
            note="4e7 learner rounds (learners x (outer steps + 3)), budget 4e6: over 10 minutes")
        add("learners/steps-1e7-rounds", LR("--steps", "1000000000"), refuse("steps"),
            timeout=60, note="4 learners x 1e7 outer steps: 4e7 learner rounds, budget 4e6")
        add("learners/ok-learners-1e4", LR("--learners", "10000", "--steps", "100",
                                           "--replications", "1"), ok("goodput"), timeout=60,
            note="10^4 learners, one round: a second (5.7 s when each report checked every "
                 "member; 10^5 learners were refused)")
        add("learners/chips-1e12-failing", LR("--chips", "1000000000000", "--mtbf", "1e6",
                                               "--replace-time", "1"), refuse("chips"),
            timeout=60, note="8e11 chip failures expected: a runaway")
        add("learners/mtbf-1ms", LR("--mtbf", "1ms"), refuse("mtbf"), timeout=60)
        add("learners/max-time-before-the-end-not-measured", LR("--max-time", "5"),
            ok("time to train is not measured"),
            note="time to train printed 'nan (no interval, n = 0)'")
        add("learners/ok-time-units", LR("--learners", "4", "--chips", "100", "--steps", "400",
                                         "--step-time", "200ms", "--mtbf", "12d",
                                         "--replace-time", "10s", "--max-time", "2h",
                                         "--replications", "2"), ok("goodput"))
        add("learners/overflow-bandwidth", LR("--size", "1", "--bandwidth", "1e-308"),
            refuse("bandwidth"))
        add("learners/ok", LR("--learners", "4", "--chips", "100", "--steps", "400",
                              "--mtbf", "1e6", "--replace-time", "10", "--replications", "2"),
            ok("goodput"))
    # -- trace (when present) ---------------------------------------------------------
    if _has_command("trace"):
        TC = lambda *a: dtsim("trace", *a)  # noqa: E731
        add("trace/unknown-action", TC("bogus"), refuse("ACTION"))
        add("trace/stats-binary", TC("stats", str(fx.binary)), refuse("trace"))
        add("trace/stats-missing", TC("stats", str(T / "nope.csv")), refuse("trace"))
        add("trace/stats-dir", TC("stats", str(fx.dir)), refuse("trace"))
        add("trace/fit-binary", TC("fit", str(fx.binary)), refuse("trace"))
        add("trace/plot-without-out", TC("plot", str(fx.trace_ok)), refuse("out"))
        if (REPO / "sim" / "traces" / "events.py").is_file():  # event logs (--trace-format events:)
            ev = "events:worker=instance_id,time=timestamp,down=preempted,up=launched"
            head = "timestamp,instance_id,event\n"
            good = head + "2024-03-01T12:00:00Z,i-a,launched\n2024-03-01T13:10:00+01:00,i-a,preempted\n"
            logs = {
                "ok": good,
                "unknown-word": good + "2024-03-01T12:20:00Z,i-a,stopping\n",
                "naive-among-aware": good + "2024-03-01T12:20:00,i-a,launched\n",
                "iso-among-numbers": head + "1709294400,i-a,launched\n2024-03-01T12:20:00Z,i-a,preempted\n",
                "not-a-time": head + "yesterday,i-a,launched\n",
                "no-instance": good + "2024-03-01T12:20:00Z,,launched\n",
                "short-row": good + "2024-03-01T12:20:00Z,i-a\n",
                "never-up": head + "5,i-a,preempted\n9,i-a,preempted\n",
                "no-column": "ts,id,ev\n1,a,launched\n",
                "partly-named": head + "1,s0r0,launched\n5,i-x,launched\n9,s0r0,preempted\n",
                "named-tiled": head + "1,s0r0,launched\n9,s0r0,preempted\n",
            }
            for name, text in logs.items():
                f = str(fx._write(f"events/{name}.csv", text))
                if name == "ok":
                    add("trace/events-ok", TC("stats", f, "--trace-format", ev),
                        ok("slot 0: i-a"))
                    for spec, why in ((ev + ",bogus=1", "unknown-key"), (ev + ",up=x", "key-twice"),
                                      (ev + ",ignore=Launched", "word-twice"),
                                      (ev + ",start=12", "start-clock"),
                                      (ev + ",start=2024-03-01T12:05:00Z", "before-start")):
                        add(f"trace/events-{why}", TC("stats", f, "--trace-format", spec),
                            refuse("trace_format" if why != "before-start" else "trace"))
                    add("trace/events-time-unit-with-iso",
                        TC("stats", f, "--trace-format", ev, "--time-unit", "h"),
                        refuse("time_unit"))
                    add("train/events-unknown-word-named-as-failure-trace",
                        dtsim("train", "--steps", "1", "--failure-trace",
                              str(fx.root / "events" / "unknown-word.csv"), "--trace-format", ev),
                        refuse("failure_trace"))
                elif name == "named-tiled":
                    add("train/events-named-as-workers-with-tile-policy",
                        dtsim("train", "--steps", "1", "--failure-trace", f, "--trace-format", ev,
                              "--trace-policy", "recent+tile"),
                        refuse("trace_policy"),
                        note="FIXED (lead): replayed by name, +tile was taken and ignored")
                    add("train/events-named-as-workers-with-random-policy",
                        dtsim("train", "--steps", "1", "--failure-trace", f, "--trace-format", ev,
                              "--trace-policy", "random"),
                        refuse("trace_policy"),
                        note="FIXED (lead): replayed by name, the mapping policy was taken "
                             "and ignored")
                    add("pipeline/events-named-as-workers-with-domain-policy",
                        P("--stages", "1", "--replicas", "1", "--failure-trace", f,
                          "--trace-format", ev, "--trace-loop", "--trace-policy", "domain"),
                        refuse("trace_policy"),
                        note="FIXED (lead): as train")
                    add("train/events-named-as-workers-recent-policy-ok",
                        dtsim("train", "--steps", "1", "--failure-trace", f, "--trace-format", ev,
                              "--trace-loop", "--trace-policy", "recent"),
                        ok("replayed by name"),
                        note="the default policy named explicitly is the replay itself")
                    add("design/events-named-as-workers",
                        D("--stages", "1", "--failure-trace", f, "--trace-format", ev),
                        refuse("failure_trace"),
                        note="design answers under the random policy: a trace named as its "
                             "workers s{j}r{i} is refused (dtsim pipeline replays it by name)")
                elif name == "partly-named":
                    add("train/events-instances-partly-named-as-workers",
                        dtsim("train", "--steps", "1", "--failure-trace", f, "--trace-format", ev),
                        refuse("failure_trace"),
                        note="user trial 15: by name when all are workers/hosts, slot order "
                             "when none; some is refused rather than guessed")
                    # the same rule in every command that replays a trace (tracename)
                    add("pipeline/events-instances-partly-named-as-workers",
                        P("--stages", "2", "--replicas", "1", "--failure-trace", f,
                          "--trace-format", ev, "--trace-loop"),
                        refuse("failure_trace"),
                        note="by name as in train: some named s{j}r{i} and some not is refused")
                    partly = str(fx._write("events/partly-named-workers.csv", text.replace(
                        "s0r0", "worker0")))
                    add("failures/events-instances-partly-named-as-workers",
                        F("--cluster-workers", "2", "--failure-trace", partly,
                          "--trace-format", ev),
                        refuse("failure_trace"),
                        note="by name as in train: some named worker{i} and some not is refused")
                    net = str(fx._write("events/named-hosts.edges", "a b\nb s0r0\n"))
                    add("gossip/events-instances-partly-named-as-nodes",
                        G("--protocol", "async", "--topology", net, "--rounds", "5",
                          "--failure-trace", f, "--trace-format", ev),
                        refuse("failure_trace"),
                        note="by name as in train: some named as the graph's nodes and some "
                             "not is refused")
                    add("design/events-instances-partly-named-as-workers",
                        D("--stages", "1", "--failure-trace", f, "--trace-format", ev),
                        refuse("failure_trace"),
                        note="design answers under the random policy: a trace named as its "
                             "workers (some or all) is refused, not answered as if unnamed")
                else:
                    add(f"trace/events-{name}", TC("stats", f, "--trace-format", ev),
                        refuse("trace"))
            add("trace/stats-seconds-assumed-said", TC("stats", str(fx.trace_ok)),
                ok("times read in seconds"),
                note="integer times without --time-unit were read as seconds silently")
        add("pipeline/failure-trace-binary", P("--failure-trace", str(fx.binary)),
            refuse("failure_trace"))
        add("pipeline/trace-loop-without-failure-trace", P("--trace-loop"), refuse("trace_loop"))
        add("pipeline/trace-speedup-without-failure-trace", P("--trace-speedup", "2"),
            refuse("trace_speedup"))
        add("failures/trace-start-without-failure-trace", F("--trace-start", "5"),
            refuse("trace_start"))
        add("failures/availability-with-failure-trace",
            F("--failure-trace", str(fx.trace_ok), "--trace-format", "dtsim", "--workers", "2",
              "--availability", "0.5"), refuse("availability"))
    # -- flags added with issues 13-15 (queueing, knobs, trace replay in train) -----------
    if _has_option("pipeline", "--queueing"):
        add("pipeline/routing-without-queueing", P("--routing", "weighted"), refuse("routing"))
        add("pipeline/speeds-without-queueing", P("--speeds", str(T / "nope.csv")),
            refuse("speeds"))
        add("pipeline/queueing-with-importance", P("--queueing", "--method", "importance"),
            refuse("queueing"))
        add("pipeline/queueing-routing-unknown", P("--queueing", "--routing", "bogus"),
            refuse("routing"))
        add("pipeline/queueing-trainer-balancer",
            P("--queueing", "--routing", "trainer-balancer"), refuse("routing"),
            note="a balancer a trainer needs the swarm schedule's trainers: a pipeline has none")
    if _has_option("gossip", "--stubborn-values"):
        add("gossip/stubborn-values-count", G("--adversary", "stubborn", "--num-adversaries", "2",
                                              "--stubborn-values", "1"), refuse("stubborn_values"))
        add("gossip/rounds-fractional-matching", G("--rounds", "2.5"), refuse("rounds"))
        add("gossip/record-every-fractional-edge", G("--protocol", "edge", "--record-every", "0.5"),
            refuse("record_every"))
        add("gossip/rounds-zero-async", G("--protocol", "async", "--rounds", "0.0"), refuse("rounds"))
        add("gossip/failure-trace-with-matching", G("--failure-trace", "aws-p3"),
            refuse("failure_trace"))
        add("gossip/failure-trace-too-few-slots", G("--protocol", "async", "--nodes", "64",
                                                    "--failure-trace", "aws-p3"), refuse("nodes"))
    if _has_option("failures", "--topology"):
        add("failures/domains-with-topology", F("--topology", "datacenter", "--domains", "2"),
            refuse("domains"))
        add("failures/tree-layout-ok", F("--topology", "tree:racks=2,hosts=4", "--horizon", "200",
                                         "--replications", "2"), ok("rack"),
            note="a worker per host, none per switch: a TypeError traceback before")
    if _has_command("train"):
        add("train/trace-policy-without-trace", TR("--trace-policy", "random"),
            refuse("trace_policy"))
        add("train/trace-too-few-slots", TR("--failure-trace", "aws-p2-19h", "--stages", "4",
                                            "--replicas", "4"), refuse("workers"))
        add("train/availability-with-trace", TR("--failure-trace", "aws-p2-19h",
                                                "--availability", "0.5"), refuse("availability"))
    for group in (network_cases, real_run_cases, strategy_cases, hardening_cases,
                  byzantine_cases, sibling_cases, newcomer_cases, planner_cases, unit_cases,
                  traffic_cases, timeline_cases, real_runs_ii_cases, users_network_cases,
                  users_profile_cases, users_planner_cases, users_strategy_cases,
                  users_design_cases, users_byzantine_cases, audit6_cases, leftovers_cases,
                  usertrial12_cases, zero_step_cases, export_plan_cases, audit8_cases,
                  outsafe_cases, audit9_cases):
        cases.extend(group(fx))
    return cases


# Each group below is one area's cases, kept apart so that work on one area
# never edits another's lines. A group returns its cases; ids are ``command/what``.


def traffic_cases(fx: Fixtures) -> list[Case]:
    """How training traffic becomes time: ``--sync KIND[:key=value,...]`` and ``--p2p shared``."""
    T = lambda *a: dtsim("train", "--replications", "1", "--steps", "1", *a)  # noqa: E731
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    dp = ("--replicas", "2", "--param-size", "10", "--bandwidth", "5")
    add("sync/unknown-kind", T("--sync", "gossip"), refuse("sync"))
    add("sync/empty", T("--sync", ""), refuse("sync"))
    add("sync/unknown-key", T("--sync", "allreduce:depth=2"), refuse("sync"))
    add("sync/key-without-value", T("--sync", "allreduce:overlap"), refuse("sync"))
    add("sync/key-twice", T("--sync", "allreduce:overlap=none,overlap=backward"), refuse("sync"))
    add("sync/overlap-unknown", T("--sync", "allreduce:overlap=forward"), refuse("sync"))
    add("sync/bucket-zero", T("--sync", "allreduce:bucket_size=0"), refuse("sync"))
    add("sync/bucket-negative", T("--sync", "allreduce:bucket_size=-5"), refuse("sync"))
    add("sync/bucket-nan", T("--sync", "allreduce:bucket_size=nan"), refuse("sync"))
    add("sync/bucket-inf", T("--sync", "allreduce:bucket_size=inf"), refuse("sync"))
    add("sync/bucket-not-a-number", T("--sync", "allreduce:bucket_size=big"), refuse("sync"))
    add("sync/bucket-rate-unit", T("--sync", "allreduce:bucket_size=2GB/s"), refuse("sync"),
        note="a rate where a size is wanted")
    add("sync/bucket-zero-unit", T("--sync", "allreduce:bucket_size=0GB"), refuse("sync"))
    add("sync/bucket-kilo-unit", T("--sync", "allreduce:bucket_size=4KB"), refuse("sync"),
        note="K: 1000 or 1024?")
    add("sync/bucket-denormal-size", T(*dp, "--sync", "allreduce:overlap=backward,"
                                               "bucket_size=1e-300"), refuse("sync"),
        note="10 B in buckets of 1e-300 B: an OverflowError in every replication (exit 1)")
    add("sync/bucket-one-byte-of-1GB", T("--replicas", "2", "--param-size", "1GB",
                                         "--bandwidth", "1GB/s", "--sync",
                                         "allreduce:overlap=backward,bucket_size=1e-3B"),
        refuse("sync"), note="10^12 buckets: 20 GB and minutes before (as --bucket-size's rule)")
    add("sync/keys-on-one-replica-a-stage", T("--sync", "allreduce:overlap=backward,"
                                                    "bucket_size=25MiB"), refuse("sync"),
        note="no all-reduce to shape: it ran as the default (a silent ignore)")
    add("sync/none-with-key", T("--sync", "none:overlap=backward"), refuse("sync"))
    add("sync/overlap-swarm", T(*dp, "--schedule", "swarm", "--routing", "least-loaded",
                                "--sync", "allreduce:overlap=backward"), refuse("sync"),
        note="a replica of a routed schedule does not know its last backward pass")
    add("sync/overlap-forward-only", T(*dp, "--backward-ratio", "0",
                                       "--sync", "allreduce:overlap=backward"), refuse("sync"))
    add("sync/overlap-with-failures", T(*dp, "--availability", "0.9",
                                        "--sync", "allreduce:overlap=backward"), refuse("sync"))
    add("sync/overlap-with-sync-wait", T(*dp, "--sync-wait", "1",
                                         "--sync", "allreduce:overlap=backward"), refuse("sync"))
    add("sync/two-bucket-sizes", T(*dp[:4], "--network", "tree:racks=1,hosts=8",
                                   "--bucket-size", "4", "--sync", "allreduce:bucket_size=4"),
        refuse("bucket_size"))
    add("sync/overlap-ok", T(*dp, "--sync", "allreduce:overlap=backward,bucket_size=2"),
        ok("throughput"))
    add("sync/plan-overlap-ok", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D2.json"),
                                  "--model", "OPT-350", "--sync", "allreduce:overlap=backward"),
        ok("throughput"))
    add("p2p/shared-ok", T("--stages", "2", "--activation-size", "1", "--network",
                           "tree:racks=1,hosts=8", "--p2p", "shared"), ok("throughput"))
    add("p2p/shared-plan-ok", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D1.json"), "--model",
                                "OPT-350", "--p2p", "shared"), ok("throughput"))
    add("p2p/empty", T("--p2p", ""), refuse("p2p"))
    # Megatron-LM's 1F1B with batched send/receive pairs (issue 35 item 2)
    add("p2p/batched-ok", T("--stages", "3", "--latency", "0.5", "--schedule", "1f1b",
                            "--p2p", "batched"), ok("throughput"))
    add("p2p/batched-network-ok", T("--stages", "2", "--activation-size", "1", "--network",
                                    "tree:racks=1,hosts=8", "--schedule", "1f1b", "--p2p",
                                    "batched"), ok("throughput"))
    add("p2p/one-stage-plan", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D2.json"),
                                "--model", "OPT-350", "--p2p", "overlap", "--steps", "1"),
        refuse("p2p"), note="one stage: nothing moves between stages (it was ignored)")
    add("p2p/batched-plan-ok", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D1.json"),
                                 "--model", "OPT-350", "--p2p", "batched"), ok("throughput"))
    add("p2p/batched-gpipe", T("--stages", "3", "--latency", "0.5", "--schedule", "gpipe",
                               "--p2p", "batched"), refuse("p2p"))
    add("p2p/batched-swarm", T("--stages", "3", "--latency", "0.5", "--p2p", "batched"),
        refuse("p2p"))
    add("p2p/batched-failures-without-restart",
        T("--stages", "3", "--latency", "0.5", "--schedule", "1f1b", "--p2p", "batched",
          "--availability", "0.9"), refuse("restart_cost"))
    add("p2p/megatron-plan-gpipe", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D1.json"),
                                     "--model", "OPT-350", "--framework", "megatron",
                                     "--schedule", "gpipe"), refuse("schedule"))
    add("p2p/batched-plan-gpipe", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D1.json"),
                                    "--model", "OPT-350", "--p2p", "batched",
                                    "--schedule", "gpipe"), refuse("schedule"))
    # the framework engine without a plan (review of issue 35): fastest-k, forward-only, a
    # step-level strategy's own restart model
    fw3 = ("--stages", "3", "--latency", "0.5", "--schedule", "1f1b")
    for p2p in ("blocking", "batched"):
        add(f"p2p/{p2p}-sync-wait", T(*fw3, "--p2p", p2p, "--replicas", "2", "--sync-wait", "1"),
            refuse("sync_wait"), note="crashed mid-run (AttributeError, exit 1) before")
        add(f"p2p/{p2p}-forward-only", T(*fw3, "--p2p", p2p, "--backward-ratio", "0"),
            refuse("backward_ratio"), note="ran the training programs with zero-time backward "
            "passes and timed gradient transfers before")
        add(f"p2p/{p2p}-strategy-failures-ok",
            dtsim("train", "--replications", "1", *fw3, "--p2p", p2p, "--steps", "4",
                  "--availability", "0.99", "--strategy", "checkpoint-restart:every=2",
                  "--restart-cost", "1"), ok("throughput"),
            note="the strategy's restart cost: was refused as 'restart_cost' must be given")
    return cases


def network_cases(fx: Fixtures) -> list[Case]:
    """The flow-level network model: ``dtsim network`` and ``--contention``."""
    if not _has_command("network"):
        return []
    cases: list[Case] = []
    w = fx._write
    good = w("network/flows.csv", "src,dst,size,start\n0,5,100,0\n1,5,100,0\n")
    topo = "tree:racks=2,hosts=4"
    N = lambda *a: dtsim("network", *a)  # noqa: E731

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    add("network/ok", N("--topology", topo, "--flows", str(good)), ok("makespan"))
    add("network/unknown-node", N("--topology", topo, "--flows",
                                  str(w("network/unknown.csv", "src,dst,size,start\n0,nope,1,0\n"))),
        refuse("flows"))
    two = w("network/two.edges", "a b 1 10\nc d 1 10\n")
    add("network/no-route", N("--topology", str(two), "--flows",
                              str(w("network/ac.csv", "src,dst,size,start\na,c,1,0\n"))),
        refuse("topology"), note="a graph in two parts: refused as not connected")
    add("network/negative-size", N("--topology", topo, "--flows",
                                   str(w("network/neg.csv", "src,dst,size,start\n0,1,-5,0\n"))),
        refuse("flows"))
    add("network/nan-start", N("--topology", topo, "--flows",
                               str(w("network/nan.csv", "src,dst,size,start\n0,1,5,nan\n"))),
        refuse("flows"))
    add("network/same-node", N("--topology", topo, "--flows",
                               str(w("network/same.csv", "src,dst,size,start\n0,0,5,0\n"))),
        refuse("flows"))
    add("network/no-bandwidth", N("--topology", "ring:n=6", "--flows", str(good)),
        refuse("topology"), note="every bandwidth inf: no transfer time to compute")
    add("network/bad-header", N("--topology", topo, "--flows",
                                str(w("network/hdr.csv", "a,b,c\n1,2,3\n"))), refuse("flows"))
    add("network/empty-flows", N("--topology", topo, "--flows",
                                 str(w("network/empty.csv", "src,dst,size,start\n"))),
        refuse("flows"))
    add("network/missing-flows-file", N("--topology", topo, "--flows", str(fx.root / "nope.csv")),
        refuse("flows"))
    add("network/binary-flows", N("--topology", topo, "--flows", str(fx.binary)), refuse("flows"))
    add("network/short-row", N("--topology", topo, "--flows",
                               str(w("network/short.csv", "src,dst,size,start\n0,1,5\n"))),
        refuse("flows"))
    add("network/weighting-unknown", N("--topology", topo, "--flows", str(good), "--weighting",
                                       "fair"), refuse("weighting"))
    add("network/solver-unknown", N("--topology", topo, "--flows", str(good), "--solver", "x"),
        refuse("solver"))
    add("network/nic-zero", N("--topology", topo, "--flows", str(good), "--nic", "0"),
        refuse("nic"))
    add("network/bad-sharing", N("--topology", str(w("network/sh.edges",
                                                     "0 1 sharing=half bandwidth=5\n")),
                                 "--flows", str(w("network/01.csv", "src,dst,size,start\n0,1,1,0\n"))),
        refuse("topology"))
    add("network/bad-curve", N("--topology", str(w("network/cv.edges",
                                                   "0 1 bandwidth_curve=table:x\n")),
                               "--flows", str(fx.root / "network/01.csv")), refuse("topology"))
    add("network/unknown-family", N("--topology", "nosuch", "--flows", str(good)),
        refuse("topology"))
    TR = lambda *a: dtsim("train", "--replications", "1", *a)  # noqa: E731
    net = ("--network", "tree:racks=1,hosts=8")
    add("train/network-queue-routing", TR(*net, "--schedule", "swarm", "--routing", "queue"),
        refuse("routing"))
    add("train/nic-without-network", TR("--nic", "5"), refuse("nic"))
    add("train/network-unknown-node", TR(*net, "--network-nodes", "0,1,2,nope"),
        refuse("network_nodes"))
    add("train/network-nodes-count", TR(*net, "--network-nodes", "0,1"), refuse("network_nodes"))
    add("train/network-few-hosts", TR("--network", "tree:racks=1,hosts=2"),
        refuse("network_nodes"))
    add("train/p2p-blocking-with-failures", TR(*net, "--p2p", "blocking", "--availability", "0.9"),
        refuse("p2p"))
    add("train/p2p-unknown", TR(*net, "--p2p", "sometimes"), refuse("p2p"))
    add("train/contention-unknown", TR(*net, "--contention", "maybe"), refuse("contention"))
    add("train/network-and-bandwidth", TR(*net, "--bandwidth", "5"), refuse("bandwidth"))
    add("train/tensor-parallel-zero", TR(*net, "--tensor-parallel", "0"),
        refuse("tensor_parallel"))
    add("train/bucket-size-zero", TR(*net, "--bucket-size", "0"), refuse("bucket_size"))
    add("train/network-unknown-checkpoint-node", TR(*net, "--checkpoint-node", "nope"),
        refuse("checkpoint_node"))
    add("train/network-ok", TR(*net, "--param-size", "10", "--nic", "5"), ok("throughput"))
    P = lambda *a: dtsim("pipeline", *a)  # noqa: E731
    add("pipeline/network-without-queueing", P("--network", "tree"), refuse("network"))
    add("pipeline/network-queue-routing", P("--queueing", "--stages", "3", "--network",
                                            "tree:racks=1,hosts=6"), refuse("routing"))
    G = lambda *a: dtsim("gossip", "--replications", "1", *a)  # noqa: E731
    add("gossip/nic-with-edge", G("--protocol", "edge", "--nic", "2"), refuse("nic"))
    add("gossip/nic-zero", G("--protocol", "async", "--rounds", "2", "--nic", "0"), refuse("nic"))
    add("gossip/contention-nothing-shared", G("--protocol", "async", "--rounds", "2",
                                              "--contention", "off"), refuse("contention"))
    add("gossip/contention-unknown", G("--protocol", "async", "--rounds", "2", "--contention",
                                       "maybe"), refuse("contention"))
    add("gossip/nic-without-contention", G("--protocol", "async", "--rounds", "2", "--nic", "2",
                                           "--contention", "off"), refuse("nic"))
    add("gossip/weighting-without-contention", G(
        "--topology", "ring:n=8,bandwidth=5", "--protocol", "async", "--rounds", "2",
        "--contention", "off", "--network-weighting", "rtt"), refuse("network_weighting"))
    add("gossip/nic-ok", G("--topology", "star:n=6", "--protocol", "neighbourhood",
                           "--rounds", "3", "--nic", "2"), ok("disagreement"))
    return cases


def real_run_cases(fx: Fixtures) -> list[Case]:
    """Profiles, plans and the planner: ``dtsim train --plan``, ``dtsim plan``."""
    if not _has_option("train", "--plan"):
        return []
    import json as _json

    T = lambda *a: dtsim("train", *a)  # noqa: E731
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    def plan(name: str, stages: list, mbs: int = 2, gbs: int = 8, model: str = "OPT-350") -> str:
        p = fx.root / name
        p.write_text(_json.dumps({"model": model, "microbatch_size": mbs,
                                  "global_batch_size": gbs, "stages": stages}))
        return str(p)

    def rep(gpu: str, tp: int, gpn: int) -> list:
        return [{"gpu": gpu, "tp": tp, "gpus_per_node": gpn, "zone": "us-central1-a"}]

    def tied_profiles() -> str:
        """A profiles folder whose OPT-350 ties its embedding and head (tied_embeddings true;
        the tied weight the first layer less its position embedding): the shipped OPT-350 is
        untied, as the Sailor artifact's OPTModelPipe builds it."""
        import shutil
        from dataclasses import replace

        from sim.profiles import load_profiles
        from sim.profiles.formats import DATA_DIR, model_to_data

        d = fx.root / "p-tied-opt"
        if not d.is_dir():
            (d / "models").mkdir(parents=True)
            for f in ("bandwidths.json", "intra_node_bandwidths.json"):
                shutil.copy(DATA_DIR / f, d / f)
            m = load_profiles(models=("OPT-350",)).model("OPT-350")
            tied = tuple((tp, row[0].params - round(row[0].activation_bytes / m.bytes_per_value))
                         for tp, row in m.sizes)
            (d / "models" / "OPT-350.json").write_text(_json.dumps(model_to_data(
                replace(m, tied_embeddings=True, tied_params=tied))))
        return str(d)

    gh = rep("GH-96", 4, 4)
    good = plan("plan-good.json", [{"first_layer": 0, "last_layer": 11, "replicas": gh},
                                   {"first_layer": 12, "last_layer": 25, "replicas": gh}])
    one = ["--steps", "1", "--replications", "1"]
    add("train/plan-runs", T("--plan", good, *one), ok("step time"))
    # --fleet: a fleet file's links time a plan, as dtsim plan --fleet searched it
    zone_end = {"gpu": "GH-96", "zone": "eu"}
    eu_fleet = fx.root / "fleet-eu.json"
    eu_fleet.write_text(_json.dumps({"nodes": [], "links": [
        {"src": zone_end, "dst": zone_end, "flows": k, "bandwidth": "100Gbit/s",
         "latency": "20us"} for k in (1, 2, 4)]}))
    eu = [{"gpu": "GH-96", "tp": 4, "gpus_per_node": 4, "zone": "eu"}]
    eu_plan = plan("plan-eu.json", [{"first_layer": 0, "last_layer": 11, "replicas": eu},
                                    {"first_layer": 12, "last_layer": 25, "replicas": eu}])
    add("train/plan-fleet-links-runs", T("--plan", eu_plan, "--fleet", str(eu_fleet), *one),
        ok("step time"), note="a zone only the fleet file has links for")
    add("train/plan-fleet-missing-links", T("--plan", eu_plan, *one), refuse("network"),
        note="without the fleet file's links the profiles' network has none for the zone")
    add("train/fleet-without-plan", T("--stages", "2", "--fleet", str(eu_fleet), *one),
        refuse("fleet"), note="a fleet's links time only a plan's transfers")
    add("train/plan-fleet-missing-file", T("--plan", good, "--fleet", str(fx.root / "nope.json"),
                                           *one), refuse("fleet"))
    add("train/plan-fleet-dev-zero", T("--plan", good, "--fleet", "/dev/zero", *one),
        refuse("fleet"))
    # (audit 7) only a fleet file's links time a plan: one with no link between the plan's
    # node kinds (none at all, or another zone's) changed nothing and was accepted
    nodes_only = fx.root / "fleet-nodes-only.json"
    nodes_only.write_text(_json.dumps({"nodes": [{"gpu": "GH-96", "gpus_per_node": 4,
                                                  "zone": "us-central1-a", "count": 2}]}))
    add("train/plan-fleet-without-links", T("--plan", good, "--fleet", str(nodes_only), *one),
        refuse("fleet"), note="a fleet of nodes only: its nodes are not used by --plan")
    add("train/plan-fleet-links-of-another-zone", T("--plan", good, "--fleet", str(eu_fleet),
                                                    *one),
        refuse("fleet"), note="links for GH-96@eu only, the plan in us-central1-a")
    tied_tp = plan("plan-tied-tp.json", [{"first_layer": 0, "last_layer": 11,
                                          "replicas": rep("GH-96", 2, 4)},
                                         {"first_layer": 12, "last_layer": 25,
                                          "replicas": rep("GH-96", 4, 4)}])
    add("train/plan-tied-tp-differs", T("--plan", tied_tp, "--profiles", tied_profiles(), *one),
        refuse("plan"), note="a tied OPT-350 (tied_embeddings true): TP 2 at the first stage, "
        "4 at the last")
    add("train/plan-untied-tp-differs-runs", T("--plan", tied_tp, *one), ok("step time"),
        note="the shipped OPT-350 is untied (the artifact's OPTModelPipe): no tied all-reduce "
        "to pair the first and last stage's TP ranks")
    add("train/plan-tp-differs-runs",
        T("--plan", plan("plan-tp-212.json", [{"first_layer": 0, "last_layer": 8,
                                              "replicas": rep("GH-96", 2, 4)},
                                             {"first_layer": 9, "last_layer": 17,
                                              "replicas": rep("GH-96", 1, 4)},
                                             {"first_layer": 18, "last_layer": 25,
                                              "replicas": rep("GH-96", 2, 4)}]),
          "--framework", "sailor-deepspeed", *one),
        ok("step time"), note="TP 2, 1, 2: the artifact sends per pipeline group")

    def mixed(name: str, middle: list) -> str:  # stage 1's replicas as given, the ends TP 2
        ends = rep("GH-96", 2, 4) * len(middle)
        return plan(name, [{"first_layer": 0, "last_layer": 8, "replicas": ends},
                           {"first_layer": 9, "last_layer": 17, "replicas": middle},
                           {"first_layer": 18, "last_layer": 25, "replicas": ends}])
    mix = mixed("plan-mixed-stage.json", rep("GH-96", 1, 4) + rep("GH-96", 4, 4))
    add("train/plan-stage-tp-mixed-runs",
        T("--plan", mix, "--framework", "sailor-deepspeed", *one), ok("step time"),
        note="stage 1's replicas TP 1 and 4: the artifact's data-parallel groups, 4 rounds")
    add("train/plan-stage-tp-mixed-upstream",
        T("--plan", mix, "--framework", "deepspeed", *one), refuse("plan"),
        note="upstream DeepSpeed builds one model-parallel degree for every rank")
    add("train/plan-stage-tp-mixed-not-dividing",
        T("--plan", mixed("plan-mixed-3.json", rep("GH-96", 2, 4) + rep("GH-96", 3, 4)),
          "--framework", "sailor-deepspeed", *one), refuse("tp"),
        note="TP 2 and 3 in one stage: the artifact runs TP 1, 2 or 4 only "
             "(core/parallel_state.py:112-114), which all divide the largest")
    add("train/plan-tp8-sailor-framework",
        T("--plan", plan("plan-tp8-sailor.json", [{"first_layer": 0, "last_layer": 25,
                                                   "replicas": rep("GH-96", 8, 8)}]),
          "--framework", "sailor-deepspeed", *one), refuse("tp"),
        note="TP 8 under the artifact's framework: its Megatron-DeepSpeed asserts TP 1, 2 or 4 "
             "(core/parallel_state.py:112-114)")
    add("train/plan-stage-tp-mixed-overlap",
        T("--plan", mix, "--framework", "sailor-deepspeed", "--sync",
          "allreduce:overlap=backward", *one), refuse("sync"),
        note="the artifact reduces a mixed stage's groups after the backward pass")
    add("train/plan-stage-tp-mixed-tied-ends",
        T("--plan", plan("plan-mixed-ends.json", [
            {"first_layer": 0, "last_layer": 11, "replicas": rep("GH-96", 2, 4) * 2},
            {"first_layer": 12, "last_layer": 25,
             "replicas": rep("GH-96", 2, 4) + rep("GH-96", 4, 4)}]),
          "--framework", "sailor-deepspeed", "--profiles", tied_profiles(), *one),
        refuse("plan"), note="a tied OPT-350 (tied_embeddings true): the last stage's replicas "
        "TP 2 and 4")
    hosted = [dict(x, host=f"h{k}") for k, x in enumerate(rep("GH-96", 1, 4)
                                                          + rep("GH-96", 2, 4))]
    add("train/plan-stage-tp-mixed-hosts",
        T("--plan", plan("plan-mixed-hosts.json", [
            {"first_layer": 0, "last_layer": 25, "replicas": hosted}], gbs=8),
          "--framework", "sailor-deepspeed", *one), refuse("plan"),
        note="a mixed stage on named hosts is not timed (the artifact's plans have none)")
    sailor_doc = {"pipeline_list": [{"num_stages": 1, "layers_per_stage": [list(range(26))],
                                     "tmp_per_stage": [[[[["A100-40", 2, "us-central1-a"]], 4]]],
                                     "dp": [1]}], "mbs": 2, "gbs": 8}
    wide = fx.root / "sailor-tp-over-vm.json"
    wide.write_text(_json.dumps(sailor_doc))
    add("train/plan-sailor-tp-over-vm", T("--plan", str(wide), "--model", "OPT-350", *one),
        refuse("tp"), note="TP 4 on a VM of 2 GPUs: the artifact starts a replica on one VM")
    two_vms = fx.root / "sailor-two-vms.json"
    two_vms.write_text(_json.dumps({**sailor_doc, "pipeline_list": [{
        **sailor_doc["pipeline_list"][0], "tmp_per_stage": [[[[["A100-40", 2, "us-central1-a"],
                                                               ["A100-40", 2, "us-central1-a"]],
                                                              4]]]}]}))
    add("train/plan-sailor-replica-two-vms",
        T("--plan", str(two_vms), "--model", "OPT-350", *one), refuse("plan"),
        note="a replica over two VMs: the artifact's controller sends its ranks to one node")
    tp8 = fx.root / "sailor-tp8.json"
    tp8.write_text(_json.dumps({**sailor_doc, "pipeline_list": [{
        **sailor_doc["pipeline_list"][0],
        "tmp_per_stage": [[[[["A100-40", 8, "us-central1-a"]], 8]]]}]}))
    add("train/plan-sailor-tp8", T("--plan", str(tp8), "--model", "OPT-350", *one),
        refuse("tp"), note="a Sailor plan at TP 8: the artifact's Megatron-DeepSpeed asserts TP "
        "1, 2 or 4 (core/parallel_state.py:112-114)")
    add("train/plan-sailor-tp8-megatron",
        T("--plan", str(tp8), "--model", "OPT-350", "--framework", "megatron", *one),
        ok("step time"), note="the same plan run by Megatron-LM, which runs TP 8")
    add("train/plan-gpu-not-in-profile",
        T("--plan", plan("plan-h100.json", [{"first_layer": 0, "last_layer": 25,
                                             "replicas": rep("H100", 4, 4)}]), *one),
        refuse("gpu"), note="a GPU type the profile lacks")
    add("train/plan-layers-not-covering",
        T("--plan", plan("plan-short.json", [{"first_layer": 0, "last_layer": 20,
                                              "replicas": gh}]), *one),
        refuse("layers"), note="layers 0..20 of OPT-350's 0..25")
    add("train/plan-layers-gap",
        T("--plan", plan("plan-gap.json", [{"first_layer": 0, "last_layer": 10, "replicas": gh},
                                           {"first_layer": 12, "last_layer": 25,
                                            "replicas": gh}]), *one),
        refuse("layers"))
    add("train/plan-tp-without-profile",
        T("--plan", plan("plan-tp8.json", [{"first_layer": 0, "last_layer": 25,
                                            "replicas": rep("GH-96", 8, 8)}]), *one),
        ok("TP 8 derived from TP 1"), note="GH-96 was profiled at TP 1, 2, 4: TP 8 is derived "
        "from TP 1 and the output says so")
    add("train/plan-out-of-memory",
        T("--plan", plan("plan-oom.json", [{"first_layer": 0, "last_layer": 25,
                                            "replicas": rep("RTX-2080", 2, 8)}], mbs=8, gbs=64),
          *one),
        refuse("plan"), note="all of OPT-350 at micro-batch 8 on an 11 GiB RTX-2080 pair")
    add("train/plan-microbatch-without-profile",
        T("--plan", plan("plan-mbs3.json", [{"first_layer": 0, "last_layer": 25,
                                             "replicas": gh}], mbs=3, gbs=6), *one),
        ok("interpolated from the profiled sizes 2 and 4"),
        note="an unprofiled size between profiled ones: estimated, and the output says so")
    add("train/plan-microbatch-too-far",
        T("--plan", plan("plan-mbs512.json", [{"first_layer": 0, "last_layer": 25,
                                               "replicas": gh}], mbs=512, gbs=512), *one),
        refuse("microbatch_size"), note="beyond twice the largest profiled size (128)")
    add("train/plan-tp-without-tp1-unprofiled-microbatch",
        T("--plan", plan("plan-opt30-tp2-mbs3.json", [{"first_layer": 0, "last_layer": 49,
                                                       "replicas": rep("V100-16", 2, 4)}],
                         mbs=3, gbs=6, model="OPT-30"), *one),
        refuse("tp"), note="OPT-30 on V100-16 was profiled at TP 4 only: TP 2 has no TP-1 time "
        "to derive from at any size (it named microbatch_size, which TP 4 would estimate)")
    add("train/plan-missing-file", T("--plan", str(fx.root / "nope.json")), refuse("plan"))
    bad = fx.root / "plan-bad.json"
    bad.write_text('{"stages": [')
    add("train/plan-not-json", T("--plan", str(bad)), refuse("plan"))
    sailor = str(Path(__file__).resolve().parent.parent / "sim" / "profiles" / "data" / "runs"
                 / "mit-N2_D1.json")
    add("train/plan-sailor-without-model", T("--plan", sailor, *one), refuse("model"),
        note="a Sailor plan_config does not name its model")
    add("train/plan-unknown-model", T("--plan", good, "--model", "GPT-X", *one), refuse("model"))
    add("train/plan-with-stages", T("--plan", good, "--stages", "4"), refuse("stages"))
    add("train/plan-with-forward-time", T("--plan", good, "--forward-time", "1"),
        refuse("forward_time"))
    add("train/plan-with-hour", T("--plan", good, "--hour", "60"), refuse("hour"),
        note="a plan's times are seconds: --hour relabelled them (time to train in min)")
    add("train/explain-without-plan", T("--explain"), refuse("explain"))
    add("train/model-without-plan", T("--model", "OPT-350"), refuse("model"))
    add("train/plan-skip-with-blocking", T("--plan", good, "--skip-budget", "1", *one),
        refuse("skip_budget"), note="DeepSpeed's blocking pipeline cannot skip a stage")
    add("train/plan-failures-without-restart", T("--plan", good, "--mtbf", "100", *one),
        refuse("restart_cost"), note="a framework run restarts from its checkpoint")
    add("train/plan-strategy-rebalance-1e10", T("--plan", good, "--mtbf", "100", "--strategy",
                                                "redundancy:rebalance=1e10", *one),
        refuse("rebalance"), note="audit 7: a rebalance failures always interrupt: hours")
    add("train/plan-restart-without-failures", T("--plan", good, "--restart-cost", "5", *one),
        refuse("restart_cost"), note="audit 7: no failure, no lost step: accepted and ignored")
    add("train/restart-cost-without-failures", T("--restart-cost", "5"), refuse("restart_cost"),
        note="audit 7: accepted and ignored")
    add("train/restart-cost-with-checkpoints-runs", T("--restart-cost", "5", "--checkpoint-every",
                                                      "2", "--steps", "2", "--replications", "1"),
        ok("throughput"), note="a checkpoint interval needs the restart model even without "
        "failures (its checkpoints cost time)")
    add("train/plan-profiles-not-folder", T("--plan", good, "--profiles", str(fx.file), *one),
        refuse("profiles"))
    add("train/plan-interleaved", T("--plan", good, "--schedule", "interleaved", *one),
        refuse("schedule"))
    add("train/plan-1f1b-dynamic", T("--plan", good, "--schedule", "1f1b-dynamic", *one),
        refuse("schedule"), note="a plan runs over its network: 1f1b or gpipe, said before "
        "the plan is read")
    series = fx.root / "plan-prices.csv"
    series.write_text("time,price\n0,1\n")
    add("train/plan-price-series", T("--plan", good, "--price-series", str(series), *one),
        refuse("price_series"), note="a plan's --price is per GPU-hour")
    add("train/plan-arrival", T("--plan", good, "--arrival", "poisson", *one), refuse("arrival"),
        note="audit 7: accepted and ignored (a plan never runs async; without --plan the "
             "config refuses it)")
    add("train/p2p-unknown-without-network", T("--p2p", "sometimes"), refuse("p2p"))
    add("train/interleaved-microbatches", T("--schedule", "interleaved", "--virtual-stages", "2",
                                            "--stages", "4", "--microbatches-per-step", "6"),
        refuse("microbatches"))
    add("train/virtual-stages-without-interleaved", T("--virtual-stages", "2"),
        refuse("virtual_stages"))
    add("train/backward-time-negative", T("--backward-time", "-1"), refuse("backward_times"))

    # a Megatron-LM launch line as a plan (sim.profiles.megatron_args): read, never run
    # (the shipped OPT-350 is untied, as the Sailor artifact's OPTModelPipe builds it: the
    # launch unties too, Megatron-LM's GPT tying by default)
    def launch(name: str, extra: str = "", nodes: int = 2, per: int = 4, tp: int = 2,
               layers: int = 24, gbs: int = 16, tail: str = "", untie: bool = True) -> str:
        p = fx.root / name
        flag = "--untie-embeddings-and-output-weights " if untie else ""
        p.write_text(f"torchrun --nnodes {nodes} --nproc-per-node {per} pretrain_gpt.py "
                     f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size 2 "
                     f"--num-layers {layers} --micro-batch-size 2 --global-batch-size {gbs} "
                     f"{flag}{extra}\n{tail}")
        return str(p)

    M = ("--model", "OPT-350", "--gpu", "RTX-3090", "--zone", "us-central1-a", *one)
    add("train/megatron-launch-runs", T("--plan", launch("ml-good.sh", "--fp16"), *M),
        ok("step time"))
    # two replicas a host under a step-level strategy: the host fails whole (a trace's
    # instance, one availability process, one spot slot a host)
    add("train/megatron-two-replicas-a-host-strategy",
        T("--plan", launch("ml-2r.sh"), *M, "--strategy", "checkpoint-restart"),
        ok("failures per host"))
    by_worker = fx.root / "ml-2r-workers.csv"
    by_worker.write_text("worker,start,end\ns0r0,1,2\n")
    add("train/megatron-two-replicas-a-host-worker-csv",
        T("--plan", launch("ml-2r.sh"), *M, "--strategy", "checkpoint-restart",
          "--failure-trace", str(by_worker)), refuse("failure_trace"),
        note="a CSV of workers s{j}r{i} names replicas, not the host that fails whole")
    add("train/megatron-interleaved-swarm",
        T("--plan", launch("ml-vp.sh", "--num-layers-per-virtual-pipeline-stage 6", tp=1),
          *M, "--strategy", "swarm"), refuse("plan"),
        note="interleaving is refused by the launch reader, with --strategy swarm too")
    add("train/megatron-one-replica-a-host-strategy",
        T("--plan", launch("ml-1r.sh", nodes=4, per=2), *M, "--strategy", "reconfiguration"),
        ok("strategy reconfiguration"))
    add("train/megatron-zone-inferred", T("--plan", launch("ml-z.sh"), "--model", "OPT-350",
                                          "--gpu", "RTX-3090", *one), ok("step time"),
        note="the network has one zone for RTX-3090: taken")
    add("train/megatron-zone-ambiguous", T("--plan", launch("ml-z2.sh"), "--model", "OPT-350",
                                           "--gpu", "GH-96", *one), refuse("zone"),
        note="GH-96 has links in five zones")
    add("train/megatron-zone-unknown", T("--plan", launch("ml-z3.sh"), "--model", "OPT-350",
                                         "--gpu", "RTX-3090", "--zone", "mars", *one),
        refuse("zone"))
    add("train/megatron-world-not-divisible", T("--plan", launch("ml-w.sh", nodes=1, per=3), *M),
        refuse("plan"), note="world 3 over TP 2 x PP 2 (Megatron-LM arguments.py:432)")
    add("train/megatron-layers-mismatch", T("--plan", launch("ml-l.sh", layers=12), *M),
        refuse("plan"), note="--num-layers 12 for OPT-350's 24 transformer layers")
    add("train/megatron-layers-not-dividing", T("--plan", launch("ml-l3.sh", layers=23), *M),
        refuse("plan"), note="23 layers over 2 stages (arguments.py:985-997)")
    add("train/megatron-shape-mismatch",
        T("--plan", launch("ml-sh.sh", "--seq-length 1024 --hidden-size 1024"), *M),
        refuse("plan"), note="OPT-350 was profiled at 2048 x 1024 values per sample")
    add("train/megatron-sequence-parallel",
        T("--plan", launch("ml-sp.sh", "--sequence-parallel"), *M), refuse("plan"),
        note="an option dtsim does not model")
    add("train/megatron-context-parallel",
        T("--plan", launch("ml-cp.sh", "--context-parallel-size 2"), *M), refuse("plan"))
    add("train/megatron-expert-parallel",
        T("--plan", launch("ml-ep.sh", "--expert-model-parallel-size 2"), *M), refuse("plan"))
    add("train/megatron-virtual-pipeline",
        T("--plan", launch("ml-vp.sh", "--num-layers-per-virtual-pipeline-stage 6"), *M),
        refuse("plan"))
    add("train/megatron-distributed-optimizer",
        T("--plan", launch("ml-do.sh", "--fp16 --use-distributed-optimizer"), *M),
        ok("optimizer: distributed"), note="modelled: the gradients reduce-scattered, the "
        "optimizer state 1/dp a rank, the parameters all-gathered after the step")
    add("train/megatron-ddp-pad-buckets-for-high-nccl-busbw",
        T("--plan", launch("ml-dpb.sh", "--fp16 --use-distributed-optimizer "
                           "--ddp-pad-buckets-for-high-nccl-busbw"), *M), refuse("plan"),
        note="the buckets padded to lcm(dp, 128, 2**16) elements: dtsim models lcm(dp, 128)")
    add("train/megatron-overlap-param-gather-alone",
        T("--plan", launch("ml-opg.sh", "--overlap-param-gather --overlap-grad-reduce"), *M),
        refuse("plan"), note="Megatron-LM asserts --use-distributed-optimizer with it "
        "(arguments.py:1024-1029)")
    add("train/megatron-overlap-param-gather-no-overlap-grad",
        T("--plan", launch("ml-opg2.sh", "--overlap-param-gather --use-distributed-optimizer"),
          *M), refuse("plan"), note="Megatron-LM asserts --overlap-grad-reduce with it")
    add("train/megatron-overlap-param-gather-not-modelled",
        T("--plan", launch("ml-opg3.sh", "--overlap-param-gather --use-distributed-optimizer "
                           "--overlap-grad-reduce"), *M), refuse("plan"),
        note="each stage's first forward pass waits for its all-gather after receiving its "
        "input (the forward pre-hook; align_param_gather off without interleaving)")
    add("train/megatron-param-gather-with-optimizer-step",
        T("--plan", launch("ml-opg4.sh", "--overlap-param-gather-with-optimizer-step"), *M),
        refuse("plan"), note="Megatron-LM runs it only with the interleaved schedule "
        "(arguments.py:1066-1072)")
    add("train/framework-overlap-param-gather-alone",
        T("--plan", launch("ml-opg5.sh"), *M, "--framework",
          "megatron:overlap_param_gather=true,overlap_grad_reduce=true"),
        refuse("overlap_param_gather"), note="the same assert on a plan's framework keys")
    add("train/framework-distributed-optimizer-0.8.0",
        T("--plan", launch("ml-do8.sh"), *M, "--framework",
          "megatron:version=0.8.0,use_distributed_optimizer=true"),
        refuse("framework_options"), note="core_v0.8.0's all-gather (from zero_grad) not read")
    # the attention's options (sim.profiles.frameworks.attention_path) and Megatron-LM's
    # asserts on them, each a one-line refusal before any work
    add("train/megatron-attention-backend-local",
        T("--plan", launch("ml-al.sh", "--fp16 --attention-backend local"), *M), refuse("plan"),
        note="Megatron-LM asserts local runs only with --spec local (arguments.py:436-437)")
    add("train/megatron-attention-flash-fp32",
        T("--plan", launch("ml-af.sh", "--attention-backend flash"), *M),
        refuse("attention_backend"), note="Transformer Engine has no flash attention in fp32")
    add("train/megatron-attention-flash-v100",
        T("--plan", launch("ml-av.sh", "--fp16 --attention-backend flash"), "--model",
          "OPT-350", "--gpu", "V100-16", "--zone", "us-central1-a", *one),
        refuse("attention_backend"), note="compute capability 7.0: TE's flash and fused "
        "attention need 8.0")
    add("train/megatron-transformer-impl-inference",
        T("--plan", launch("ml-ti.sh", "--fp16 --transformer-impl inference_optimized"), *M),
        refuse("plan"))
    add("train/megatron-recompute-full",
        T("--plan", launch("ml-rf.sh", "--fp16 --recompute-granularity full"), *M),
        refuse("plan"), note="full recomputation is not modelled")
    add("train/megatron-recompute-selective-method",
        T("--plan", launch("ml-rm.sh", "--fp16 --recompute-activations --recompute-method "
                                       "uniform"), *M),
        refuse("plan"), note="Megatron-LM asserts selective takes no method "
        "(arguments.py:1425-1428)")
    add("train/megatron-recompute-modules",
        T("--plan", launch("ml-rmo.sh", "--fp16 --recompute-activations --recompute-modules "
                                        "mlp"), *M), refuse("plan"))
    add("train/megatron-recompute-modules-list",
        T("--plan", launch("ml-rml.sh", "--fp16 --recompute-activations --recompute-modules "
                                        "core_attn layernorm"), *M), refuse("plan"),
        note="nargs '+': the module not modelled is named, not read as a positional word")
    add("train/megatron-spec", T("--plan", launch("ml-spec.sh", "--fp16 --spec local"), *M),
        refuse("plan"), note="a layer spec of its own: its attention is not known")
    add("train/megatron-legacy-models",
        T("--plan", launch("ml-legacy.sh", "--fp16 --use-legacy-models"), *M), refuse("plan"),
        note="core_v0.9.0 to core_v0.17.0's legacy GPT model: its own attention")
    add("train/megatron-recompute-measured",
        T("--plan", launch("ml-rme.sh", "--fp16 --recompute-activations"), *M),
        refuse("recompute_granularity"), note="OPT-350's measured times have no part for the "
        "core attention that selective recomputation reruns")
    add("train/megatron-underscore-spelling",
        T("--plan", launch("ml-us.sh", "--sequence_parallel"), *M), refuse("plan"),
        note="Megatron-LM has no --foo_bar spelling (allow_abbrev=False)")
    add("train/megatron-tied", T("--plan", launch("ml-ut.sh", untie=False), *M),
        refuse("plan"), note="OPT-350's profile does not tie its embedding and head (the "
        "artifact's OPTModelPipe); a launch without --untie-embeddings-and-output-weights ties")
    add("train/megatron-fp16-and-bf16", T("--plan", launch("ml-pr.sh", "--fp16 --bf16"), *M),
        refuse("plan"))
    add("train/megatron-gbs-not-dividing", T("--plan", launch("ml-gb.sh", gbs=15), *M),
        refuse("plan"))
    add("train/megatron-tp-across-nodes",
        T("--plan", launch("ml-tn.sh", nodes=4, per=1), *M), refuse("plan"))
    add("train/megatron-unset-variable",
        T("--plan", launch("ml-var.sh", "--hidden-size 1 $GPT_ARGS"), *M), refuse("plan"))
    add("train/megatron-command-substitution",
        T("--plan", launch("ml-cmd.sh", f"--seq-length $(touch {fx.root}/ran)"), *M),
        refuse("plan"), note="never run: the scratch folder stays as it is")
    add("train/megatron-two-launches",
        T("--plan", launch("ml-2.sh", tail="python pretrain_bert.py\n"), *M), refuse("plan"))
    # Megatron-LM v1.1.5 on DeepSpeed 0.3.13 (sim.profiles.deepspeed_args): the launch line,
    # its ds_config and hostfile read as data next to it, never run
    def ds_launch(name: str, extra: str = "", launcher: str = "--num_nodes 2 --num_gpus 4",
                  config: dict | None = None, hosts: str | None = "w0 slots=4\nw1 slots=4\n",
                  mp: str = "2") -> str:
        d = fx.root / name
        d.mkdir(exist_ok=True)
        if config is not None:
            (d / "ds_config.json").write_text(json.dumps(config))
        if hosts is not None:
            (d / "hostfile").write_text(hosts)
        p = d / "launch.sh"
        p.write_text(f"deepspeed {launcher} pretrain_gpt2.py --model-parallel-size {mp} "
                     "--pipe-parallel-size 2 --num-layers 24 --hidden-size 1024 "
                     "--seq-length 2048 --batch-size 2 --fp16 --deepspeed "
                     f"--deepspeed_config ds_config.json {extra}\n")
        return str(p)

    dsc = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
           "train_batch_size": 16, "fp16": {"enabled": True}}
    add("train/deepspeed-launch-missing-ds-config", T("--plan", ds_launch("ds-nc"), *M),
        refuse("plan"), note="the --deepspeed_config file is not next to the launch file")
    add("train/deepspeed-launch-batch-arithmetic",
        T("--plan", ds_launch("ds-ba", config={**dsc, "train_batch_size": 24}), *M),
        refuse("plan"), note="24 != micro 2 x gas 4 x DP 2 (DeepSpeed 0.3.13 config.py:674)")
    add("train/deepspeed-launch-unknown-world",
        T("--plan", ds_launch("ds-uw", launcher="", config=dsc, hosts=None), *M),
        refuse("plan"), note="no hostfile and no --num_gpus: the local machine's GPU count "
        "(runner.py:262-270) is not in the file")
    # user trial 10: --gpu per host (a mixed cluster), [NAME,]HOST=NAME,...
    mixed = [x for x in M if x not in ("--gpu", "RTX-3090")]
    add("train/deepspeed-launch-gpu-unknown-host",
        T("--plan", ds_launch("ds-gh", config=dsc), *mixed, "--gpu", "RTX-3090,w9=Titan-RTX"),
        refuse("gpu"), note="w9 is no host of the hostfile (w0, w1): a typo ran it on the default")
    add("train/deepspeed-launch-gpu-host-without-type",
        T("--plan", ds_launch("ds-gn", config=dsc), *mixed, "--gpu", "w0=RTX-3090"),
        refuse("gpu"), note="w1 has no GPU type and there is no default")
    add("train/deepspeed-launch-gpu-two-defaults",
        T("--plan", ds_launch("ds-g2", config=dsc), *mixed, "--gpu", "RTX-3090,Titan-RTX"),
        refuse("gpu"), note="two default types")
    add("train/deepspeed-launch-hostfile-missing",
        T("--plan", ds_launch("ds-hm", launcher="-H /home/u/hosts", config=dsc), *M),
        refuse("plan"), note="the hostfile --hostfile names is not next to the launch file")
    add("train/deepspeed-launch-positional",
        T("--plan", ds_launch("ds-pos", config=dsc, mp="$1"), *M), refuse("plan"),
        note="$1 as --model-parallel-size: never evaluated")
    add("train/deepspeed-launch-checkpoint-activations",
        T("--plan", ds_launch("ds-ckpt", "--checkpoint-activations", config=dsc), *M),
        refuse("plan"), note="the DeepSpeed 0.3.13 table has no recomputation option")
    bert = Path(ds_launch("ds-bert", config=dsc))
    bert.write_text(bert.read_text().replace("pretrain_gpt2.py", "pretrain_bert.py"))
    add("train/deepspeed-launch-bert-script", T("--plan", str(bert), *M), refuse("plan"),
        note="pretrain_bert.py builds BertModel, not GPT2ModelPipe: not read as GPT-2")
    # user trial 10: if/elif/else/fi, && and || read by their branches; a condition dtsim does
    # not evaluate (a file test, say) leaves what it guards unknown
    cond = Path(ds_launch("ds-cond", config=dsc))
    cond.write_text("if [ -f big.flag ]; then\n" + cond.read_text() + "fi\n")
    add("train/deepspeed-launch-under-file-test", T("--plan", str(cond), *M), refuse("plan"),
        note="the launch runs only if big.flag exists: a file test dtsim does not evaluate")
    condmp = Path(ds_launch("ds-condmp", config=dsc, mp="${mp}"))
    condmp.write_text("mp=2\n[ -f big.flag ] && mp=4\n" + condmp.read_text())
    add("train/deepspeed-launch-tp-under-file-test", T("--plan", str(condmp), *M),
        refuse("plan"), note="--model-parallel-size set under a file test: 2 or 4, unknown "
        "(before, the && branch was always read: TP 4)")
    add("train/deepspeed-launch-untied-profile",
        T("--plan", ds_launch("ds-ut", config=dsc), *M), refuse("plan"),
        note="GPT2ModelPipe ties its embedding and head; the shipped OPT-350 is untied")
    # audit4: the launch, its ds_config and hostfile at their limits
    deep = "[" * 100000 + "]" * 100000
    add("train/deepspeed-launch-ds-config-nested",
        T("--plan", ds_launch("ds-deep", config=dsc), *M), refuse("plan"),
        note="a ds_config 100,000 arrays deep: RecursionError traceback before")
    (fx.root / "ds-deep" / "ds_config.json").write_text(deep)
    add("train/deepspeed-launch-ds-config-5000-digits",
        T("--plan", ds_launch("ds-digits", config=dsc), *M), refuse("plan"),
        note="gradient_accumulation_steps of 5000 digits: a ValueError traceback (int_max_str_"
             "digits) before")
    (fx.root / "ds-digits" / "ds_config.json").write_text(
        '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": ' + "9" * 5000 + "}")
    for name, cfg, why in (
            ("pipeline-not-a-table", {**dsc, "pipeline": [1]}, "DeepSpeed calls .items() on it: "
             "it was ignored"),
            ("checkpoint-interval-text", {**dsc, "pipeline": {"activation_checkpoint_interval":
                                                             "0"}},
             "it said \"interval 0 is activation checkpointing\""),
            ("amp-enabled-text", {**dsc, "amp": {"enabled": "false"}},
             "a true text to DeepSpeed; it was shown as True"),
            ("zero-stage-text", {**dsc, "zero_optimization": {"stage": "1"}},
             "DeepSpeed 0.3.13 compares it with 0: a TypeError (runtime/config.py:614)"),
            ("zero-stage-null", {**dsc, "zero_optimization": {"stage": None}},
             "None > 0 is a TypeError in DeepSpeed 0.3.13 (runtime/config.py:614); it ran"),
            ("zero-stage-4", {**dsc, "zero_optimization": {"stage": 4}},
             "DeepSpeed 0.3.13 asserts at most 3 (runtime/config.py:758)"),
            ("zero-optimization-null", {**dsc, "zero_optimization": None},
             "None.get in DeepSpeed 0.3.13 (zero/config.py:51, 68-71); it ran"),
            ("pipeline-null", {**dsc, "pipeline": None},
             "None.items() in DeepSpeed 0.3.13 (runtime/config.py:376); it ran")):
        add(f"train/deepspeed-launch-{name}", T("--plan", ds_launch(f"ds-{name}", config=cfg), *M),
            refuse("plan"), note=why)
    add("train/deepspeed-launch-zero-stage-negative-runs",
        T("--plan", ds_launch("ds-zero-neg", config={**dsc, "zero_optimization": {"stage": -1}}),
          *M[:-4], "--profiles", tied_profiles(), *one), ok("step time"),
        note="DeepSpeed 0.3.13 turns ZeRO on for stage > 0 only (runtime/config.py:612-614): "
        "stage -1 runs without ZeRO; it was refused ('an integer 0 to 3')")
    add("train/deepspeed-launch-slots-5000-digits",
        T("--plan", ds_launch("ds-sd", config=dsc, hosts="w0 slots=" + "9" * 5000 + "\n"), *M),
        refuse("plan"), note="a ValueError traceback before")
    add("train/deepspeed-launch-num-gpus-5000-digits",
        T("--plan", ds_launch("ds-gd", launcher="--num_gpus " + "9" * 5000, config=dsc), *M),
        refuse("plan"), note="a ValueError traceback before (also the torchrun reader's _int)")
    add("train/deepspeed-launch-slots-1e9",
        T("--plan", ds_launch("ds-s9", launcher="", config=dsc,
                              hosts="w0 slots=1000000000\nw1 slots=4\n"), *M),
        refuse("plan"), timeout=60, note="10^9 GPUs: a list of every slot, a hang before")
    add("train/deepspeed-launch-num-gpus-1e9-overrides-slots",
        T("--plan", ds_launch("ds-g9", launcher="--num_nodes 2 --num_gpus 1000000000",
                              config=dsc), *M), refuse("plan"), timeout=60,
        note="--num_gpus 10^9 on each host: a hang before")
    add("train/deepspeed-launch-huge-slots-unused-runs",
        T("--plan", ds_launch("ds-su", config=dsc, hosts="w0 slots=1000000000\nw1 slots=4\n"),
          *M[:-4], "--profiles", tied_profiles(), *one), ok("step time"), timeout=60,
        note="--num_gpus 4 overrides the hostfile's slots (runner.py:298-302): a hang before")
    tilde = Path(ds_launch("ds-tilde", config=dsc))
    tilde.write_text(tilde.read_text().replace("ds_config.json", "~/ds_config.json"))
    add("train/deepspeed-launch-home-path-runs",
        T("--plan", str(tilde), *M[:-4], "--profiles", tied_profiles(), *one), ok("step time"),
        note="~/ds_config.json is looked up by its name next to the launch, as an absolute path")
    crlf = Path(ds_launch("ds-crlf", config=dsc))
    crlf.write_bytes(crlf.read_text().replace(" --num-layers", " \\\n  --num-layers")
                     .replace("\n", "\r\n").encode())
    add("train/deepspeed-launch-crlf-continuation-runs",
        T("--plan", str(crlf), *M[:-4], "--profiles", tied_profiles(), *one), ok("step time"),
        note="a backslash before a Windows line end continues the line (it was refused: '\\r')")
    (fx.root / "empty-launch.sh").write_text("")
    add("train/launch-empty-file-with-gpu",
        T("--plan", str(fx.root / "empty-launch.sh"), *M), refuse("plan"),
        note="it named 'gpu' (given only with a launch plan), not the empty file")
    add("train/megatron-without-gpu",
        T("--plan", launch("ml-ng.sh"), "--model", "OPT-350", *one), refuse("gpu"))
    add("train/megatron-unknown-gpu",
        T("--plan", launch("ml-ug.sh"), "--model", "OPT-350", "--gpu", "H100", *one),
        refuse("gpu"))
    add("train/megatron-without-model",
        T("--plan", launch("ml-nm.sh"), "--gpu", "RTX-3090", *one), refuse("model"))
    add("train/megatron-gpu-with-dtsim-plan", T("--plan", good, "--gpu", "GH-96", *one),
        refuse("gpu"))
    add("train/megatron-gpu-without-plan", T("--gpu", "GH-96"), refuse("gpu"))
    add("train/megatron-zone-without-plan", T("--zone", "z"), refuse("zone"))
    return cases


def strategy_cases(fx: Fixtures) -> list[Case]:
    """Fault-tolerance strategies, preemption notices, billing: ``dtsim train --strategy``."""
    T = lambda *a: dtsim("train", *a)  # noqa: E731
    D = lambda *a: dtsim("design", *a)  # noqa: E731
    livelock = ("--stages", "48", "--replicas", "2", "--skip-budget", "16", "--skip-penalty",
                "0.1", "--schedule", "swarm", "--failure-trace", "aws-p3", "--trace-policy",
                "recent+tile", "--trace-loop", "--price", "3.06", "--steps", "4",
                "--checkpoint-every", "2", "--checkpoint-cost", "1", "--restart-cost", "1",
                "--replications", "2")
    return [
        Case("train/stall-limit-zero", T("--stall-limit", "0"), refuse("stall_limit")),
        Case("train/stall-limit-nan", T("--stall-limit", "nan"), refuse("stall_limit")),
        Case("train/livelock-max-time", T(*livelock, "--max-time", "3000"),
             ok("why (2 of 2 stalled"), timeout=120,
             note="issue 23's example: ends with a one-line reason, not 2840 s of restarts"),
        Case("train/livelock-no-max-time", T(*livelock), ok("stopped without progress"),
             timeout=180, note="no --max-time: stopped by the stall watchdog, with the reason"),
        Case("design/trace-policy-recent", D("--failure-trace", "aws-p3", "--trace-policy",
                                             "recent"), refuse("trace_policy")),
        Case("design/trace-tile", D("--failure-trace", "aws-p3", "--trace-policy",
                                    "random+tile"), refuse("trace_policy")),
        Case("design/trace-with-availability", D("--failure-trace", "aws-p3",
                                                 "--availability", "0.5"), refuse("availability")),
        Case("design/trace-with-domain-outage", D("--failure-trace", "aws-p3",
                                                  "--domain-outage", "0.01"),
             refuse("domain_outage")),
        Case("design/trace-with-rate", D("--failure-trace", "aws-p3", "--verify", "--rate", "2"),
             refuse("rate")),
        Case("design/trace-loop", D("--failure-trace", "aws-p3", "--trace-loop"),
             refuse("trace_loop")),
        Case("design/trace-unknown", D("--failure-trace", "no-such-trace"),
             refuse("failure_trace")),
        Case("design/trace-dtsim-csv", D("--failure-trace", str(fx.trace_ok)),
             refuse("failure_trace")),
        Case("design/trace-too-few-slots", D("--failure-trace", "aws-p3", "--stages", "40"),
             ok("fewer than the 40 stages")),
        Case("train/price-series-missing", T("--price-series", str(fx.root / "none.csv")),
             refuse("price_series")),
        Case("train/price-series-binary", T("--price-series", str(fx.binary)),
             refuse("price_series")),
        Case("train/price-series-columns", T("--price-series", str(fx.trace_ok)),
             refuse("price_series")),
        Case("train/price-series-late-start", T("--price-series", str(_prices(fx, "late",
                                                                               "5,1\n"))),
             refuse("price_series")),
        Case("train/price-series-negative", T("--price-series", str(_prices(fx, "neg",
                                                                             "0,1\n9,-2\n"))),
             refuse("price_series")),
        Case("train/price-series-unsorted", T("--price-series", str(_prices(fx, "unsorted",
                                                                             "0,1\n9,2\n4,3\n"))),
             refuse("price_series")),
        Case("train/price-series-with-price", T("--price-series", str(_prices(fx, "okp", "0,1\n")),
                                                "--price", "2"), refuse("price")),
        Case("train/price-series-ok", T("--price-series", str(_prices(fx, "ok", "0,3\n100,1\n")),
                                        "--replications", "2"), ok("samples per dollar")),
        Case("train/strategy-unknown", T("--strategy", "bogus"), refuse("strategy")),
        Case("train/strategy-empty", T("--strategy", ""), refuse("strategy")),
        Case("train/strategy-unknown-param", T("--strategy", "checkpoint-restart:bogus=1"),
             refuse("strategy")),
        Case("train/strategy-param-twice", T("--strategy", "redundancy:every=1,every=2"),
             refuse("strategy")),
        Case("train/strategy-param-no-value", T("--strategy", "redundancy:every"),
             refuse("strategy")),
        Case("train/strategy-every-zero", T("--strategy", "checkpoint-restart:every=0"),
             refuse("every")),
        Case("train/strategy-every-text", T("--strategy", "checkpoint-restart:every=ten"),
             refuse("every")),
        Case("train/strategy-interval-unknown",
             T("--strategy", "checkpoint-restart:interval=sometimes"), refuse("interval")),
        Case("train/strategy-copy-blocking", T("--strategy", "checkpoint-restart:copy=1"),
             refuse("copy")),
        Case("train/strategy-slowdown-below-1", T("--strategy", "redundancy:slowdown=0.5"),
             refuse("slowdown")),
        Case("train/strategy-threshold-above-1", T("--strategy", "redundancy:threshold=2"),
             refuse("threshold")),
        Case("train/strategy-redundancy-mode-unknown", T("--strategy", "redundancy:mode=fast"),
             refuse("mode")),
        Case("train/strategy-boot-negative", T("--strategy", "reconfiguration:boot=-1"),
             refuse("boot")),
        Case("train/strategy-min-nodes-above-L", T("--stages", "4", "--strategy",
                                                  "reconfiguration:min_nodes=9"),
             refuse("min_nodes")),
        Case("train/strategy-swarm-gpipe", T("--strategy", "swarm", "--schedule", "gpipe"),
             refuse("schedule")),
        Case("train/strategy-swarm-boot", T("--strategy", "swarm:boot=45"), refuse("boot")),
        Case("train/strategy-async", T("--strategy", "redundancy", "--schedule", "async"),
             refuse("strategy")),
        Case("train/strategy-with-skips", T("--strategy", "redundancy", "--skip-budget", "1"),
             refuse("skip_budget")),
        Case("train/strategy-fewer-workers-than-stages", T("--stages", "4", "--replicas", "1",
                                                          "--strategy", "reconfiguration:min_nodes=5"),
             refuse("min_nodes")),
        Case("train/strategy-exponential-passes", T("--strategy", "checkpoint-restart",
                                                   "--pass-time-distribution", "exponential"),
             refuse("pass_time_distribution")),
        Case("train/strategy-checkpoint-on-swarm-moved", T(
            "--strategy", "redundancy", "--checkpoint-every", "3", "--checkpoint-cost", "2",
            "--restart-cost", "7", "--mtbf", "3000", "--replace-time", "60", "--replications",
            "2"), ok("strategy redundancy:restart=7.0,every=3,checkpoint=2.0"),
             note="--checkpoint-every/--checkpoint-cost/--restart-cost set the strategy's"),
        Case("train/strategy-reconfigure-no-restart-field", T(
            "--strategy", "swarm", "--restart-cost", "5", "--checkpoint-every", "2",
            "--replications", "2"), ok("strategy swarm"),
             note="swarm keeps today's restart model: the options are the config's"),
        Case("train/engine-job-without-strategy", T("--engine", "job"), refuse("engine")),
        Case("train/engine-des-with-strategy", T("--engine", "des", "--strategy", "redundancy"),
             refuse("engine")),
        Case("train/step-times-without-strategy", T("--step-times", str(_steps(fx, "ok",
                                                                               "workers", "4,10\n"))),
             refuse("step_times")),
        Case("train/step-times-missing", T("--strategy", "redundancy", "--step-times",
                                          str(fx.root / "none.csv")), refuse("step_times")),
        Case("train/step-times-columns", T("--strategy", "redundancy", "--step-times",
                                          str(fx.trace_ok)), refuse("step_times")),
        Case("train/step-times-zero", T("--strategy", "redundancy", "--step-times",
                                       str(_steps(fx, "zero", "workers", "4,0\n"))),
             refuse("step_times")),
        Case("train/step-times-text", T("--strategy", "redundancy", "--step-times",
                                       str(_steps(fx, "text", "pipelines", "one,3\n"))),
             refuse("step_times")),
        Case("train/step-times-repeated", T("--strategy", "redundancy", "--step-times",
                                           str(_steps(fx, "rep", "workers", "4,3\n4,5\n"))),
             refuse("step_times")),
        Case("train/step-times-ok", T("--strategy", "reconfiguration", "--stages", "2",
                                     "--replicas", "2", "--step-times",
                                     str(_steps(fx, "okp", "pipelines", "1,18\n2,10\n")),
                                     "--replications", "2"), ok("time to train")),
        Case("train/notice-without-preemptions", T("--strategy", "redundancy",
                                                  "--preemption-notice", "aws"),
             refuse("preemption_notice"), note="it named the config's 'notice' (120.0)"),
        Case("train/notice-without-strategy", T("--mtbf", "100", "--preemption-notice", "30"),
             refuse("preemption_notice"), note="it named the config's 'notice' (30.0)"),
        Case("train/notice-huge-hours", T("--strategy", "redundancy", "--mtbf", "100",
                                          "--preemption-notice", "1e300h"),
             refuse("preemption_notice"),
             note="it named the config's 'notice' with 3.6e+303 s, its bound without a unit"),
        Case("train/notice-text", T("--strategy", "redundancy", "--mtbf", "100",
                                    "--preemption-notice", "soon"), refuse("preemption_notice")),
        Case("train/notice-negative", T("--strategy", "redundancy", "--mtbf", "100",
                                        "--preemption-notice", "-5"), refuse("preemption_notice"),
             note="it named the config's 'notice', not the option typed"),
        Case("train/notice-inf", T("--strategy", "redundancy", "--mtbf", "100",
                                   "--preemption-notice", "inf"), refuse("preemption_notice"),
             note="it said \"'notice' must be >= 0: inf\""),
        Case("train/notice-huge-unit", T("--strategy", "redundancy", "--mtbf", "100",
                                         "--preemption-notice", "1e400s"),
             refuse("preemption_notice")),
        Case("train/notice-gcp-ok", T("--strategy", "checkpoint-restart", "--mtbf", "3000",
                                      "--replace-time", "60", "--preemption-notice", "gcp",
                                      "--replications", "2"), ok("preemption notice 30")),
        Case("train/strategy-livelock-fixed", T(*[a for a in livelock if a not in (
            "--skip-budget", "16", "--skip-penalty", "0.1")], "--strategy", "checkpoint-restart"),
             ok("time to train"), timeout=180,
             note="issue 23's example runs to the end once pipelines are re-formed"),
    ]


def _steps(fx: Fixtures, name: str, per: str, rows: str) -> Path:
    """A step-time CSV ``<per>,step_time`` with ``rows`` under the fixtures' folder."""
    p = fx.root / f"steps_{name}.csv"
    p.write_text(f"{per},step_time\n" + rows)
    return p


def _prices(fx: Fixtures, name: str, rows: str) -> Path:
    """A price-series CSV ``time,price`` with ``rows`` under the fixtures' folder."""
    p = fx.root / f"prices_{name}.csv"
    p.write_text("time,price\n" + rows)
    return p


def hardening_cases(fx: Fixtures) -> list[Case]:
    """Data is never code, no runaway, no hang, no silent ignore (every command)."""
    cases: list[Case] = []
    T = fx.root
    good = str(fx.experiments["good"])
    fifo = {k: str(v) for k, v in fx.fifo.items()}

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    # -- a results folder is data: dtsim plot never runs the file its manifest names --
    add("plot/manifest-names-code", dtsim("plot", str(fx.planted)), ok(".png"),
        must_not_exist=(str(fx.marker),), timeout=120,
        note="the manifest names a file that would write a marker: default figures, no code")
    # -- worker counts beyond the machine: refused before any process or file --
    for cmd, extra in (("run", (good, "--out", str(T / "h_w1"))),
                       ("reproduce", ("--quick", "--out", str(T / "h_w2"))),
                       ("pipeline", ("--executor", "local")),
                       ("gossip", ("--executor", "local")),
                       ("train", ("--executor", "local"))):
        add(f"{cmd}/workers-100000", dtsim(cmd, *extra, "--workers", "100000"), refuse("workers"),
            note="the fork bomb: at most the CPUs this machine has")
    add("run/workers-100000-dask", dtsim("run", good, "--executor", "dask", "--workers", "100000",
                                         "--out", str(T / "h_w3")), refuse("workers"))
    add("design/verify-workers-100000", dtsim("design", "--verify", "--executor", "local",
                                              "--workers", "100000"), refuse("workers"))
    add("api/replicate-workers-100000", api(
        "import sim; sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=2, seed=0, executor='local', workers=100000)"), refuse("workers"))
    # -- a FIFO, a device or a folder where a file is read: refused unread --
    for dev in ("/dev/zero", "/dev/urandom", fifo["trace.csv"]):
        what = "fifo" if dev.startswith(str(T)) else dev.rsplit("/", 1)[1]
        add(f"trace/stats-{what}", dtsim("trace", "stats", dev), refuse("trace"), timeout=20)
    add("failures/trace-fifo", dtsim("failures", "--failure-trace", fifo["trace.csv"]),
        refuse("failure_trace"), timeout=20)
    add("failures/trace-dev-zero", dtsim("failures", "--trace", "/dev/zero"),
        refuse("trace|failure_trace"), timeout=20)
    add("pipeline/failure-trace-dev-urandom", dtsim("pipeline", "--failure-trace", "/dev/urandom"),
        refuse("failure_trace"), timeout=20)
    add("train/failure-trace-fifo", dtsim("train", "--failure-trace", fifo["trace.csv"]),
        refuse("failure_trace"), timeout=20)
    add("train/speeds-fifo", dtsim("train", "--speeds", fifo["speeds.csv"]), refuse("speeds"),
        timeout=20)
    add("train/speeds-dev-zero", dtsim("train", "--speeds", "/dev/zero"), refuse("speeds"),
        timeout=20)
    add("pipeline/speeds-fifo", dtsim("pipeline", "--queueing", "--speeds", fifo["speeds.csv"]),
        refuse("speeds"), timeout=20)
    add("topologies/graph-fifo", dtsim("topologies", fifo["graph.graphml"]), refuse("topology"),
        timeout=20)
    add("topologies/builder-fifo", dtsim("topologies", fifo["builder.py"] + ":build"),
        refuse("topology"), timeout=20)
    add("gossip/topology-fifo", dtsim("gossip", "--topology", fifo["graph.graphml"]),
        refuse("topology"), timeout=20)
    add("gossip/objective-file-fifo", dtsim("gossip", "--objective", "quadratic",
                                            "--objective-file", fifo["objective.csv"]),
        refuse("objective_file"), timeout=20)
    add("run/experiment-fifo", dtsim("run", fifo["exp.py"], "--out", str(T / "h_e1")),
        refuse("experiment"), timeout=20)
    add("reproduce/study-file-fifo", dtsim("reproduce", "--quick", "--experiments",
                                           str(fx.fifo_studies), "--out", str(T / "h_r1")),
        refuse("experiments"), timeout=20)
    add("plot/records-fifo", dtsim("plot", str(T / "hard" / "fifo_records")), refuse("OUTDIR"),
        timeout=20)
    add("plot/records-is-a-folder", dtsim("plot", str(T / "hard" / "dir_records")),
        refuse("OUTDIR"), timeout=20)
    add("run/records-is-a-folder", dtsim("run", good, "--executor", "serial",
                                         "--out", str(T / "hard" / "dir_records")),
        refuse("out"), timeout=20, note="found when the store opens, before any task runs")
    add("api/read_trace-fifo", api(f"import sim; sim.read_trace({fifo['trace.csv']!r})"),
        refuse("trace"), timeout=20)
    add("api/load_trace-dev-zero", api("import sim; sim.load_trace('/dev/zero')"),
        refuse("trace"), timeout=20)
    if (REPO / "sim" / "profiles" / "documents.py").is_file():
        add("api/read_document-fifo", api(
            "from sim.profiles.documents import read_document; "
            f"read_document('plan', {fifo['trace.csv'].replace('.csv', '.csv')!r})"),
            refuse("plan"), timeout=20)
        add("api/read_document-dev-zero", api(
            "from sim.profiles.documents import read_document; read_document('plan', '/dev/zero')"),
            refuse("plan"), timeout=20)
    # -- unbounded work: refused with a stated limit --
    add("design/verify-microbatches-1e12", dtsim("design", "--verify", "--microbatches",
                                                 "1000000000000"), refuse("microbatches"),
        timeout=30)

    # -- tracebacks --
    b = str(fx.builders)
    hx = {k: str(v) for k, v in fx.hard_exp.items()}
    g = {k: str(v) for k, v in fx.graphs.items()}
    H = fx.planted.parent
    add("topologies/erdos-renyi-p-nan", dtsim("topologies", "erdos_renyi:n=10,p=nan"),
        refuse("topology"))
    add("topologies/barabasi-albert-m-inf", dtsim("topologies", "barabasi_albert:n=10,m=inf"),
        refuse("topology"))
    add("topologies/builder-raises", dtsim("topologies", b + ":boom"), refuse("topology"))
    add("gossip/topology-builder-raises", dtsim("gossip", "--topology", b + ":boom"),
        refuse("topology"))
    add("run/base-refers-to-itself", dtsim("run", hx["selfref"], "--out", str(T / "h_s1")),
        refuse("base"))
    add("run/analyse-raises", dtsim("run", hx["analyse_raises"], "--executor", "serial", "--quiet",
                                    "--out", str(T / "h_a1")), fail("analyse"),
        note="the results are stored and printed first")
    add("run/analyse-exits", dtsim("run", hx["analyse_exits"], "--executor", "serial", "--quiet",
                                   "--out", str(T / "h_a2")), fail("sys.exit(4)"))
    add("plot/analyse-raises", dtsim("plot", str(H / "analysed"), "--experiment",
                                     hx["analyse_raises"]), fail("analyse"))
    add("plot/experiment-without-analyse", dtsim("plot", str(H / "planted"), "--experiment",
                                                 good), refuse("experiment"),
        note="named, a file without analyse() is refused, not replaced by default figures")
    add("plot/manifest-wrong-type", dtsim("plot", str(H / "wrong_type")), refuse("OUTDIR"))
    add("plot/metric-unknown", dtsim("plot", str(H / "planted"), "--metric", "nope"),
        refuse("metric"), note="--metric names a metric the results measured")
    add("plot/metric-with-experiment", dtsim("plot", str(H / "planted"), "--metric", "x",
                                             "--experiment", good), refuse("metric"))
    add("plot/manifest-damaged", dtsim("plot", str(H / "damaged")), refuse("OUTDIR"))
    add("trace/stats-skypilot-nested-100000", dtsim("trace", "stats", str(fx.nested_json)),
        refuse("trace"), note="was a RecursionError")
    add("trace/plot-out-unknown-extension", dtsim("trace", "plot", "aws-p3", "--out",
                                                  str(T / "h_t.bogus")), refuse("out"))
    add("trace/plot-out-existing-folder", dtsim("trace", "plot", "aws-p3", "--out",
                                                str(fx.dir)), refuse("out"))
    add("trace/plot-out-proc", dtsim("trace", "plot", "aws-p3", "--out", "/proc/x.png"),
        refuse("out"), note="was a failure after the work, not naming the option")
    # -- silent exits --
    add("topologies/builder-exits", dtsim("topologies", b + ":leave"), refuse("topology"))
    add("run/model-exits-serial", dtsim("run", hx["exitmodel"], "--executor", "serial",
                                        "--quiet", "--out", str(T / "h_x1")), fail("sys.exit(3)"),
        note="the tasks that call sys.exit fail alone; the others are stored")
    add("run/model-exits-local-pool", dtsim("run", hx["exitmodel"], "--executor", "local",
                                            "--workers", "1", "--quiet", "--out", str(T / "h_x2")),
        fail("sys.exit(3)"), timeout=120)
    add("api/replicate-model-exits", api(
        "import sys, sim\n"
        "def m(config, streams):\n    sys.exit(5)\n"
        "r = sim.replicate(m, sim.ClusterConfig(horizon=10.0), replications=2, seed=0)\n"
        "print(r[0]['error'])"), ok("sys.exit(5)"))
    # -- silently dropped or accepted --
    add("gossip/nodes-contradict-graph-file", dtsim("gossip", "--topology", g["g20.graphml"],
                                                    "--nodes", "50"), refuse("nodes"))
    add("topologies/nodes-contradict-graph-file", dtsim("topologies", g["g20.graphml"],
                                                        "--nodes", "50"), refuse("nodes"))
    for name in ("selfloop.graphml", "directed.graphml", "multi.graphml", "dup.edges",
                 "loop.edges"):
        add(f"gossip/graph-file-{name.replace('.', '-')}", dtsim("gossip", "--topology", g[name]),
            refuse("topology"), note="never run as if the edge were not there")
    add("topologies/builder-directed", dtsim("topologies", b + ":directed"), refuse("topology"))
    add("failures/domains-above-workers", dtsim("failures", "--cluster-workers", "4",
                                                "--domains", "8"), refuse("domains"))
    add("failures/mean-downtime-at-availability-1", dtsim("failures", "--availability", "1",
                                                          "--mean-downtime", "5"),
        refuse("mean_downtime"))
    add("pipeline/mean-downtime-at-availability-1", dtsim("pipeline", "--availability", "1",
                                                          "--mean-downtime", "5"),
        refuse("mean_downtime"))
    add("train/mean-downtime-at-availability-1", dtsim("train", "--availability", "1",
                                                       "--mean-downtime", "5"),
        refuse("mean_downtime"))
    add("gossip/burn-in-above-rounds", dtsim("gossip", "--rounds", "3", "--burn-in", "10"),
        refuse("burn_in"))
    for cmd, extra in (("run", (good,)), ("reproduce", ("--quick",)), ("bench", ("--quick",)),
                       ("trace", ("plot", "aws-p3"))):
        add(f"{cmd}/out-empty", dtsim(cmd, *extra, "--out", ""), refuse("out"))
    add("pipeline/event-log-empty", dtsim("pipeline", "--event-log", ""), refuse("event_log"))
    add("gossip/topology-empty", dtsim("gossip", "--topology", ""), refuse("topology"))
    add("bench/out-dev-full", dtsim("bench", "--quick", "--parts", "simpy", "--out", "/dev/full"),
        refuse("out"), note="was 'appended to /dev/full'")
    add("run/base-not-a-config", dtsim("run", hx["base5"], "--out", str(T / "h_b1")),
        refuse("BASE"))
    add("run/base-nan", dtsim("run", hx["base_nan"], "--out", str(T / "h_b2")), refuse("BASE"))
    add("run/rates-name-no-metric", dtsim("run", hx["rates_none"], "--executor", "serial",
                                          "--quiet", "--out", str(T / "h_r2")), refuse("RATES"),
        allow_work=True, note="known only once a task returns: stopped at the first one, "
                              "which stays stored")
    add("run/nonnegative-name-no-metric", dtsim("run", hx["nonneg_none"], "--executor", "serial",
                                                "--quiet", "--out", str(T / "h_r3")),
        refuse("NONNEGATIVE"), allow_work=True)
    add("run/nonnegative-value-negative", dtsim("run", hx["nonneg_neg"], "--executor", "serial",
                                                 "--quiet", "--out", str(T / "h_r4")),
        refuse("NONNEGATIVE"), allow_work=True,
        note="known once the tasks return; names the metric and point (user trial 15)")
    add("run/analyse-not-callable", dtsim("run", hx["analyse3"], "--out", str(T / "h_a3")),
        refuse("analyse"))
    add("api/replicate-model-not-callable", api(
        "import sim; sim.replicate(5, sim.ClusterConfig(horizon=10.0), replications=2, seed=0)"),
        refuse("model"))
    add("api/summarize-missing-metric", api(
        "import sim; r = sim.replicate(sim.failures_model, sim.ClusterConfig(horizon=10.0), "
        "replications=2, seed=0); sim.summarize(r, ['no_such_metric'])"), refuse("metrics"))
    # -- wrong exits --
    add("failures/weibull-shape-1e-300", dtsim("failures", "--distribution", "weibull",
                                               "--shape", "1e-300"), refuse("shape"),
        note="was an OverflowError in every replication")
    add("pipeline/lognormal-shape-1e3", dtsim("pipeline", "--distribution", "lognormal",
                                              "--shape", "1000"), refuse("failure_shape"))
    # -- numpy warnings --
    add("api/mean_ci-infinite-metric", api(
        "import math, sim, warnings; warnings.simplefilter('default'); "
        "print(sim.mean_ci([math.inf, 1.0]), sim.mean_ci([1e308, 1e308]))"), ok("no interval"))
    add("gossip/adversary-value-1e308", dtsim("gossip", "--adversary", "stubborn",
                                              "--adversary-value", "1e308", "--rounds", "3",
                                              "--replications", "2"), refuse("adversary_value"),
        note="was numpy overflow warnings: squared distances of such values are not doubles")
    add("gossip/adversary-value-1e150", dtsim("gossip", "--adversary", "stubborn",
                                              "--adversary-value", "1e150", "--rounds", "3",
                                              "--replications", "2"), ok("gossip"),
        note="the largest value accepted runs with a clean stderr")
    # -- the results store --
    add("run/store-exact-duplicate-line", dtsim("run", good, "--executor", "serial", "--quiet",
                                                "--out", str(H / "duplicate")),
        ok("exact copies of stored lines were set aside"))
    add("run/store-renamed-header-cell", dtsim("run", good, "--executor", "serial", "--quiet",
                                               "--out", str(H / "renamed")),
        ok("restored from manifest.json"))
    add("run/store-damaged-manifest", dtsim("run", good, "--executor", "serial", "--quiet",
                                            "--out", str(H / "damaged")),
        ok("manifest.json was damaged"))
    return cases


def byzantine_cases(fx: Fixtures) -> list[Case]:
    """Attack scopes, new defences, momentum, mixing weights: ``dtsim gossip``."""
    cases: list[Case] = []
    if not _has_option("gossip", "--attack-scope"):
        return cases

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, argv, expect, **kw))

    G = lambda *a: dtsim("gossip", *a)  # noqa: E731
    N = ("--protocol", "neighbourhood", "--rounds", "3", "--replications", "2")
    Q = ("--objective", "quadratic")
    ring = ("--topology", "ring:n=10")
    no_weight = fx._write("byz_no_weight.edges", "0 1\n1 2\n2 0\n")
    heavy = fx._write("byz_heavy.edges", "0 1 weight=0.7\n1 2 weight=0.4\n2 0 weight=0.2\n")
    negative = fx._write("byz_negative.edges", "0 1 weight=-0.1\n1 2 weight=0.3\n2 0 weight=0.3\n")
    text_w = fx._write("byz_text.edges", "0 1 weight=heavy\n1 2 weight=0.3\n2 0 weight=0.3\n")
    good = fx._write("byz_ok.edges", "0 1 weight=0.25\n1 2 weight=0.25\n2 3 weight=0.25\n"
                     "3 0 weight=0.25\n0 2 weight=0.1\n")
    add("byz/attack-scope-unknown", G("--adversary", "alie", "--attack-scope", "near"),
        refuse("attack_scope"))
    add("byz/attack-scope-stubborn", G("--adversary", "stubborn", "--attack-scope", "local"),
        refuse("attack_scope"))
    add("byz/attack-scope-without-adversary", G("--attack-scope", "local"), refuse("attack_scope"))
    add("byz/alie-local-default-undefined", G(*N, "--adversary", "alie", "--attack-scope", "local",
                                              "--num-adversaries", "11"), refuse("adversary_value"))
    add("byz/bitflip-edge", G("--protocol", "edge", "--adversary", "bitflip"), refuse("protocol"))
    add("byz/bitflip-value", G(*N, "--adversary", "bitflip", "--adversary-value", "3"),
        refuse("adversary_value"))
    add("byz/mixing-unknown", G(*N, "--mixing", "heavy"), refuse("mixing"))
    add("byz/mixing-matching", G("--mixing", "uniform"), refuse("mixing"))
    add("byz/mixing-weight-complete", G(*N, "--mixing", "weight"), refuse("mixing"))
    add("byz/mixing-weight-missing", G(*N, "--topology", str(no_weight), "--mixing", "weight"),
        refuse("weight"))
    add("byz/mixing-weight-row-above-1", G(*N, "--topology", str(heavy), "--mixing", "weight"),
        refuse("weight"))
    add("byz/mixing-weight-negative", G(*N, "--topology", str(negative), "--mixing", "weight"),
        refuse("weight"))
    add("byz/mixing-weight-text", G(*N, "--topology", str(text_w), "--mixing", "weight"),
        refuse("weight"))
    add("byz/gossip-rounds-zero", G(*N, "--gossip-rounds", "0"), refuse("gossip_rounds"))
    add("byz/gossip-rounds-matching", G("--gossip-rounds", "2"), refuse("gossip_rounds"))
    add("byz/momentum-one", G(*N, *Q, "--momentum", "1"), refuse("momentum"))
    add("byz/momentum-negative", G(*N, *Q, "--momentum", "-0.5"), refuse("momentum"))
    add("byz/momentum-without-objective", G(*N, "--momentum", "0.9"), refuse("objective"))
    add("byz/rule-unknown", G(*N, *Q, "--rule", "bulyan"), refuse("rule"))
    add("byz/krum-f-too-many", G(*N, *Q, *ring, "--adversary", "ipm", "--rule", "krum"),
        refuse("krum_f"))
    add("byz/krum-m-too-many", G(*N, *Q, "--rule", "krum", "--krum-m", "40"), refuse("krum_m"))
    add("byz/krum-m-without-krum", G(*N, *Q, "--krum-m", "2"), refuse("krum_m"))
    add("byz/krum-variant-unknown", G(*N, *Q, "--rule", "krum", "--krum-variant", "fast"),
        refuse("krum_variant"))
    add("byz/rfa-iters-zero", G(*N, *Q, "--rule", "rfa", "--rfa-iters", "0"), refuse("rfa_iters"))
    add("byz/rfa-nu-negative", G(*N, *Q, "--rule", "rfa", "--rfa-nu", "-1"), refuse("rfa_nu"))
    add("byz/rfa-iters-without-rfa", G(*N, *Q, "--rfa-iters", "4"), refuse("rfa_iters"))
    add("byz/cc-tau-negative", G(*N, *Q, "--rule", "centered-clip", "--cc-tau", "-1"),
        refuse("cc_tau"))
    add("byz/cc-iters-zero", G(*N, *Q, "--rule", "centered-clip", "--cc-iters", "0"),
        refuse("cc_iters"))
    add("byz/cc-tau-without-rule", G(*N, *Q, "--cc-tau", "1"), refuse("cc_tau"))
    add("byz/bucketing-negative", G(*N, *Q, "--bucketing", "-2"), refuse("bucketing"))
    add("byz/bucketing-edge", G("--protocol", "edge", *Q, "--bucketing", "2"), refuse("bucketing"))
    add("byz/bucketing-adaptive", G(*N, *Q, "--adversary", "ipm", "--adaptive-clip", "--bucketing",
                                    "2"), refuse("bucketing"))
    add("byz/bucketing-form-unknown", G(*N, *Q, "--bucketing", "2", "--bucketing-form", "sorted"),
        refuse("bucketing_form"))
    add("byz/bucketing-form-without-bucketing", G(*N, *Q, "--bucketing-form", "permute"),
        refuse("bucketing_form"))
    add("byz/compiled-local-scope", G("--protocol", "edge", "--adversary", "alie", "--attack-scope",
                                      "local", "--engine", "compiled"), refuse("engine"))
    add("byz/compiled-momentum", G("--protocol", "async", *Q, "--momentum", "0.5", "--engine",
                                   "compiled", "--rounds", "2"), refuse("engine"))
    add("byz/ok-local-momentum-krum", G(*N, *Q, "--topology", "complete", "--nodes", "12",
                                        "--adversary", "alie", "--attack-scope", "local",
                                        "--num-adversaries", "2", "--rule", "krum", "--momentum",
                                        "0.9", "--bucketing", "2"), ok("gossip training"))
    add("byz/ok-weight-mixing", G(*N, "--topology", str(good), "--mixing", "weight",
                                  "--adversary", "dissensus", "--attack-scope", "local"),
        ok("gossip"))
    return cases


def sibling_cases(fx: Fixtures) -> list[Case]:
    """Fastest-k synchronisation and the exact checkpoint interval."""
    TR = lambda *a: dtsim("train", *a)  # noqa: E731
    one = ("--stages", "1", "--replicas", "4", "--microbatches-per-step", "4",
           "--backward-ratio", "0")
    spot = ("--stages", "2", "--mtbf", "100", "--checkpoint-cost", "1")
    return [
        Case("siblings/sync-wait-zero", TR(*one, "--sync-wait", "0"), refuse("sync_wait")),
        Case("siblings/sync-wait-above-n", TR(*one, "--sync-wait", "5"), refuse("sync_wait")),
        Case("siblings/sync-wait-swarm", TR(*one, "--sync-wait", "2", "--schedule", "swarm",
                                            "--routing", "queue"), refuse("sync_wait")),
        Case("siblings/sync-wait-unequal-replicas",
             TR("--stages", "2", "--replicas", "2,3", "--sync-wait", "2"), refuse("sync_wait")),
        Case("siblings/sync-wait-zero-forward-time",
             TR(*one, "--sync-wait", "2", "--forward-time", "0"), refuse("forward_time")),
        Case("siblings/stragglers-without-sync-wait", TR(*one, "--stragglers", "drop"),
             refuse("stragglers")),
        Case("siblings/stragglers-unknown", TR(*one, "--sync-wait", "2", "--stragglers", "wait"),
             refuse("stragglers")),
        Case("siblings/sync-wait-text", TR(*one, "--sync-wait", "two"), refuse("--sync-wait")),
        Case("siblings/pareto-pass-without-shape",
             TR(*one, "--pass-time-distribution", "pareto"), refuse("pass_time_shape")),
        Case("siblings/pareto-pass-infinite-mean",
             TR(*one, "--pass-time-distribution", "pareto", "--pass-time-shape", "0.8"),
             refuse("pass_time_shape"), note="Pareto mean infinite where a mean is asked"),
        Case("siblings/pass-shape-with-exponential",
             TR(*one, "--pass-time-distribution", "exponential", "--pass-time-shape", "2"),
             refuse("pass_time_shape")),
        Case("siblings/pareto-failures-without-shape",
             dtsim("failures", "--distribution", "pareto"), refuse("shape")),
        Case("siblings/pareto-failures-infinite-mean",
             dtsim("failures", "--distribution", "pareto", "--shape", "1"), refuse("shape")),
        Case("siblings/pareto-order-statistic-infinite-mean",
             api("from sim import analytic; analytic.pareto_order_statistic_moment(8, 8, 0.8)"),
             refuse("k"), note="waiting for all of 8 Pareto(0.8) workers: no finite mean"),
        Case("siblings/checkpoint-auto-without-failures",
             TR("--checkpoint-every", "auto", "--checkpoint-cost", "1", "--restart-cost", "1"),
             refuse("checkpoint_every"), note="auto without a failure model"),
        Case("siblings/checkpoint-auto-without-restart",
             TR(*spot, "--checkpoint-every", "auto"), refuse("checkpoint_every")),
        Case("siblings/checkpoint-auto-two-replicas",
             TR(*spot, "--replicas", "2", "--checkpoint-every", "auto", "--restart-cost", "1"),
             refuse("checkpoint_every")),
        Case("siblings/checkpoint-auto-weibull",
             TR("--stages", "2", "--availability", "0.9", "--failure-distribution", "weibull",
                "--checkpoint-every", "auto", "--checkpoint-cost", "1", "--restart-cost", "1"),
             refuse("checkpoint_every")),
        Case("siblings/checkpoint-auto-free-checkpoints",
             TR("--stages", "2", "--mtbf", "100", "--checkpoint-every", "auto",
                "--restart-cost", "1"), refuse("checkpoint_cost")),
        Case("siblings/checkpoint-every-text", TR("--checkpoint-every", "often"),
             refuse("--checkpoint-every")),
        Case("siblings/checkpoint-interval-zero-cost",
             api("from sim import analytic; analytic.optimal_checkpoint_interval(0, 10)"),
             refuse("checkpoint_cost")),
        Case("siblings/efficiency-wall-target-one",
             api("from sim import analytic; analytic.efficiency_wall(100, 1, 0, 1.0)"),
             refuse("efficiency")),
        Case("siblings/fastest-k-lr-unstable",
             api("from sim.learning import FastestKConfig; FastestKConfig(lr=2.5)"),
             refuse("lr")),
        Case("siblings/fastest-k-k-above-n",
             api("from sim.learning import FastestKConfig; FastestKConfig(workers=4, k=5)"),
             refuse("k")),
        Case("siblings/fastest-k-estimator-unknown",
             api("from sim.learning import FastestKConfig; FastestKConfig(estimator='median')"),
             refuse("estimator")),
        Case("siblings/checkpoint-auto-ok",
             TR("--stages", "1", "--microbatches-per-step", "1", "--steps", "20", "--mtbf", "50",
                "--checkpoint-every", "auto", "--checkpoint-cost", "1", "--restart-cost", "1",
                "--replications", "2"), ok("checkpointing every"),
             note="auto picks K from the exact interval"),
    ]


def planner_cases(fx: Fixtures) -> list[Case]:
    """The plan search: ``dtsim plan`` (fleets, batch sizes, objectives, prices, options)."""
    if not _has_command("plan"):
        return []
    P = lambda *a: dtsim("plan", "--model", "OPT-350", *a)  # noqa: E731
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    gh = ["--nodes", "GH-96:4x2@us-central1-a"]
    quick = ["--global-batch-size", "8", "--simulate", "0", "--top", "1"]
    add("plan/runs", P(*gh, *quick), ok("predicted"))
    add("plan/no-fleet", P("--global-batch-size", "8"), refuse("fleet"))
    add("plan/mtbf-size-unit", P(*gh, *quick, "--mtbf", "5GB"), refuse("mtbf"))
    add("plan/restart-cost-unknown-unit", P(*gh, *quick, "--mtbf", "1h", "--restart-cost",
                                            "2 fortnights"), refuse("restart_cost"))
    add("plan/two-fleets", P(*gh, "--fleet-from-runs", "mit-N2_D1"), refuse("fleet"))
    add("plan/no-batch-size", P(*gh), refuse("global_batch_size"),
        note="--nodes gives no batch size; --fleet-from-runs gives the runs' one")
    add("plan/batch-size-zero", P(*gh, "--global-batch-size", "0"), refuse("global_batch_size"))
    add("plan/runs-with-two-batch-sizes",
        P("--fleet-from-runs", "clariden-OPT-350-N2_D1,clariden-OPT-350-N4_D1"),
        refuse("global_batch_size"), note="32 and 64")
    add("plan/unknown-model", dtsim("plan", "--model", "GPT-X", *gh, *quick), refuse("model"))
    add("plan/unknown-run", P("--fleet-from-runs", "no-such-run"), refuse("fleet_from_runs"))
    add("plan/nodes-not-a-spec", P("--nodes", "GH-96x4", *quick), refuse("nodes"))
    add("plan/nodes-zero-gpus", P("--nodes", "GH-96:0x2@us-central1-a", *quick), refuse("nodes"))
    add("plan/nodes-gpu-not-in-profile", P("--nodes", "H100:8x2@us-central1-a", *quick),
        refuse("fleet"), note="no GPU of the fleet was profiled for OPT-350")
    add("plan/objective-unknown", P(*gh, *quick, "--objective", "speed"), refuse("objective"))
    add("plan/cost-without-prices", P("--nodes", "RTX-3090:2x1@us-central1-a", *quick,
                                      "--objective", "cost"), refuse("prices"),
        note="the catalogue has no price for RTX-3090")
    add("plan/price-not-a-pair", P(*gh, *quick, "--price", "GH-96"), refuse("price"))
    add("plan/price-negative", P(*gh, *quick, "--price", "GH-96=-1"), refuse("prices"))
    add("plan/tp-not-fitting", P("--nodes", "A100-80:1x1@us-central1-a", *quick, "--tp", "4"),
        refuse("tp"), note="a 1-GPU node cannot hold a TP group of 4")
    add("plan/microbatch-not-dividing", P(*gh, *quick, "--microbatch-sizes", "3"),
        refuse("microbatch_sizes"))
    add("plan/layouts-unknown", P(*gh, *quick, "--layouts", "grid"), refuse("layouts"))
    add("plan/memory-fraction-zero", P(*gh, *quick, "--memory-fraction", "0"),
        refuse("memory_fraction"))
    add("plan/memory-fraction-above-one", P(*gh, *quick, "--memory-fraction", "1.5"),
        refuse("memory_fraction"))
    add("plan/fleet-too-small", P("--nodes", "RTX-2080:1x1@us-central1-a", "--global-batch-size",
                                  "64", "--microbatch-sizes", "8", "--simulate", "0"),
        refuse("fleet"), note="OPT-350 at micro-batch 8 does not fit one 11 GiB GPU")
    add("plan/top-zero", P(*gh, *quick[:2], "--top", "0"), refuse("top"))
    add("plan/simulate-negative", P(*gh, *quick[:2], "--simulate", "-1"), refuse("simulate"))
    add("plan/steps-zero", P(*gh, *quick, "--steps", "0"), refuse("steps"))
    add("plan/max-stages-zero", P(*gh, *quick, "--max-stages", "0"), refuse("max_stages"))
    add("plan/schedule-interleaved", P(*gh, *quick, "--schedule", "interleaved"),
        refuse("schedule"))
    add("plan/schedule-1f1b-dynamic", P(*gh, *quick, "--schedule", "1f1b-dynamic"),
        refuse("schedule"), note="was taken, then every plan refused: 'fleet' must be GPUs "
        "enough to hold OPT-350")
    add("plan/p2p-unknown", P(*gh, *quick, "--p2p", "sometimes"), refuse("p2p"))
    add("plan/p2p-batched-gpipe", P(*gh, *quick, "--p2p", "batched", "--schedule", "gpipe"),
        refuse("schedule"))
    add("plan/out-names-p2p", P("--nodes", "RTX-2080:4x1@us-central1-a", "--global-batch-size",
                                "64", "--simulate", "0", "--top", "1", "--p2p", "batched",
                                "--out", str(fx.root / "plan-out-p2p.json")),
        ok("--p2p batched)"),
        note="the printed dtsim train command names the --p2p the plans were searched with "
        "(the plan file holds its framework, not an override); 11 GB GPUs: two stages or more")
    add("plan/out-one-stage-no-p2p", P(*gh, *quick, "--p2p", "batched", "--out",
                                       str(fx.root / "plan-out-p2p1.json")),
        ok("--model OPT-350)"),
        note="a one-stage best plan: the printed command has no --p2p (dtsim train refuses it "
        "for one stage)")
    add("plan/megatron-gpipe", P(*gh, *quick, "--framework", "megatron", "--schedule", "gpipe"),
        refuse("schedule"))
    add("plan/framework-options", P(*gh, *quick, "--framework",
                                    "megatron:overlap_grad_reduce=true", "--out",
                                    str(fx.root / "plan-out-fw.json")),
        ok("plan 1 written"), note="the written plan's framework table holds the options")
    add("plan/framework-distributed-optimizer", P(*gh, *quick, "--framework",
                                                  "megatron:use_distributed_optimizer=true"),
        ok("searched"))
    add("plan/framework-overlap-param-gather-alone",
        P(*gh, *quick, "--framework", "megatron:overlap_param_gather=true"),
        refuse("overlap_param_gather"))
    add("plan/framework-option-unknown", P(*gh, *quick, "--framework", "ddp:bucket_mb=5"),
        refuse("framework_options"))
    add("plan/megatron-selective-measured", P(*gh, *quick, "--framework",
                                              "megatron:recompute_granularity=selective"),
        refuse("recompute_granularity"), note="OPT-350's measured layer times have no part "
        "for the core attention selective recomputation reruns: refused before the search, "
        "not every plan dropped")
    add("plan/megatron-attention-local", P(*gh, *quick, "--framework",
                                           "megatron:attention_backend=local"),
        refuse("attention_backend"), note="Megatron-LM asserts --spec local with it")
    add("plan/megatron-attention-backend-0.9", P(*gh, *quick, "--framework",
                                                 "megatron:version=0.9.0,attention_backend=auto"),
        refuse("framework_options"), note="attention_backend came with core 0.11.0")
    add("plan/framework-0.3.13-no-sequence", P(*gh, *quick, "--framework",
                                               "deepspeed:version=0.3.13"),
        refuse("seq_length"), note="its hops carry a seq x seq mask the search cannot size: "
        "refused before the search, not every pipeline dropped as unplaceable")
    add("plan/framework-0.3.13-sequence", P(*gh, *quick, "--framework",
                                            "deepspeed:version=0.3.13,seq_length=2048"),
        ok("searched"))
    add("plan/framework-deepspeed-0.14.4", P(*gh, *quick, "--framework",
                                             "deepspeed:version=0.14.4"), ok("searched"))
    add("plan/framework-deepspeed-before-0.9", P(*gh, *quick, "--framework",
                                                 "deepspeed:version=0.8.3"),
        refuse("framework_version"), note="releases before 0.9.0 (but 0.3.13) not read")
    add("plan/framework-ddp-bucket-tiny", P(*gh, *quick, "--framework",
                                            "ddp:bucket_cap_mb=1e-300"),
        refuse("bucket_cap_mb"), note="the search's bounds used to run for ever")
    add("plan/compare-without-runs", P(*gh, *quick, "--compare-runs"), refuse("compare_runs"))
    add("plan/failures-without-restart", P(*gh, *_override(quick, ("--simulate", "1", "--mtbf",
                                                                  "100"))),
        refuse("restart_cost"),
        note="a framework run restarts from its last checkpoint")
    add("plan/failures-without-restart-megatron", P(*gh, *_override(quick, (
        "--simulate", "1", "--mtbf", "100", "--framework", "megatron"))),
        refuse("restart_cost"), note="names p2p batched, Megatron-LM's (said p2p blocking)")
    add("plan/replace-time-without-mtbf", P(*gh, *quick, "--replace-time", "5"),
        refuse("replace_time"))
    add("plan/out-is-folder", P(*gh, *quick, "--out", str(fx.root)), refuse("out"))
    add("plan/fleet-file-missing", P("--fleet", str(fx.root / "nope.json"), *quick),
        refuse("fleet"))
    node = '{"gpu": "GH-96", "gpus_per_node": 4, "zone": "us-central1-a", '
    add("plan/fleet-file-key-typo",
        P("--fleet", str(fx._write("fleet_typo.json", '{"nodes": [' + node + '"cuont": 2}]}')),
          *quick), refuse("fleet"), note="a misspelt count used to be ignored (count 1)")
    add("plan/fleet-file-top-key-typo",
        P("--fleet", str(fx._write("fleet_top.json", '{"nodes": [' + node + '"count": 2}], '
                                   '"link": []}')), *quick), refuse("fleet"))
    add("plan/fleet-file-link-key-typo",
        P("--fleet", str(fx._write("fleet_link.json", '{"nodes": [' + node + '"count": 2}], '
                                   '"links": [{"src": {"gpu": "GH-96", "zone": "us-central1-a"}, '
                                   '"dst": {"gpu": "GH-96", "zone": "us-central1-a"}, '
                                   '"bandwidth": "100Gbit/s", "latancy": "5us"}]}')), *quick),
        refuse("network"), note="a misspelt latency used to leave the link at 0")
    # (smallfix2) --nodes GPU:GxN@zone refuses 10^9 and above; the file said nothing and ran
    z = '{"gpu": "GH-96", "zone": "us-central1-a", '
    for what, fields in (("gpus-per-node-1e9", '"gpus_per_node": 1000000000}'),
                         ("count-1e9", '"gpus_per_node": 4, "count": 1000000000}'),
                         ("count-negative", '"gpus_per_node": 4, "count": -1}')):
        add(f"plan/fleet-file-{what}",
            P("--fleet", str(fx._write(f"fleet_{what}.json", '{"nodes": [' + z + fields + ']}')),
              *quick), refuse("fleet"),
            note="below 10^9, as --nodes (it ran)" if "1e9" in what else
            "names the file and the node (it said only 'count')")
    return cases


def real_runs_ii_cases(fx: Fixtures) -> list[Case]:
    """Issue 35's fields: a plan's framework and hosts, --framework, model files holding less
    (forward-only rows, a shape), the catalogue's new fields, fleet and network curves."""
    if not _has_option("train", "--framework"):
        return []
    import json as _json

    T = lambda *a: dtsim("train", *a)  # noqa: E731
    one = ["--steps", "1", "--replications", "1"]
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    gh = [{"gpu": "GH-96", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}]
    two = [{"first_layer": 0, "last_layer": 11, "replicas": gh},
           {"first_layer": 12, "last_layer": 25, "replicas": gh}]

    def plan(name: str, stages: list | None = None, **extra) -> str:
        p = fx.root / name
        p.write_text(_json.dumps({"model": "OPT-350", "microbatch_size": 2,
                                  "global_batch_size": 8, "stages": stages or two, **extra}))
        return str(p)

    good = plan("fw-good.json", framework={"name": "deepspeed", "version": "0.16.5",
                                           "precision": "fp16",
                                           "communication_data_type": "fp32"})
    add("train/plan-framework-runs", T("--plan", good, *one), ok("deepspeed fp16"))
    add("train/framework-unknown", T("--plan", good, "--framework", "horovod", *one),
        refuse("framework"))
    add("train/framework-without-plan", T("--framework", "deepspeed"), refuse("framework"))
    # Bamboo's eager copy (the redundancy default) on the GPU: 128 micro-batches a pipeline fit
    # 1F1B (3 held at once) but not the copy's 128 kept forwards (tests/test_redundancy_modes.py)
    gh1 = [{"gpu": "GH-96", "tp": 1, "gpus_per_node": 1, "zone": "us-central1-a", "count": 2}]
    eager = plan("eager-copy.json", [{"first_layer": a, "last_layer": b, "replicas": gh1}
                                     for a, b in ((0, 8), (9, 17), (18, 25))],
                 framework={"name": "sailor-deepspeed", "version": "0.16.5"})
    eager_text = fx.root / "eager-copy.json"
    eager_text.write_text(eager_text.read_text().replace('"microbatch_size": 2, '
                                                         '"global_batch_size": 8',
                                                         '"microbatch_size": 1, '
                                                         '"global_batch_size": 256'))
    add("train/strategy-redundancy-eager-copy-does-not-fit",
        T("--plan", eager, "--strategy", "redundancy", *one), refuse("plan"),
        note="eager (the default) holds the next stage's copy and its kept forwards on the GPU; "
             "redundancy:mode=lazy runs (its copy in CPU memory)")
    add("train/strategy-redundancy-lazy-fits",
        T("--plan", eager, "--strategy", "redundancy:mode=lazy", *one), ok("redundancy"))
    add("train/framework-options-run", T("--plan", good, "--framework",
                                         "megatron:precision=bf16,overlap_grad_reduce=true",
                                         *one), ok("buckets=megatron"),
        note="--framework NAME[:key=value,...] takes a plan file's framework table's keys")
    add("train/framework-option-unknown", T("--plan", good, "--framework", "megatron:overlap=true",
                                            *one), refuse("framework_options"))
    add("train/framework-option-bad-value", T("--plan", good, "--framework",
                                              "megatron:overlap_grad_reduce=yes", *one),
        refuse("overlap_grad_reduce"))
    add("train/framework-option-malformed", T("--plan", good, "--framework", "megatron:bf16",
                                              *one), refuse("framework"))
    add("train/framework-colon-no-option", T("--plan", good, "--framework", "megatron:", *one),
        refuse("framework"), note="a colon with nothing after it, as a trailing comma")
    add("train/framework-option-number-spelling", T("--plan", good, "--framework",
                                                    "ddp:bucket_cap_mb=1_000", *one),
        refuse("bucket_cap_mb"),
        note="a number is JSON's (a plan file's): 1_000, unicode digits, nan are text, "
             "refused before the plan is read")
    add("train/framework-option-twice", T("--plan", good, "--framework",
                                          "ddp:bucket_cap_mb=5,bucket_cap_mb=6", *one),
        refuse("framework"))
    add("train/framework-version-unknown", T("--plan", good, "--framework",
                                             "deepspeed:version=0.20", *one),
        refuse("framework_version"), note="a version is text: 0.20 is not read as 0.2")
    add("train/framework-deepspeed-0.3.13-runs",
        T("--plan", good, "--framework",
          "deepspeed:version=0.3.13,fp32_allreduce=true,seq_length=2048", *one),
        ok("deepspeed 0.3.13 fp16"),
        note="DeepSpeed 0.3.13's table: its activations partitioned, its gradients whole, "
        "each hop with the 2048 x 2048 mask; the plan's fp16 kept (another release keeps the "
        "plan's precision only)")
    add("train/framework-same-release-keeps-options",
        T("--plan", good, "--framework",
          "deepspeed:pipe_partitioned=false,grad_partitioned=false", *one),
        ok("in 4-byte values"), note="the plan's communication_data_type=fp32 stays: the same "
        "framework and release takes the text's keys over the plan's")
    add("train/framework-deepspeed-0.3.13-no-sequence",
        T("--plan", good, "--framework", "deepspeed:version=0.3.13", *one),
        refuse("seq_length"), note="its hops carry a seq x seq mask: a profile without a "
        "shape needs seq_length to size it")
    add("train/framework-deepspeed-0.3.13-sequence-fraction",
        T("--plan", good, "--framework", "deepspeed:version=0.3.13,seq_length=2048.5", *one),
        refuse("seq_length"))
    add("train/framework-deepspeed-0.3.13-sequence-zero",
        T("--plan", good, "--framework", "deepspeed:version=0.3.13,seq_length=0", *one),
        refuse("seq_length"))
    add("train/framework-deepspeed-sequence-0.16.5",
        T("--plan", good, "--framework", "deepspeed:seq_length=2048", *one),
        refuse("framework_options"), note="0.16.5 sends no mask: no such option")
    add("train/framework-deepspeed-0.3.13-option-it-lacks",
        T("--plan", good, "--framework", "deepspeed:version=0.3.13,communication_data_type=fp32",
          *one), refuse("framework_options"),
        note="0.16.5's option, which 0.3.13's config does not read: refused with why")
    add("train/framework-deepspeed-0.16.5-option-of-0.3.13",
        T("--plan", good, "--framework", "deepspeed:fp32_allreduce=true", *one),
        refuse("framework_options"), note="0.3.13's option, which 0.16.5 lacks: refused with "
        "why (its communication_data_type) and the version that has it")
    add("train/framework-deepspeed-0.3.13-bf16", T("--plan", good, "--framework",
                                                   "deepspeed:version=0.3.13,precision=bf16",
                                                   *one), refuse("precision"),
        note="0.3.13 has no bf16")
    add("train/framework-deepspeed-0.3.13-version-unknown",
        T("--plan", good, "--framework", "deepspeed:version=0.3.14", *one),
        refuse("framework_version"), note="only the versions the table was read at")
    add("train/framework-deepspeed-0.14.4-runs",
        T("--plan", good, "--framework", "deepspeed:version=0.14.4", *one),
        ok("deepspeed 0.14.4 fp16"), note="a release tag from 0.9.0 to 0.16.4: its own table, "
        "each fact read at that tag")
    spaced = plan("fw-spaced.json", framework={"name": "deepspeed ", "version": " 0.14.4",
                                               "precision": "fp16 "})
    add("train/framework-version-spaces-plan-file-runs", T("--plan", spaced, *one),
        ok("deepspeed 0.14.4 fp16"), note="read as --framework 'deepspeed:version= 0.14.4' "
        "reads it (one reader): the file's ' 0.14.4' was refused as no version")
    add("train/framework-version-spaces-text-runs",
        T("--plan", good, "--framework", "deepspeed:version= 0.14.4 ", *one),
        ok("deepspeed 0.14.4 fp16"))
    twice = fx.root / "fw-twice.json"
    twice.write_text('{"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 8, '
                     '"stages": ' + _json.dumps(two) + ', "framework": {"name": "deepspeed", '
                     '"version": "0.14.4", "version ": "0.16.5"}}')
    add("train/framework-key-twice-with-spaces-plan-file", T("--plan", str(twice), *one),
        refuse("framework"), note="'version' and 'version ' are one key, as on the command line")
    add("train/framework-deepspeed-version-untagged",
        T("--plan", good, "--framework", "deepspeed:version=0.16.6", *one),
        refuse("framework_version"), note="a release after the tags read (0.16.4, 0.16.5)")
    add("train/framework-deepspeed-version-minor-only",
        T("--plan", good, "--framework", "deepspeed:version=0.14", *one),
        refuse("framework_version"), note="a release is named by its whole tag: 0.14 is not "
        "every 0.14.x (0.14.0 and 0.14.1 differ)")
    add("train/framework-megatron-0.13.1-runs",
        T("--plan", good, "--framework", "megatron:version=0.13.1", *one),
        ok("megatron 0.13.1 fp16"), note="a Megatron Core release tag from 0.8.0 to 0.19.0: its "
        "own table, each fact read at that tag")
    add("train/framework-megatron-version-tag-name",
        T("--plan", good, "--framework", "megatron:version=core_v0.13.1", *one),
        refuse("framework_version"), note="the version as the package names it (0.13.1), not "
        "the git tag")
    add("train/framework-megatron-version-rc",
        T("--plan", good, "--framework", "megatron:version=0.14.0rc1", *one),
        refuse("framework_version"), note="release candidates were not read")
    add("train/framework-deepspeed-0.12.2-pipe-partitioned",
        T("--plan", good, "--framework", "deepspeed:version=0.12.2,pipe_partitioned=false",
          *one), refuse("framework_options"),
        note="pipeline.pipe_partitioned came in 0.12.3: refused with why")
    add("train/framework-deepspeed-pipe-partitioned-alone",
        T("--plan", good, "--framework", "deepspeed:pipe_partitioned=false", *one),
        refuse("tp"), note="the plan's TP 4 with grad_partitioned left true: DeepSpeed sends "
        "each gradient as metadata and a 1/t part where the previous stage receives one "
        "whole tensor (engine.py:1094-1095, 1204): it does not train, refused with why")
    add("train/framework-deepspeed-grad-partitioned-alone",
        T("--plan", good, "--framework", "deepspeed:grad_partitioned=false", *one),
        refuse("tp"), note="the activation partitioned, the gradient whole: the output's "
        "all-gather before each gradient receive (engine.py:1167) is not modelled in 0.16.5's "
        "step order")
    add("train/framework-deepspeed-0.12.2-grad-partitioned",
        T("--plan", good, "--framework", "deepspeed:version=0.12.2,grad_partitioned=false",
          *one), refuse("framework_options"),
        note="pipeline.grad_partitioned came in 0.12.3: refused with why")
    add("train/framework-sailor-grad-partitioned",
        T("--plan", good, "--framework", "sailor-deepspeed:grad_partitioned=false", *one),
        refuse("framework_options"), note="the Sailor artifact's engine reads "
        "pipeline.grad_partitioned and partitions every gradient whatever it says")
    add("train/framework-sailor-pipe-partitioned",
        T("--plan", good, "--framework", "sailor-deepspeed:pipe_partitioned=false", *one),
        refuse("framework_options"),
        note="the Sailor artifact's engine reads pipeline.pipe_partitioned and ignores it "
        "(it partitions every output and gradient): refused with why, not timed as whole "
        "tensors")
    add("train/framework-deepspeed-0.14.0-bf16-spelling",
        T("--plan", good, "--framework",
          "deepspeed:version=0.14.0,communication_data_type=bf16", *one),
        refuse("communication_data_type"), note="before 0.14.1 DeepSpeed's config spells it "
        "bfp16 (its config.py raises on bf16)")
    one_stage = plan("fw-one-stage.json", [{"first_layer": 0, "last_layer": 25,
                                            "replicas": gh * 2}])
    add("train/framework-ddp-bucket-tiny", T("--plan", one_stage, "--framework",
                                             "ddp:bucket_cap_mb=1e-300", *one),
        refuse("bucket_cap_mb"),
        note="its buckets cannot be held: it used to run for ever (the ring law's sum)")
    add("train/framework-ddp-minor-release-runs",
        T("--plan", one_stage, "--framework", "ddp:version=2.4.1", *one), ok(),
        note="the DDP column is read for the 2.x line")
    add("train/framework-ddp-other-major",
        T("--plan", one_stage, "--framework", "ddp:version=3.0", *one),
        refuse("framework_version"))
    # polish6: a version PyTorch never writes was read as the 2.x table
    for what, v in (("leading-zero", "2.04"), ("patch-leading-zero", "2.4.01"),
                    ("minor-20-digits", "2." + "1" * 20)):
        add(f"train/framework-ddp-version-{what}",
            T("--plan", one_stage, "--framework", f"ddp:version={v}", *one),
            refuse("framework_version"), note="not a release number as PyTorch writes it")
    add("train/framework-ddp-pipeline", T("--plan", good, "--framework", "ddp", *one),
        refuse("framework"), note="DDP runs no pipeline: a 2-stage plan")
    add("train/plan-framework-overlap-placement",
        T("--plan", plan("fw-overlap.json", framework={"name": "megatron",
                                                        "overlap_grad_reduce": True}), *one),
        ok("buckets=megatron"), note="Megatron-LM's overlap_grad_reduce runs "
        "as --sync allreduce:overlap=backward with its buckets")
    single = [{"first_layer": 0, "last_layer": 25, "replicas": [{**gh[0], "count": 2}]}]
    add("train/plan-framework-ddp-runs", T("--plan", plan("fw-ddp.json", single, framework="ddp"),
                                           *one), ok("overlap=backward,buckets=ddp"))
    add("train/plan-sync-none", T("--plan", good, "--sync", "none", *one), refuse("sync"),
        note="a plan's framework all-reduces its gradients: sync none would be ignored")
    add("train/plan-sync-diloco-overlapped-framework",
        T("--plan", plan("fw-overlap-diloco.json", framework={"name": "megatron",
                                                               "overlap_grad_reduce": True}),
          "--sync", "diloco:every=1", *one), refuse("sync"),
        note="DiLoCo's groups all-reduce after the backward pass: an overlapping framework's "
        "all-reduce would be silently moved")
    add("train/plan-sync-overrides", T("--plan", good, "--sync", "allreduce:overlap=backward",
                                       *one), ok("overlap=backward"))
    add("train/sync-buckets-without-overlap", T("--sync", "allreduce:buckets=ddp"),
        refuse("sync"))
    add("train/sync-buckets-unknown", T("--sync", "allreduce:overlap=backward,buckets=horovod"),
        refuse("sync"))
    for id_, fw, param in (
            ("name", {"name": "horovod"}, "framework"),
            ("name-missing", {"version": "0.16.5"}, "framework"),
            ("not-a-table", 7, "framework"),
            ("version", {"name": "deepspeed", "version": "0.9"}, "framework_version"),
            ("version-number", {"name": "deepspeed", "version": 16}, "framework_version"),
            ("precision", {"name": "deepspeed", "precision": "fp8"}, "precision"),
            ("option-unknown", {"name": "megatron", "communication_data_type": "fp32"},
             "framework_options"),
            ("option-value", {"name": "deepspeed", "communication_data_type": "fp64"},
             "communication_data_type"),
            ("option-bool", {"name": "megatron", "overlap_grad_reduce": "yes"},
             "overlap_grad_reduce"),
            ("option-number", {"name": "ddp", "bucket_cap_mb": -1}, "bucket_cap_mb"),
            ("0313-option-lacking", {"name": "deepspeed", "version": "0.3.13",
                                     "pipe_partitioned": False}, "framework_options"),
            ("sailor-pipe-partitioned", {"name": "sailor-deepspeed",
                                         "pipe_partitioned": False}, "framework_options"),
            ("0313-grad-partitioned", {"name": "deepspeed", "version": "0.3.13",
                                       "grad_partitioned": False}, "framework_options"),
            ("grad-partitioned-value", {"name": "deepspeed", "grad_partitioned": "no"},
             "grad_partitioned"),
            ("pipe-partitioned-alone", {"name": "deepspeed", "pipe_partitioned": False}, "tp"),
            ("0313-option-value", {"name": "deepspeed", "version": "0.3.13",
                                   "fp32_allreduce": "yes"}, "fp32_allreduce"),
            ("0313-no-sequence", {"name": "deepspeed", "version": "0.3.13"}, "seq_length"),
            ("0313-sequence-text", {"name": "deepspeed", "version": "0.3.13",
                                    "seq_length": "2048"}, "seq_length")):
        add(f"train/plan-framework-{id_}", T("--plan", plan(f"fw-{id_}.json", framework=fw),
                                             *one), refuse(param))
    add("train/plan-unknown-key", T("--plan", plan("fw-key.json", frameworks="deepspeed"), *one),
        refuse("plan"), note="a misspelt top-level key is refused, not ignored")
    r = {"gpu": "RTX-3090", "tp": 1, "gpus_per_node": 2, "zone": "us-central1-a"}
    t = {"gpu": "Titan-RTX", "tp": 1, "gpus_per_node": 2, "zone": "us-central1-a"}
    hosted = [{"first_layer": 0, "last_layer": 12, "replicas": [{**r, "host": "A", "count": 2}]},
              {"first_layer": 13, "last_layer": 25, "replicas": [{**t, "host": "B", "count": 2}]}]
    add("train/plan-hosts-run", T("--plan", plan("host-good.json", hosted), *one),
        ok("step time"))
    mixed = [{"first_layer": 0, "last_layer": 25, "replicas": [{**r, "host": "A"},
                                                               {**t, "host": "A"}]}]
    add("train/plan-host-two-kinds", T("--plan", plan("host-kinds.json", mixed), *one),
        refuse("host"))
    over = [{"first_layer": 0, "last_layer": 25,
             "replicas": [{**r, "host": "A", "count": 3}]}]
    add("train/plan-host-overfull", T("--plan", plan("host-full.json", over, global_batch_size=12),
                                      *one), refuse("host"), note="3 TP-1 replicas on a 2-GPU node")
    blank = [{"first_layer": 0, "last_layer": 25, "replicas": [{**r, "host": " A"}]}]
    add("train/plan-host-name", T("--plan", plan("host-name.json", blank), *one), refuse("host"))
    # profiles folders with a model file holding less, and catalogue / network fields
    shipped = Path(__file__).resolve().parent.parent / "sim" / "profiles" / "data"

    def folder(name: str, model: dict | None = None, gpus: dict | None = None,
               network: dict | None = None) -> str:
        d = fx.root / name
        (d / "models").mkdir(parents=True, exist_ok=True)
        (d / "gpus.json").write_text(_json.dumps(gpus) if gpus is not None
                                     else (shipped / "gpus.json").read_text())
        if model is not None:
            (d / "models" / "m.json").write_text(_json.dumps(model))
        if network is not None:
            (d / "network.json").write_text(_json.dumps(network))
        return str(d)

    shape = {"layers": 2, "hidden": 64, "heads": 4, "sequence": 32, "vocabulary": 100}
    base = {"model": "Tiny", "shape": shape, "bytes_per_value": 2}
    link = {"src": {"gpu": "T4", "zone": "z"}, "dst": {"gpu": "T4", "zone": "z"}}
    net = {"links": [{**link, "flows": k, "bandwidth": 1e9} for k in (1, 2)]}
    t4 = [{"gpu": "T4", "tp": 2, "gpus_per_node": 2, "zone": "z"}]
    tiny = str(fx.root / "tiny-plan.json")
    Path(tiny).write_text(_json.dumps({"model": "Tiny", "microbatch_size": 1,
                                       "global_batch_size": 2,
                                       "stages": [{"first_layer": 0, "last_layer": 3,
                                                   "replicas": t4}]}))
    add("train/model-shape-runs", T("--plan", tiny, "--profiles", folder("p-shape", base,
                                                                       network=net), *one),
        ok("estimated from the model's shape"), note="a model given by its shape on a T4")
    for id_, sh, param in (("heads", {**shape, "heads": 5}, "heads"),
                           ("zero", {**shape, "hidden": 0}, "hidden"),
                           ("key", {**shape, "width": 3}, "model"),
                           ("missing", {k: v for k, v in shape.items() if k != "sequence"},
                            "model")):
        add(f"train/model-shape-{id_}", T("--plan", tiny, "--profiles",
                                          folder(f"p-shape-{id_}", {**base, "shape": sh},
                                                 network=net), *one), refuse(param))
    three = str(fx.root / "tiny-plan-tp3.json")
    Path(three).write_text(_json.dumps({
        "model": "Tiny", "microbatch_size": 1, "global_batch_size": 2,
        "stages": [{"first_layer": 0, "last_layer": 3,
                    "replicas": [{"gpu": "T4", "tp": 3, "gpus_per_node": 4, "zone": "z"}]}]}))
    add("train/model-shape-tp-heads", T("--plan", three, "--profiles",
                                        folder("p-shape-tp", base, network=net), *one),
        refuse("tp"), note="TP 3 does not divide the shape's 4 attention heads")
    # a launch line of another layer than a shape's (12 h^2 + 13 h: two h x 4h MLP matrices,
    # keys and values for every head) was read as the shape's (usertrial16)
    shape_dir = folder("p-shape-launch", base, network=net)
    for id_, extra, why in (
            ("swiglu", "--swiglu --ffn-hidden-size 176", "a gated MLP"),
            ("ffn", "--ffn-hidden-size 176", "an MLP of another width than 4 h"),
            ("gqa", "--group-query-attention --num-query-groups 2", "2 key-value heads of 4"),
            ("mla", "--multi-latent-attention", "multi-latent attention"),
            ("rope", "--position-embedding-type rope", "rope on a shape of learned positions "
             "(the shape kept its s x h table)")):
        lf = fx.root / f"ml-shape-{id_}.sh"
        lf.write_text("torchrun --nnodes 1 --nproc-per-node 2 pretrain_gpt.py "
                      "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
                      "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 "
                      "--micro-batch-size 1 --global-batch-size 2 --bf16 "
                      f"--untie-embeddings-and-output-weights {extra}\n")
        add(f"train/megatron-shape-{id_}", T("--plan", str(lf), "--model", "Tiny", "--gpu", "T4",
                                             "--zone", "z", "--profiles", shape_dir, *one),
            refuse("plan"), note=f"{why}: accepted and ignored before (usertrial16)")
    add("train/model-shape-position-embedding",
        T("--plan", tiny, "--profiles", folder("p-shape-pos", {
            **base, "shape": {**shape, "position_embedding": "alibi"}}, network=net), *one),
        refuse("position_embedding"), note="a shape's positions: learned_absolute, rope or none")
    fwd = {"model": "Tiny", "layers": 4, "bytes_per_value": 2, "shape": shape,
           "times": [{"gpu": "T4", "microbatch_size": 1, "tp": 1,
                      "layers": [[0.01], [0.02], [0.02], [0.01, 0.02, 0.0, 9.9]]}]}
    add("train/model-row-too-long", T("--plan", tiny, "--profiles",
                                      folder("p-row", fwd, network=net), *one), refuse("model"))
    add("train/model-tied-params-not-list",
        T("--plan", tiny, "--profiles", folder("p-tied", {**base, "tied_params": 3},
                                              network=net), *one), refuse("model"))
    gpus = _json.loads((shipped / "gpus.json").read_text())
    for g in gpus["gpus"]:
        if g["name"] == "T4":
            g["intra_node_bandwidth"] = -1
    add("train/gpus-intra-negative", T("--plan", tiny, "--profiles",
                                       folder("p-gpus", base, gpus, net), *one),
        refuse("intra_node_bandwidth"))
    for id_, key, value in (("key-typo", "price", 1.1), ("price-unit", "price_per_hour", "$2.1/h"),
                            ("flops-unit", "peak_flops", "312 TFLOPS"),
                            ("price-bool", "price_per_hour", True)):
        cat = _json.loads((shipped / "gpus.json").read_text())
        for g in cat["gpus"]:
            if g["name"] == "T4":
                g[key] = value
        add(f"train/gpus-{id_}", T("--plan", tiny, "--profiles",
                                   folder(f"p-gpus-{id_}", base, cat, net), *one),
            refuse("gpus"), note="a catalogue key it would not use (a typo), or a price or "
            "FLOP/s with a unit (sim.units has neither)")
    cat = _json.loads((shipped / "gpus.json").read_text())
    for g in cat["gpus"]:
        if g["name"] == "T4":
            g["currency"] = "EUR"
    add("train/gpus-currency-eur", T("--plan", tiny, "--profiles",
                                     folder("p-gpus-currency-eur", base, cat, net), *one),
        refuse("gpus"), note="prices are plain numbers of US dollars, printed as $ (none is "
        "converted): a catalogue saying another currency is refused, USD accepted")
    for id_, value, param in (("negative", -7.5, "compute_capability"),
                              ("text", "7.5", "gpus")):
        cat = _json.loads((shipped / "gpus.json").read_text())
        for g in cat["gpus"]:
            if g["name"] == "T4":
                g["compute_capability"] = value
        add(f"train/gpus-compute-capability-{id_}",
            T("--plan", tiny, "--profiles", folder(f"p-gpus-cc-{id_}", base, cat, net), *one),
            refuse(param), note="the CUDA compute capability, a plain number > 0 (7.5 for a T4)")
    no_overhead = _json.loads((shipped / "gpus.json").read_text())
    for g in no_overhead["gpus"]:
        if g["name"] == "T4":
            del g["overhead_bytes"], g["overhead_tp1_bytes"]
    add("train/gpus-no-overhead", T("--plan", tiny, "--profiles",
                                    folder("p-gpus-no-overhead", base, no_overhead, net), *one),
        refuse("gpus"), note="a GPU type without overhead_bytes was taken as 0: plans fitted "
        "that the framework's own memory would not")
    tp1 = {**fwd, "times": [{"gpu": "T4", "microbatch_size": 1, "tp": 1, "layers": [
        [0.01, 0.0, 0.001], [0.02, 0.04, 0.001], [0.02, 0.04, 0.001], [0.01, 0.02, 0.001]]}]}
    blind = _json.loads((shipped / "gpus.json").read_text())
    for g in blind["gpus"]:
        if g["name"] == "T4":
            del g["memory_bandwidth"]
    add("train/model-tp-derived-without-memory-bandwidth",
        T("--plan", tiny, "--profiles", folder("p-tp-blind", tp1, blind, net), *one),
        refuse("memory_bandwidth"), note="TP 2 derived from a TP-1 profile on a GPU type the "
        "catalogue gives no memory bandwidth for (the replicated work is timed by it)")
    add("train/model-tp-derived-runs",
        T("--plan", tiny, "--profiles", folder("p-tp-derived", tp1, network=net), *one),
        ok("estimated by roofline"), note="the same plan with the catalogue's T4: derived, "
        "the replicated part named as a roofline estimate")
    two = {**fwd, "times": [{"gpu": "T4", "microbatch_size": 1, "tp": 2,
                             "layers": [[0.01, 0.02]] * 4}]}
    add("train/model-no-optimizer-without-memory-bandwidth",
        T("--plan", tiny, "--profiles", folder("p-two-blind", two, blind, net), *one),
        refuse("memory_bandwidth"), note="[forward, backward] rows leave the optimizer step to "
        "the Adam estimate, at a memory bandwidth the catalogue does not give (before: 0 s)")
    add("train/model-no-optimizer-runs",
        T("--plan", tiny, "--profiles", folder("p-two", two, network=net), *one),
        ok("optimizer step from memory bandwidth"), note="the same rows with the catalogue's "
        "T4: the optimizer step estimated and named")
    nowhere = {"links": [{**link, "flows": 2, "curve": {"coefficients": [-1.0]}}]}
    add("train/network-curve-valid-nowhere",
        T("--plan", tiny, "--profiles", folder("p-curve", base, network=nowhere), *one),
        refuse("network"), note="a fitted curve negative over its whole range")
    add("train/network-curve-text-bad",
        T("--plan", tiny, "--profiles", folder("p-text", base, network={
            "links": [{**link, "flows": 2, "curve": "table:x"}]}), *one), refuse("network"))
    P = lambda *a: dtsim("plan", "--model", "OPT-350", *a)  # noqa: E731
    quick = ["--global-batch-size", "8", "--simulate", "0", "--top", "1"]
    add("plan/framework-unknown", P("--nodes", "GH-96:4x2@us-central1-a", *quick, "--framework",
                                    "horovod"), refuse("framework"))
    add("plan/framework-overlapped-allreduce", P("--nodes", "GH-96:4x2@us-central1-a", *quick,
                                                 "--framework", "ddp"), ok("1x"),
        note="DDP overlaps its all-reduce with the backward pass: timed by its closed form")
    fleet = fx.root / "fleet-slow.json"
    fleet.write_text(_json.dumps({"nodes": [{"gpu": "GH-96", "gpus_per_node": 4,
                                             "zone": "us-central1-a", "count": 2}],
                                  "links": [{"src": {"gpu": "GH-96", "zone": "us-central1-a"},
                                             "dst": {"gpu": "GH-96", "zone": "us-central1-a"},
                                             "flows": 1, "bandwidth": -5}]}))
    add("plan/fleet-link-negative", P("--fleet", str(fleet), *quick), refuse("network|bandwidth"),
        note="the fleet file's link, named by the document, its index and its two ends")
    second = fx.root / "fleet-second-link.json"
    gh_end = {"gpu": "GH-96", "zone": "us-central1-a"}
    second.write_text(_json.dumps({
        "nodes": [{**gh_end, "gpus_per_node": 4, "count": 2}],
        "links": [{"src": gh_end, "dst": gh_end, "flows": 1, "bandwidth": 5e9},
                  {"src": gh_end, "dst": {"gpu": "RTX-3090", "zone": "us-central1-a"},
                   "flows": 1, "bandwidth": "fast"}]}))
    add("plan/fleet-link-second-named", P("--fleet", str(second), *quick), refuse("network"),
        note="links[1] (the link GH-96@us-central1-a -> RTX-3090@us-central1-a)")
    # audit5: a link given twice, and a link whose flows' shares underflow to 0
    twice = fx.root / "fleet-link-twice.json"
    twice.write_text(_json.dumps({"nodes": [{**gh_end, "gpus_per_node": 4, "count": 2}],
                                  "links": [{"src": gh_end, "dst": gh_end, "flows": 1,
                                             "bandwidth": b} for b in (5e9, 6e9)]}))
    add("plan/fleet-link-twice", P("--fleet", str(twice), *quick), refuse("network"),
        note="the second was used, the first dropped without a word")
    eu_end = {"gpu": "GH-96", "zone": "europe-west4-a"}
    slow = fx.root / "fleet-link-denormal.json"
    slow.write_text(_json.dumps({
        "nodes": [{**e, "gpus_per_node": 4, "count": 1} for e in (gh_end, eu_end)],
        "links": [{"src": e, "dst": e, "flows": 1, "bandwidth": 5e9} for e in (gh_end, eu_end)]
        + [{"src": gh_end, "dst": eu_end, "flows": 1, "bandwidth": 5e-324}]}))
    add("plan/fleet-link-denormal-runs", P("--fleet", str(slow), *quick), ok("predicted"),
        note="a flow's share of 5e-324 B/s underflows to 0: a ZeroDivisionError traceback before")
    lat_edges = fx.root / "latency-1e308.edges"
    lat_edges.write_text('0 1 {"latency": 1e308}\n1 2\n2 3\n')
    add("train/network-edge-latency-1e308", T("--stages", "2", "--replicas", "2",
                                              "--activation-size", "1MB", "--network",
                                              str(lat_edges), *one), refuse("network"),
        note="it ran to a time to train of inf (exact)")
    add("plan/framework-megatron-runs", P("--nodes", "GH-96:4x2@us-central1-a", *quick,
                                          "--framework", "megatron"), ok("1x"))
    return cases


def newcomer_cases(fx: Fixtures) -> list[Case]:
    """Intervals where nothing varies (``FIXED``), units, queueing defaults, extras."""
    cases: list[Case] = []
    head = ("from sim.failures import ClusterConfig, failures_model\n"
            "NAME = 'fixed{k}'\nBASE = ClusterConfig(workers=4, domains=2, horizon=50.0)\n"
            "FACTORS = {{'availability': [0.9]}}\nREPLICATIONS = 2\nFIXED = {fixed}\n"
            "def model(config, streams):\n    return failures_model(config, streams)\n")
    for k, (what, fixed) in enumerate([("not-a-dict", "['joint_outage']"),
                                       ("reason-not-text", "{'joint_outage': 1}"),
                                       ("empty-reason", "{'joint_outage': ''}")]):
        f = fx._write(f"exp/fixed{k}.py", head.format(k=k, fixed=fixed))
        cases.append(Case(f"run/FIXED-{what}", list(dtsim("run", str(f), "--out",
                                                               str(fx.root / f"ofixed{k}"))),
                          refuse("FIXED")))
    # a function of a point's config (dict points whose model builds its config) that returns
    # something other than a dict of metric -> reason: refused naming the point, before any run
    f = fx._write("exp/fixed_fn.py", head.format(k="fn", fixed="None").replace(
        "FIXED = None\n", "def FIXED(config):\n    return ['joint_outage']\n"))
    cases.append(Case("run/FIXED-function-returns-a-list", list(dtsim(
        "run", str(f), "--out", str(fx.root / "ofixedfn"))), refuse("FIXED(config) of point 0")))
    return cases


# ----------------------------------------------------------------------------- issue 33
# Users' own inputs on the recent surfaces: one group per surface (network, profiles and
# plans, planner, strategies, Byzantine options, design with traces).


def users_network_cases(fx: Fixtures) -> list[Case]:
    """``dtsim network`` (and ``train --network``) on a user's own graph and flows files."""
    if not _has_command("network"):
        return []
    cases: list[Case] = []
    w = fx._write
    N = lambda *a: dtsim("network", *a)  # noqa: E731

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case("network/" + id_, list(argv), expect, **kw))

    def flows(name: str, rows: str) -> str:
        return str(w(f"un/{name}.csv", "src,dst,size,start\n" + rows))

    def graph(name: str, text: str) -> str:
        return str(w(f"un/{name}", text))

    # -- hosts by name: every format, string / shuffled integer / mixed names --
    abc = graph("abc.edges", "a b 1 10\nb c 1 10\ncore b 0.5 20\n")
    add("named-edges-a-to-c", N("--topology", abc, "--flows", flows("ac", "a,c,100,0\n")),
        ok("makespan 12"), note="was 'dst must be reachable from src' on the path a-b-c")
    add("named-edges-to-switch", N("--topology", abc, "--flows", flows("acore", "a,core,10,0\n")),
        ok("makespan"), note="a flow may end at a switch")
    shuffled = graph("shuffled.edges", "5 3 1 10\n3 0 1 10\n0 7 1 inf\n")
    add("integer-names-not-in-order", N("--topology", shuffled, "--flows",
                                        flows("f50", "5,0,100,0\n")), ok("makespan 12"),
        note="integer names 5, 3, 0, 7 in that order: was the wrong pair of positions")
    add("integer-names-infinite-route", N("--topology", shuffled, "--flows",
                                          flows("f07", "0,7,100,0\n")), refuse("topology"),
        note="0 -> 7 crosses only an infinite link: was accepted as positions 0 -> 3")
    gml = graph("named.gml", 'graph [\n node [ id 0 label "core" role "switch" ]\n'
                ' node [ id 1 label "h1" ]\n node [ id 2 label "h2" nic 5 ]\n'
                ' edge [ source 0 target 1 bandwidth 10 latency 0.1 ]\n'
                ' edge [ source 0 target 2 bandwidth 10 latency 0.1 ]\n]\n')
    add("named-gml", N("--topology", gml, "--flows", flows("h12", "h1,h2,50,0\n")),
        ok("makespan 10.2"))
    typed = graph("typed.gml", 'graph [\n node [ id 0 label 7 ]\n node [ id 1 label "x7" ]\n'
                  ' node [ id 2 label "seven" ]\n'
                  ' edge [ source 0 target 1 bandwidth 10 ]\n edge [ source 1 target 2 '
                  'bandwidth 10 ]\n]\n')
    add("mixed-gml-labels", N("--topology", typed, "--flows", flows("7s", "7,seven,10,0\n")),
        ok("makespan 3"), note="an integer label and text labels in one file")
    gx = graph("named.graphml", '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing'
               '.org/xmlns"><key id="bw" for="edge" attr.name="bandwidth" attr.type="double"/>'
               '<graph edgedefault="undirected"><node id="spine"/><node id="n-1"/>'
               '<node id="n-2"/><edge source="spine" target="n-1"><data key="bw">4</data></edge>'
               '<edge source="spine" target="n-2"><data key="bw">4</data></edge></graph>'
               '</graphml>')
    add("named-graphml", N("--topology", gx, "--flows", flows("n12", "n-1,n-2,8,0\n")),
        ok("makespan 4"))
    add("named-graphml-unknown", N("--topology", gx, "--flows", flows("n13", "n-1,n-3,8,0\n")),
        refuse("flows"))
    dup = graph("dup-id.graphml", '<?xml version="1.0"?><graphml xmlns="http://graphml.'
                'graphdrawing.org/xmlns"><graph edgedefault="undirected"><node id="a"/>'
                '<node id="b"/><node id="a"/><edge source="a" target="b"/></graph></graphml>')
    add("graphml-duplicate-node-id", N("--topology", dup, "--flows", flows("ab", "a,b,1,0\n"),
                                       "--nic", "1"), refuse("topology"),
        note="was two nodes merged into one silently")
    three = graph("three.edges", "1 01 1 5\n01 +1 1 5\n")
    add("edges-1-01-plus1-three-nodes", N("--topology", three, "--flows",
                                          flows("1p1", "1,+1,10,0\n")), ok("makespan 4"),
        note="1, 01 and +1 are three nodes: was one node and a self-loop")
    add("edges-01-not-1", N("--topology", three, "--flows", flows("01x", "01,1,10,0\n")),
        ok("makespan 3"))
    add("edges-leading-zero-unknown", N("--topology", three, "--flows",
                                        flows("001", "001,1,10,0\n")), refuse("flows"))
    # -- flows files a user writes by hand --
    topo = ("--topology", "tree:racks=2,hosts=4")
    good = "0,5,100,0\n1,5,100,0\n"
    for name, text, expect in (
            ("bom-header", "\ufeffsrc,dst,size,start\n" + good, ok("makespan")),
            ("crlf-lines", "src,dst,size,start\r\n0,5,100,0\r\n1,5,100,0\r\n", ok("makespan")),
            ("spaces-around-fields", "src , dst , size , start\n 0 , 5 , 100 , 0 \n", ok("makespan")),
            ("blank-lines", "src,dst,size,start\n\n0,5,100,0\n\n\n1,5,100,0\n", ok("makespan")),
            ("header-upper-case", "SRC,DST,SIZE,START\n" + good, refuse("flows")),
            ("header-reordered", "dst,src,size,start\n" + good, refuse("flows")),
            ("header-extra-column", "src,dst,size,start,prio\n0,5,100,0,1\n", refuse("flows")),
            ("header-missing-start", "src,dst,size\n0,5,100\n", refuse("flows")),
            ("semicolons", "src;dst;size;start\n0;5;100;0\n", refuse("flows")),
            ("tabs", "src\tdst\tsize\tstart\n0\t5\t100\t0\n", refuse("flows")),
            ("header-only-blank", "\n\n", refuse("flows")),
            ("row-too-long", "src,dst,size,start\n0,5,100,0,9\n", refuse("flows")),
            ("row-empty-src", "src,dst,size,start\n,5,100,0\n", refuse("flows")),
            ("row-blank-dst", "src,dst,size,start\n0,  ,100,0\n", refuse("flows")),
            ("size-text", "src,dst,size,start\n0,5,big,0\n", refuse("flows")),
            ("size-inf", "src,dst,size,start\n0,5,inf,0\n", refuse("flows")),
            ("size-minus-inf", "src,dst,size,start\n0,5,-inf,0\n", refuse("flows")),
            ("size-nan", "src,dst,size,start\n0,5,nan,0\n", refuse("flows")),
            ("size-1e400", "src,dst,size,start\n0,5,1e400,0\n", refuse("flows")),
            ("size-hex", "src,dst,size,start\n0,5,0x10,0\n", refuse("flows")),
            ("size-minus-zero", "src,dst,size,start\n0,5,-0,0\n", ok("makespan")),
            ("size-zero", "src,dst,size,start\n0,5,0,0\n", ok("makespan")),
            ("size-underscore", "src,dst,size,start\n0,5,1_000,0\n", ok("makespan")),
            ("sizes-sum-beyond-double", "src,dst,size,start\n0,5,1e308,0\n1,5,1e308,0\n",
             refuse("flows")),
            ("start-negative", "src,dst,size,start\n0,5,1,-1\n", refuse("flows")),
            ("start-inf", "src,dst,size,start\n0,5,1,inf\n", refuse("flows")),
            ("start-1e300", "src,dst,size,start\n0,5,1,1e300\n", ok("makespan")),
            ("start-1e308-overflows", "src,dst,size,start\n0,5,1e307,1.797e308\n",
             refuse("flows")),
            ("src-equals-dst", "src,dst,size,start\n5,5,1,0\n", refuse("flows")),
            ("unknown-src", "src,dst,size,start\nh9,5,1,0\n", refuse("flows")),
            ("node-99", "src,dst,size,start\n0,99,1,0\n", refuse("flows")),
            ("node-1.0", "src,dst,size,start\n0,1.0,1,0\n", refuse("flows")),
            ("to-a-switch", "src,dst,size,start\n0,rack0,10,0\n", ok("makespan")),
            ("quoted-fields", 'src,dst,size,start\n"0","5","100","0"\n', ok("makespan")),
            ("unclosed-quote", 'src,dst,size,start\n"0,5,100,0\n', refuse("flows")),
            ("long-field-200k", "src,dst,size,start\n" + "a" * 200_000 + ",5,1,0\n",
             refuse("flows")),
            ("nul-byte", "src,dst,size,start\n0,5,1,0\x00\n", refuse("flows")),
    ):
        add(f"flows-{name}", N(*topo, "--flows", flows(f"f-{name}", "") if False else
                               str(w(f"un/f-{name}.csv", text))), expect)
    # -- graph files a user writes by hand --
    fl01 = flows("f01", "0,1,10,0\n")
    flab = flows("fab", "a,b,10,0\n")
    gm = lambda body: '<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">' + \
        body + "</graphml>"  # noqa: E731
    for name, text, fl, expect in (
            ("edges-self-loop", "a b 1 5\nb b 1 5\n", flab, refuse("topology")),
            ("edges-parallel", "a b 1 5\nb a 1 5\n", flab, refuse("topology")),
            ("edges-bandwidth-zero", "a b 1 0\n", flab, refuse("topology")),
            ("edges-bandwidth-negative", "a b 1 -5\n", flab, refuse("topology")),
            ("edges-bandwidth-nan", "a b 1 nan\n", flab, refuse("topology")),
            ("edges-bandwidth-text", "a b 1 fast\n", flab, refuse("topology")),
            ("edges-bandwidth-1e-320", "a b 1 1e-320\n", flab, refuse("topology")),
            ("edges-bandwidth-1e-300", "a b 1 1e-300\n", flows("fab10", "a,b,1e10,0\n"),
             refuse("flows")),
            ("edges-bandwidth-1e400", "a b 1 1e400\n", flab, refuse("topology")),
            ("edges-latency-negative", "a b -1 5\n", flab, refuse("topology")),
            ("edges-latency-nan", "a b nan 5\n", flab, refuse("topology")),
            ("edges-latency-inf", "a b inf 5\n", flab, refuse("topology")),
            ("edges-three-numbers", "a b 1 5 7\n", flab, refuse("topology")),
            ("edges-key-value", "a b latency=0.5 bandwidth=4\n", flab, ok("makespan 3")),
            ("edges-sharing-shared", "a b latency=0 bandwidth=4 sharing=shared\n", flab,
             ok("makespan")),
            ("edges-sharing-typo", "a b latency=0 bandwidth=4 sharing=half\n", flab,
             refuse("topology")),
            ("edges-curve-garbage", "a b bandwidth_curve=poly:x\n", flab, refuse("topology")),
            ("edges-dict", "a b {'latency': 0.5, 'bandwidth': 4.0}\n", flab, ok("makespan 3")),
            ("edges-dict-broken", "a b {'latency': 0.5\n", flab, refuse("topology")),
            ("edges-isolated-node", "a b 1 5\nc\n", flab, refuse("topology")),
            ("edges-two-parts", "a b 1 5\nc d 1 5\n", flab, refuse("topology")),
            ("edges-one-node", "a\n", flab, refuse("topology")),
            ("edges-empty", "", flab, refuse("topology")),
            ("edges-comments-only", "# nothing\n# here\n", flab, refuse("topology")),
            ("edges-comment-after", "a b 1 5 # a link\n", flab, ok("makespan")),
            ("edges-unicode-names", "\u00e9t\u00e9 b 1 5\n", flows("funi", "\u00e9t\u00e9,b,10,0\n"),
             ok("makespan")),
            ("edges-bom", "\ufeffa b 1 5\n", flab, ok("makespan")),
            ("graphml-directed", gm('<graph edgedefault="directed"><node id="a"/><node id="b"/>'
                                    '<edge source="a" target="b"/></graph>'), flab,
             refuse("topology")),
            ("graphml-duplicate-id", gm('<graph edgedefault="undirected"><node id="a"/>'
                                        '<node id="a"/><node id="b"/><edge source="a" '
                                        'target="b"/></graph>'), flab, refuse("topology")),
            ("graphml-edge-to-undeclared", gm('<graph edgedefault="undirected"><node id="a"/>'
                                              '<edge source="a" target="b"/></graph>'), flab,
             refuse("topology")),
            ("graphml-truncated", gm('<graph edgedefault="undirected"><node id="a"/>')[:-10],
             flab, refuse("topology")),
            ("graphml-not-xml", "a b 1 5\n", flab, refuse("topology")),
            ("graphml-xxe", '<?xml version="1.0"?><!DOCTYPE g [<!ENTITY x SYSTEM '
             '"file:///etc/passwd">]><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
             '<graph edgedefault="undirected"><node id="&x;"/><node id="b"/></graph></graphml>',
             flab, refuse("topology")),
            ("graphml-billion-laughs", '<?xml version="1.0"?><!DOCTYPE g [<!ENTITY a "aaaaaaaaaa">'
             + "".join(f'<!ENTITY {c} "' + f"&{p};" * 10 + '">' for p, c in zip("abcdefgh", "bcdefghi", strict=True))
             + ']><graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault='
             '"undirected"><node id="&i;"/></graph></graphml>', flab, refuse("topology")),
            ("gml-duplicate-label", 'graph [ node [ id 0 label "a" ] node [ id 1 label "a" ] '
             'edge [ source 0 target 1 ] ]', flab, refuse("topology")),
            ("gml-duplicate-id", 'graph [ node [ id 0 label "a" ] node [ id 0 label "b" ] ]',
             flab, refuse("topology")),
            ("gml-directed", 'graph [ directed 1 node [ id 0 label "a" ] node [ id 1 label "b" ] '
             'edge [ source 0 target 1 bandwidth 5 ] ]', flab, refuse("topology")),
            ("gml-unbalanced", 'graph [ node [ id 0 label "a" ]', flab, refuse("topology")),
            ("gml-nic-negative", 'graph [ node [ id 0 label "a" nic -1 ] node [ id 1 label "b" ] '
             'edge [ source 0 target 1 bandwidth 5 ] ]', flab, refuse("topology")),
            ("gml-nic-text", 'graph [ node [ id 0 label "a" nic "fast" ] node [ id 1 label "b" ]'
             ' edge [ source 0 target 1 bandwidth 5 ] ]', flab, refuse("topology")),
            ("gml-egress-only", 'graph [ node [ id 0 label "a" egress 2 ] node [ id 1 label "b" ]'
             ' edge [ source 0 target 1 ] ]', flab, ok("makespan 6")),
    ):
        ext = name.split("-", 1)[0]
        f = graph(f"g-{name}.{ext}", text)
        add(f"graph-{name}", N("--topology", f, "--flows", fl), expect)
    # fifo, device, folder, missing, symlink loop
    loop = fx.root / "un" / "loop.edges"
    if not loop.is_symlink():
        os.symlink(loop, loop)
    for name, path in (("fifo", fx.fifo["graph.graphml"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir), ("missing", fx.root / "none.edges"),
                       ("symlink-loop", loop), ("binary", fx.binary_graph)):
        add(f"graph-{name}", N("--topology", str(path), "--flows", fl01), refuse("topology"),
            timeout=20)
    for name, path in (("fifo", fx.fifo["trace.csv"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir), ("binary", fx.binary)):
        add(f"flows-{name}", N(*topo, "--flows", str(path)), refuse("flows"), timeout=20)
    # -- options --
    fl = flows("fopt", good)
    for name, extra, expect in (
            ("nic-1e-320", ("--nic", "1e-320"), refuse("nic")),
            ("nic-nan", ("--nic", "nan"), refuse("nic")),
            ("nic-negative", ("--nic", "-1"), refuse("nic")),
            ("nic-text", ("--nic", "fast"), refuse("--nic")),
            ("nic-inf", ("--nic", "inf"), ok("makespan")),
            ("nic-tiny-overflows", ("--nic", "1e-300", "--flows", flows("fbig", "0,5,1e10,0\n")),
             refuse("flows")),
            ("seed-deterministic-family", ("--seed", "3"), refuse("seed")),
            ("nodes-with-spec-size", ("--nodes", "50"), refuse("nodes")),
            ("weighting-rtt", ("--weighting", "rtt"), ok("rtt sharing")),
            ("solver-full", ("--solver", "full"), ok("makespan")),
            ("json", ("--json",), ok('"finish"')),
    ):
        add(f"option-{name}", N(*topo, *_override(("--flows", fl), extra)), expect)
    add("option-seed-random-family", N("--topology", "random-regular:n=8,degree=3,bandwidth=5",
                                       "--flows", fl01, "--seed", "3"), ok("makespan"))
    add("option-seed-graph-file", N("--topology", abc, "--flows", flows("ac2", "a,c,1,0\n"),
                                    "--seed", "3"), refuse("seed"))
    add("option-nodes-graph-file", N("--topology", abc, "--flows", flows("ac3", "a,c,1,0\n"),
                                     "--nodes", "9"), refuse("nodes"))
    add("topology-family-bad-param", N("--topology", "tree:racks=0", "--flows", fl01),
        refuse("topology"))
    add("topology-family-huge", N("--topology", "tree:racks=100000,hosts=100000", "--flows", fl01),
        refuse("hosts|topology"), timeout=60)
    # -- train over a user's named graph --
    named = graph("named-tree.edges", "core r0 0.1 100\ncore r1 0.1 100\n" + "".join(
        f"r{h // 4} h{h} 0.05 10\n" for h in range(8)))
    TR = lambda *a: dtsim("train", "--replications", "1", "--steps", "2", *a)  # noqa: E731
    add("train-named-graph", TR("--network", named, "--param-size", "10"), ok("throughput"))
    add("train-named-nodes", TR("--network", named, "--stages", "4", "--network-nodes",
                                "h0,h5,h2,h3", "--param-size", "10"), ok("throughput"))
    add("train-named-unknown-node", TR("--network", named, "--stages", "4", "--network-nodes",
                                       "h0,h5,h2,h99"), refuse("network_nodes"))
    add("train-named-checkpoint-node-switch", TR("--network", named, "--checkpoint-node", "core",
                                                 "--param-size", "10"), ok("throughput"))
    add("train-named-checkpoint-node-unknown", TR("--network", named, "--checkpoint-node", "h99"),
        refuse("checkpoint_node"))
    add("train-nic-subnormal", TR("--network", named, "--nic", "1e-320", "--stages", "2",
                                  "--replicas", "2", "--param-size", "10"), refuse("nic"),
        note="was SimPy's 'No scheduled events left', exit 1")
    add("train-bucket-size-1e-300", TR("--network", named, "--bucket-size", "1e-300", "--stages",
                                       "2", "--replicas", "2", "--param-size", "10"),
        refuse("bucket_size"), note="was an OverflowError in the replication, exit 1")
    add("train-tensor-parallel-1e9", TR("--network", named, "--tensor-parallel", "1000000000"),
        refuse("tensor_parallel"), timeout=60, note="was over a GiB")
    add("train-tensor-parallel-text", TR("--network", named, "--tensor-parallel", "x"),
        refuse("tensor_parallel"))
    return cases


def _sailor_folder(fx: Fixtures, name: str, mutate: Callable[[dict, dict, dict], None] | None = None,
                   raw: dict[str, str] | None = None) -> str:
    """A Sailor-format profiles folder (OPT-350's profile only, the shipped catalogue and
    bandwidths) changed by ``mutate(profiles, llm_info, bandwidths)`` or with files' ``raw``
    text; written once per audit."""
    import json as _json

    d = fx.root / "sailor" / name
    if d.is_dir():
        return str(d)
    data = REPO / "sim" / "profiles" / "data"
    cache = getattr(fx, "_sailor_data", None)
    if cache is None:  # kept as JSON text: a fresh copy is one parse (a deepcopy took 10x as long)
        cache = tuple(_json.dumps(x) for x in (
            {"OPT-350": _json.loads((data / "profiles.json").read_text())["OPT-350"]},
            {"OPT-350": _json.loads((data / "llm_info.json").read_text())["OPT-350"]},
            _json.loads((data / "bandwidths.json").read_text())))
        fx._sailor_data = cache  # type: ignore[attr-defined]
    prof, info, bw = (_json.loads(x) for x in cache)
    if mutate is not None:
        mutate(prof, info, bw)
    d.mkdir(parents=True)
    shutil.copy(data / "gpus.json", d / "gpus.json")
    texts = {"profiles.json": _json.dumps(prof), "llm_info.json": _json.dumps(info),
             "bandwidths.json": _json.dumps(bw)}
    texts.update(raw or {})
    for f, text in texts.items():
        (d / f).write_text(text)
    return str(d)


def users_profile_cases(fx: Fixtures) -> list[Case]:
    """A user's own profiles folders and plan files: ``dtsim train --plan``, ``dtsim plan``."""
    if not _has_option("train", "--plan"):
        return []
    import json as _json

    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    gh = [{"gpu": "GH-96", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}]

    def plan(name: str, doc: Any) -> str:
        p = fx.root / "uplans" / name
        p.parent.mkdir(exist_ok=True)
        p.write_text(doc if isinstance(doc, str) else _json.dumps(doc))
        return str(p)

    good_doc = {"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 8,
                "stages": [{"first_layer": 0, "last_layer": 11, "replicas": gh},
                           {"first_layer": 12, "last_layer": 25, "replicas": gh}]}
    good = plan("good.json", good_doc)
    one = ("--steps", "1", "--replications", "1")
    T = lambda *a: dtsim("train", *a)  # noqa: E731
    P = lambda *a: dtsim("plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",  # noqa: E731
                         "--global-batch-size", "8", "--simulate", "0", "--top", "1", *a)

    # -- Sailor-format profiles folders, malformed one way each --
    g = lambda p: p["OPT-350"]["GH-96"]  # noqa: E731
    z = lambda b: b["us-central1-a"]["A100-40"]["1"]["us-central1-a"]["A100-40"]  # noqa: E731
    folders: list[tuple[str, Callable[[dict, dict, dict], None] | None, dict | None, str]] = [
        ("mbs-key-superscript-2", lambda p, i, b: g(p).__setitem__("\u00b2", g(p)["2"]), None,
         "profiles"),
        ("mbs-key-superscript-3", lambda p, i, b: g(p).__setitem__("\u00b3", g(p)["2"]), None,
         "profiles"),
        ("mbs-key-zero", lambda p, i, b: g(p).__setitem__("0", g(p)["2"]), None, "profiles"),
        ("mbs-key-negative", lambda p, i, b: g(p).__setitem__("-1", g(p)["2"]), None, "profiles"),
        ("mbs-key-huge", lambda p, i, b: g(p).__setitem__("9" * 5000, g(p)["2"]), None,
         "profiles"),
        ("gpu-entry-number", lambda p, i, b: p["OPT-350"].__setitem__("GH-96", 5), None,
         "profiles"),
        ("gpu-entry-list", lambda p, i, b: p["OPT-350"].__setitem__("GH-96", [1, 2]), None,
         "profiles"),
        ("gpu-entry-null", lambda p, i, b: p["OPT-350"].__setitem__("GH-96", None), None,
         "profiles"),
        ("mbs-entry-number", lambda p, i, b: g(p).__setitem__("2", 7), None, "profiles"),
        ("mbs-entry-list", lambda p, i, b: g(p).__setitem__("2", [1]), None, "profiles"),
        ("tp-entry-number", lambda p, i, b: g(p)["2"].__setitem__("1", 3), None, "profiles"),
        ("tp-key-text", lambda p, i, b: g(p)["2"].__setitem__("one", g(p)["2"]["1"]), None,
         "profiles"),
        ("layer-text", lambda p, i, b: g(p)["2"]["1"].__setitem__("0", "x"), None, "profiles"),
        ("layer-negative", lambda p, i, b: g(p)["2"]["1"].__setitem__("0", [-1, 1, 1]), None,
         "profiles"),
        ("layer-two-numbers", lambda p, i, b: g(p)["2"]["1"].__setitem__("0", [1, 1]), None,
         "profiles"),
        ("layer-bool", lambda p, i, b: g(p)["2"]["1"].__setitem__("0", [True, 1, 1]), None,
         "profiles"),
        ("layer-missing", lambda p, i, b: g(p)["2"]["1"].pop("3"), None, "profiles"),
        ("model-number", lambda p, i, b: p.__setitem__("OPT-350", 3), None, "profiles"),
        ("model-list", lambda p, i, b: p.__setitem__("OPT-350", []), None, "profiles"),
        ("params-negative", lambda p, i, b: i["OPT-350"]["1"]["0"].__setitem__(
            "params_floats", -5), None, "profiles"),
        ("params-text", lambda p, i, b: i["OPT-350"]["1"]["0"].__setitem__(
            "params_floats", "5"), None, "profiles"),
        ("params-missing", lambda p, i, b: i["OPT-350"]["1"]["0"].pop("params_floats"), None,
         "profiles"),
        ("activation-negative", lambda p, i, b: i["OPT-350"]["1"]["0"].__setitem__(
            "act_output_bytes", -5), None, "profiles"),
        ("info-tp-superscript", lambda p, i, b: i["OPT-350"].__setitem__(
            "\u00b2", i["OPT-350"]["1"]), None, "profiles"),
        ("info-tp-list", lambda p, i, b: i["OPT-350"].__setitem__("1", [1]), None, "profiles"),
        ("info-layer-number", lambda p, i, b: i["OPT-350"]["1"].__setitem__("0", 5), None,
         "profiles"),
        ("info-model-list", lambda p, i, b: i.__setitem__("OPT-350", [1]), None, "profiles"),
        ("info-layer-gap", lambda p, i, b: i["OPT-350"]["1"].pop("3"), None, "profiles"),
        ("bandwidth-key-superscript", lambda p, i, b: z(b).__setitem__("\u00b2", z(b)["1"]),
         None, "network"),
        ("bandwidth-coefficient-text", lambda p, i, b: z(b).__setitem__("1", [["a"], 1]), None,
         "network"),
        ("bandwidth-coefficients-empty", lambda p, i, b: z(b).__setitem__("1", [[], 1]), None,
         "network"),
        ("bandwidth-leaf-number", lambda p, i, b: z(b).__setitem__("1", 5), None, "network"),
        ("bandwidth-zone-number", lambda p, i, b: b.__setitem__("us-central1-a", 5), None,
         "network"),
        ("bandwidth-zone-list", lambda p, i, b: b.__setitem__("us-central1-a", [1]), None,
         "network"),
        ("params-1e400", None, {"llm_info.json": _json.dumps({"OPT-350": _json.loads(
            (REPO / "sim/profiles/data/llm_info.json").read_text())["OPT-350"]}).replace(
            '"params_floats": 53608448', '"params_floats": 1e400', 1)}, "profiles"),
        ("profiles-not-json", None, {"profiles.json": '{"OPT-350": '}, "profiles"),
        ("profiles-nan", None, {"profiles.json": '{"OPT-350": NaN}'}, "profiles"),
        ("profiles-nested-deep", None, {"profiles.json": "[" * 100000 + "]" * 100000},
         "profiles"),
        ("profiles-binary", None, {"profiles.json": "\x00\x01\x02"}, "profiles"),
        ("gpus-not-json", None, {"gpus.json": "{"}, "gpus|profiles"),
    ]
    for name, mutate, raw, param in folders:
        d = _sailor_folder(fx, name, mutate, raw)
        add(f"train/plan-profiles-{name}", T("--plan", good, "--profiles", d, *one),
            refuse(param))
        add(f"plan/profiles-{name}", P("--profiles", d), refuse(param))
    add("plan/profiles-bom-json", P("--profiles", _sailor_folder(
        fx, "bom", None, {"gpus.json": "\ufeff" + (REPO / "sim/profiles/data/gpus.json")
                          .read_text()})), ok("predicted"), note="a BOM before the JSON is dropped")
    add("plan/profiles-not-a-folder", P("--profiles", str(fx.file)), refuse("profiles"))
    add("plan/profiles-empty-folder", P("--profiles", str(fx.empty_dir)), refuse("profiles"))

    # -- plan files a user writes --
    def stage(a: int, b: int, reps: Any = None) -> dict:
        return {"first_layer": a, "last_layer": b, "replicas": gh if reps is None else reps}

    plans: list[tuple[str, Any, str]] = [
        ("last-layer-1e8", dict(good_doc, stages=[stage(0, 10**8)]), "plan|layers"),
        ("last-layer-1e12", dict(good_doc, stages=[stage(0, 10**12)]), "plan"),
        ("count-1e12", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], count=10**12)])]),
         "plan"),
        ("count-zero", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], count=0)])]), "plan"),
        ("count-text", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], count="2")])]), "plan"),
        ("count-bool", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], count=True)])]), "plan"),
        ("count-float", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], count=2.0)])]), "plan"),
        ("unknown-top-key", dict(good_doc, stage=[]), "plan"),
        ("unknown-stage-key", dict(good_doc, stages=[dict(stage(0, 25), replica=gh)]), "plan"),
        ("unknown-replica-key", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], gpus=4)])]),
         "plan"),
        ("layers-list-text", dict(good_doc, stages=[{"layers": ["a"], "replicas": gh}]),
         "layers|plan"),
        ("layers-list-empty", dict(good_doc, stages=[{"layers": [], "replicas": gh}]),
         "layers|plan"),
        ("first-after-last", dict(good_doc, stages=[stage(5, 1)]), "plan"),
        ("first-negative", dict(good_doc, stages=[stage(-1, 25)]), "layers|plan"),
        ("layers-overlap", dict(good_doc, stages=[stage(0, 12), stage(12, 25)]), "layers"),
        ("no-stages", dict(good_doc, stages=[]), "stages|plan"),
        ("stages-not-list", dict(good_doc, stages={"a": 1}), "plan"),
        ("replicas-empty", dict(good_doc, stages=[stage(0, 25, [])]), "replicas|plan"),
        ("microbatch-zero", dict(good_doc, microbatch_size=0), "microbatch_size"),
        ("microbatch-text", dict(good_doc, microbatch_size="2"), "plan"),
        ("batch-not-multiple", dict(good_doc, global_batch_size=7), "global_batch_size"),
        ("batch-huge", dict(good_doc, global_batch_size=2 * 10**12), "global_batch_size|plan|microbatches"),
        ("model-unknown", dict(good_doc, model="GPT-X"), "model"),
        ("model-number", dict(good_doc, model=5), "model|plan"),
        ("gpu-unknown", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], gpu="H200")])]), "gpu"),
        ("gpu-lower-case", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], gpu="gh-96")])]),
         "gpu"),
        ("tp-zero", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], tp=0)])]), "tp"),
        ("tp-text", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], tp="4")])]), "tp"),
        ("gpus-per-node-zero", dict(good_doc, stages=[stage(0, 25, [dict(gh[0], gpus_per_node=0)])]),
         "gpus_per_node"),
        ("zone-unknown", dict(good_doc, stages=[stage(0, 12), stage(13, 25, [dict(
            gh[0], zone="mars-1")])]), "network"),
        ("not-a-table", [1, 2, 3], "plan"),
        ("number-1e400", '{"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 1e400,'
         ' "stages": []}', "plan"),
        ("nan", '{"model": "OPT-350", "microbatch_size": NaN}', "plan"),
        ("truncated", '{"model": "OPT-350", "stages": [', "plan"),
        ("empty-file", "", "plan"),
        ("bom", "\ufeff" + _json.dumps(good_doc), ""),
    ]
    for name, doc, param in plans:
        f = plan(f"{name}.json", doc)
        add(f"train/plan-{name}", T("--plan", f, *one),
            refuse(param) if param else ok("step time"), timeout=60)
    add("train/plan-tp-not-profiled", T("--plan", plan("tp-not-profiled.json", dict(
        good_doc, stages=[stage(0, 25, [dict(gh[0], tp=3)])])), *one),
        ok("estimated, not measured: GH-96 TP 3 derived from TP 1"),
        note="a TP degree the profile lacks is derived from TP 1 and the output says so "
             "(docs/real_runs.md)")
    add("train/plan-tp8-two-stages", T("--plan", plan("tp8-two-stages.json", dict(
        good_doc, stages=[stage(0, 12, [dict(gh[0], tp=8, gpus_per_node=8)]),
                          stage(13, 25, [dict(gh[0], tp=8, gpus_per_node=8)])])), *one),
        ok("with 8/8 flows (TP degrees): not measured; the 4/4-flow curve"),
        note="8 flows per hop, the network measured 1, 2, 4: the 4-flow curve shared by the 8 "
             "(was refused naming network; docs/real_runs.md)")
    add("train/plan-count-1e5", T("--plan", plan("count-1e5.json", dict(
        good_doc, global_batch_size=2 * 10**5, stages=[stage(0, 25, [dict(gh[0], count=10**5)])])),
        *one), Expect("interrupt", "interrupted"), interrupt_after=8.0, timeout=30,
        note="400,000 GPUs (10^5 replicas of a TP-4 stage): a valid plan of minutes of work, "
             "which Ctrl-C stops at once")
    toml = plan("plan.toml", 'model = "OPT-350"\nmicrobatch_size = 2\nglobal_batch_size = 8\n'
                "[[stages]]\nfirst_layer = 0\nlast_layer = 25\nreplicas = [{gpu = \"GH-96\", "
                'tp = 4, gpus_per_node = 4, zone = "us-central1-a"}]\n')
    add("train/plan-toml", T("--plan", toml, *one), ok("step time"))
    add("train/plan-toml-inf", T("--plan", plan("inf.toml", "microbatch_size = inf\n")),
        refuse("plan|microbatch_size"))
    add("train/plan-toml-1e400", T("--plan", plan("big.toml", "microbatch_size = 1e400\n")),
        refuse("plan"))
    add("train/plan-toml-broken", T("--plan", plan("broken.toml", "[[stages]\n")), refuse("plan"))
    for name, path in (("fifo", fx.fifo["trace.csv"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir), ("binary", fx.binary)):
        add(f"train/plan-file-{name}", T("--plan", str(path)), refuse("plan"), timeout=20)
    # -- options beside a plan --
    for name, extra, param in (
            ("sync-wait", ("--sync-wait", "1"), "sync_wait"),
            ("stragglers", ("--stragglers", "drop"), "stragglers"),
            # swarm runs a plan (sim.profiles.swarm): this one's TP-4 replicas are refused
            ("strategy-swarm", ("--strategy", "swarm"), "tp"),
            ("strategy-step-times", ("--strategy", "redundancy", "--step-times",
                                     str(fx.root / "none.csv")), "step_times"),
            ("notice-without-strategy", ("--preemption-notice", "aws", "--failure-trace",
                                         "aws-p3", "--restart-cost", "10"),
             "preemption_notice"),
            ("step-times", ("--step-times", str(fx.root / "none.csv")), "step_times"),
            ("network", ("--network", "tree"), "network"),
            ("virtual-stages", ("--virtual-stages", "2"), "virtual_stages"),
            ("topology", ("--topology", "datacenter"), "topology"),
            ("speeds", ("--speeds", str(fx.root / "none.csv")), "speeds"),
            ("stall-limit-no-failures", ("--stall-limit", "100"), "stall_limit"),
            ("profiles-missing", ("--profiles", str(fx.root / "none")), "profiles"),
            ("model-unknown", ("--model", "GPT-X"), "model"),
            ("p2p-unknown", ("--p2p", "maybe"), "p2p"),
            ("schedule-async", ("--schedule", "async"), "schedule"),
            ("schedule-interleaved", ("--schedule", "interleaved"), "schedule"),
            ("price-negative", ("--price", "-1"), "price"),
            ("price-text", ("--price", "cheap"), "--price|price"),
            ("mtbf-without-restart", ("--mtbf", "100"), "restart_cost"),
    ):
        add(f"train/plan-with-{name}", T("--plan", good, *one, *extra), refuse(param))
    add("train/plan-explain", T("--plan", good, *one, "--explain"), ok("stage"))
    # a step-level strategy runs on the plan's own step times (sim.profiles.formations); its
    # nodes must be of one kind, since a formation puts any ready node at any stage
    add("train/plan-with-strategy-ok", T("--plan", good, *one, "--strategy", "redundancy"),
        ok("strategy"))
    mixed = plan("mixed.json", dict(good_doc, stages=[
        good_doc["stages"][0], dict(good_doc["stages"][1], replicas=[dict(gh[0], tp=2)])]))
    add("train/plan-mixed-nodes-with-strategy",
        T("--plan", mixed, *one, "--strategy", "checkpoint-restart"), refuse("plan"))
    # checkpoint_bandwidth: a plan's checkpoint is its bytes over the storage rate
    # (sim.profiles.formations); refused where it cannot apply
    for name, spec, param in (
            ("zero", "checkpoint-restart:checkpoint_bandwidth=0", "checkpoint_bandwidth"),
            ("negative", "checkpoint-restart:checkpoint_bandwidth=-1", "checkpoint_bandwidth"),
            ("negative-unit", "redundancy:checkpoint_bandwidth=-2GB/s", "checkpoint_bandwidth"),
            ("size", "checkpoint-restart:checkpoint_bandwidth=2GB", "checkpoint_bandwidth"),
            ("time", "checkpoint-restart:checkpoint_bandwidth=2s", "checkpoint_bandwidth"),
            ("text", "checkpoint-restart:checkpoint_bandwidth=fast", "checkpoint_bandwidth"),
            ("inf", "checkpoint-restart:checkpoint_bandwidth=inf", "checkpoint_bandwidth"),
            ("nan", "checkpoint-restart:checkpoint_bandwidth=nan", "checkpoint_bandwidth"),
            ("with-checkpoint", "checkpoint-restart:checkpoint_bandwidth=2GB/s,checkpoint=3",
             "checkpoint"),
            ("no-checkpoints", "reconfiguration:checkpoint_bandwidth=2GB/s",
             "checkpoint_bandwidth")):
        add(f"train/plan-checkpoint-bandwidth-{name}",
            T("--plan", good, *one, "--strategy", spec), refuse(param))
    add("train/plan-checkpoint-bandwidth-with-cost",
        T("--plan", good, *one, "--strategy", "checkpoint-restart:checkpoint_bandwidth=2GB/s",
          "--checkpoint-cost", "3"), refuse("checkpoint"))
    add("train/checkpoint-bandwidth-without-plan",
        T("--steps", "1", "--strategy", "checkpoint-restart:checkpoint_bandwidth=2GB/s"),
        refuse("checkpoint_bandwidth"))
    add("train/plan-checkpoint-bandwidth-ok",
        T("--plan", good, *one, "--strategy", "redundancy:checkpoint_bandwidth=10Gbit/s"),
        ok("the plan's bytes over checkpoint_bandwidth"))
    add("train/plan-with-price-ok", T("--plan", good, *one, "--price", "2.5"), ok("cost"))
    # Bamboo's eager mode (the default): its copy on the GPU (sim.profiles.build.
    # eager_copy_memory; with TP, a shard a TP rank: dtsim's extension); lazy keeps the copy
    # in CPU memory
    add("train/plan-redundancy-eager-tp-ok", T("--plan", good, *one, "--strategy",
                                               "redundancy:mode=eager"), ok("strategy"))
    one_gpu = [{"gpu": "GH-96", "tp": 1, "gpus_per_node": 1, "zone": "us-central1-a"}]
    tp1 = {"model": "OPT-350", "microbatch_size": 1, "global_batch_size": 256,
           "framework": {"name": "sailor-deepspeed", "version": "0.16.5"},
           "stages": [{"first_layer": a, "last_layer": b, "replicas": one_gpu * 2}
                      for a, b in ((0, 8), (9, 17), (18, 25))]}
    tp1_plan = plan("tp1-3stages.json", tp1)
    add("train/plan-redundancy-eager-out-of-memory",
        T("--plan", tp1_plan, *one, "--strategy", "redundancy:mode=eager"), refuse("plan"))
    add("train/plan-redundancy-default-out-of-memory",
        T("--plan", tp1_plan, *one, "--strategy", "redundancy"), refuse("plan"))
    add("train/plan-redundancy-lazy-ok",
        T("--plan", tp1_plan, *one, "--strategy", "redundancy:mode=lazy"), ok("strategy"))
    # --strategy swarm: the plan's stages and replicas as SWARM's stages and peer pools
    # (sim.profiles.swarm); what SWARM has no meaning for is refused in one line
    SW = ("--strategy", "swarm")
    add("train/plan-swarm-ok", T("--plan", tp1_plan, *one, *SW), ok("strategy swarm"))
    add("train/plan-swarm-queue-ok", T("--plan", tp1_plan, *one, *SW, "--routing", "queue"),
        ok("swarm/queue"))
    for name, extra, param in (
            ("p2p", ("--p2p", "overlap"), "p2p"),
            ("sync", ("--sync", "allreduce"), "sync"),
            ("schedule-gpipe", ("--schedule", "gpipe"), "schedule"),
            ("routing-unknown", ("--routing", "random"), "routing"),
            ("explain", ("--explain",), "explain")):
        add(f"train/plan-swarm-{name}", T("--plan", tp1_plan, *one, *SW, *extra), refuse(param))
    add("train/plan-routing-without-swarm", T("--plan", tp1_plan, *one, "--routing", "queue"),
        refuse("routing"), note="a plan's pipelines are fixed unless --strategy swarm")
    hosted = plan("swarm-hosts.json", dict(tp1, stages=[
        {"first_layer": 0, "last_layer": 12, "replicas": [dict(one_gpu[0], gpus_per_node=2, host="n0")] * 2},
        {"first_layer": 13, "last_layer": 25, "replicas": [dict(one_gpu[0], gpus_per_node=2, host="n1")] * 2}]))
    add("train/plan-swarm-named-hosts", T("--plan", hosted, *one, *SW), refuse("plan"),
        note="peers wired at random sharing a host's NICs are not modelled")
    return cases


def users_planner_cases(fx: Fixtures) -> list[Case]:
    """``dtsim plan`` on a user's fleet specs, prices and options."""
    if not _has_command("plan"):
        return []
    import json as _json

    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case("plan/" + id_, list(argv), expect, **kw))

    P = lambda *a: dtsim("plan", "--model", "OPT-350", *a)  # noqa: E731
    gh = ("--nodes", "GH-96:4x2@us-central1-a")
    q = ("--global-batch-size", "8", "--simulate", "0", "--top", "1")
    for name, spec, expect in (
            ("nodes-5000-digit-count", "GH-96:4x" + "9" * 5000 + "@us-central1-a", refuse("nodes")),
            ("nodes-5000-digit-gpn", "GH-96:" + "9" * 5000 + "x2@us-central1-a", refuse("nodes")),
            ("nodes-count-1e10", "GH-96:4x10000000000@us-central1-a", refuse("nodes")),
            ("nodes-zone-typo", "GH-96:4x2@us-centrl1-a", refuse("nodes")),
            ("nodes-zone-case", "GH-96:4x2@US-CENTRAL1-A", refuse("nodes")),
            ("nodes-gpu-lower-case", "gh-96:4x2@us-central1-a", refuse("fleet|nodes")),
            ("nodes-gpu-unknown", "H200:8x2@us-central1-a", refuse("fleet|nodes")),
            ("nodes-no-zone-ambiguous", "GH-96:4x2", refuse("nodes")),
            ("nodes-trailing-comma", "GH-96:4x2@us-central1-a,", refuse("nodes")),
            ("nodes-empty-part", "GH-96:4x2@us-central1-a,,A100-40:8x1@us-central1-a",
             refuse("nodes")),
            ("nodes-spaces", " GH-96:4x2@us-central1-a , A100-40:8x1@us-central1-a ", ok("predicted")),
            ("nodes-zero-count", "GH-96:4x0@us-central1-a", refuse("nodes")),
            ("nodes-negative", "GH-96:4x-2@us-central1-a", refuse("nodes")),
            ("nodes-float", "GH-96:4x2.5@us-central1-a", refuse("nodes")),
            ("nodes-no-x", "GH-96:42@us-central1-a", refuse("nodes")),
            ("nodes-unicode-digits", "GH-96:\u0664x2@us-central1-a", refuse("nodes")),
            ("nodes-same-kind-twice", "GH-96:4x1@us-central1-a,GH-96:4x1@us-central1-a",
             ok("predicted")),
            ("nodes-empty", " ", refuse("nodes")),
    ):
        add(name, P("--nodes", spec, *q), expect)
    for name, extra, expect in (
            ("price-lower-case", ("--price", "gh-96=2"), refuse("price")),
            ("price-not-in-fleet", ("--price", "A100-40=2"), refuse("price")),
            ("price-twice", ("--price", "GH-96=2", "--price", "GH-96=3"), refuse("price")),
            ("price-nan", ("--price", "GH-96=nan"), refuse("prices|price")),
            ("price-inf", ("--price", "GH-96=inf"), refuse("prices|price")),
            ("price-zero", ("--price", "GH-96=0"), refuse("prices|price")),
            ("price-text", ("--price", "GH-96=cheap"), refuse("--price")),
            ("price-no-gpu", ("--price", "=2"), refuse("--price")),
            ("price-ok", ("--price", "GH-96=2", "--objective", "cost"), ok("predicted")),
            # audit5: samples per dollar over a price that underflows printed 'inf'
            ("price-denormal-per-dollar-not-measured", ("--price", "GH-96=1e-320"),
             ok("not measured")),
            ("max-price-denormal", ("--max-price-per-hour", "1e-300"), refuse("max_price_per_hour")),
            ("memory-fraction-denormal", ("--memory-fraction", "1e-300"),
             refuse("memory_fraction")),
            ("max-price-negative", ("--max-price-per-hour", "-1"), refuse("max_price_per_hour")),
            ("max-price-nan", ("--max-price-per-hour", "nan"), refuse("max_price_per_hour")),
            ("max-price-too-low", ("--max-price-per-hour", "0.01"), refuse("max_price_per_hour")),
            ("mtbf-with-simulate-0", ("--mtbf", "100", "--restart-cost", "5"), refuse("mtbf")),
            ("replace-time-with-simulate-0", ("--mtbf", "100", "--replace-time", "5",
                                              "--restart-cost", "5"), refuse("mtbf|replace_time")),
            ("restart-cost-with-simulate-0", ("--restart-cost", "5"), refuse("restart_cost")),
            # audit 7: simulated without failures, the restart cost was accepted and ignored
            ("restart-cost-without-failures", ("--simulate", "1", "--restart-cost", "5"),
             refuse("restart_cost")),
            ("checkpoint-every-with-simulate-0", ("--checkpoint-every", "2"),
             refuse("checkpoint_every")),
            ("failure-trace-with-simulate-0", ("--failure-trace", "aws-p3"),
             refuse("failure_trace")),
            ("steps-with-simulate-0", ("--steps", "5"), refuse("steps")),
            ("replications-with-simulate-0", ("--replications", "5"), refuse("replications")),
            ("seed-with-simulate-0", ("--seed", "5"), refuse("seed")),
            ("tp-zero", ("--tp", "0"), refuse("tp")),
            ("tp-text", ("--tp", "four"), refuse("--tp|tp")),
            ("tp-not-measured", ("--tp", "3"), refuse("tp")),
            ("tp-repeated", ("--tp", "1,1"), refuse("tp")),
            ("tp-unicode-digit", ("--tp", "\u0661"), refuse("--tp|tp")),
            ("microbatch-sizes-repeated", ("--microbatch-sizes", "1,1"),
             refuse("microbatch_sizes")),
            ("layouts-repeated", ("--layouts", "stage,stage"), refuse("layouts")),
            ("microbatch-sizes-zero", ("--microbatch-sizes", "0"), refuse("microbatch_sizes")),
            ("microbatch-sizes-empty-item", ("--microbatch-sizes", "1,,2"),
             refuse("--microbatch-sizes|microbatch_sizes")),
            ("microbatch-sizes-not-measured", ("--microbatch-sizes", "3"),
             refuse("microbatch_sizes")),
            ("max-stages-negative", ("--max-stages", "-1"), refuse("max_stages")),
            ("max-stages-huge", ("--max-stages", "1000000000"), ok("predicted")),
            ("layouts-empty-item", ("--layouts", "stage,"), ok("predicted")),
            ("layouts-none", ("--layouts", ","), refuse("layouts")),
            ("memory-fraction-nan", ("--memory-fraction", "nan"), refuse("memory_fraction")),
            ("memory-fraction-tiny", ("--memory-fraction", "1e-9"), refuse("memory_fraction")),
            ("top-huge", ("--top", "1000000000"), ok("predicted")),
            ("objective-cost-ok", ("--objective", "cost"), ok("predicted")),
            ("schedule-unknown", ("--schedule", "zb"), refuse("schedule")),
            ("schedule-gpipe", ("--schedule", "gpipe"), ok("predicted")),
            ("p2p-overlap", ("--p2p", "overlap"), ok("predicted")),
            ("out-folder", ("--out", str(fx.dir)), refuse("out")),
            ("out-dev-full", ("--out", "/dev/full"), refuse("out")),
            ("out-under-file", ("--out", fx.under_file + "/p.json"), refuse("out")),
            ("json", ("--json",), ok('"plans"')),
    ):
        add(name, P(*gh, *_override(q, extra)), expect)
    # a dtsim CSV of workers s{stage}r{replica}: by name, as dtsim train --plan replays it
    sim1 = ("--global-batch-size", "8", "--simulate", "1", "--top", "2", "--steps", "1",
            "--restart-cost", "0.01")
    named = lambda n, text: ("--failure-trace", str(fx._write(n, text)))  # noqa: E731
    for name, extra, expect in (
            ("trace-names-no-listed-plan-has", named("uplan/s9r0.csv",
                                                     "worker,start,end\ns9r0,0.05,0.1\n"),
             refuse("failure_trace")),
            ("trace-names-with-trace-policy", (*named("uplan/s1r0.csv",
                                                      "worker,start,end\ns1r0,0.05,0.1\n"),
                                               "--trace-policy", "random"),
             refuse("trace_policy")),
            ("trace-names-passes-over-plans", named("uplan/s1r0.csv",
                                                    "worker,start,end\ns1r0,0.05,0.1\n"),
             ok("not simulated under it")),
    ):
        add(name, P(*gh, *sim1, *extra), expect)
    for name, gbs, expect in (("batch-negative", "-8", refuse("global_batch_size")),
                              ("batch-text", "eight", refuse("--global-batch-size")),
                              ("batch-prime", "7", ok("predicted")),
                              ("batch-1e12", "1000000000000", refuse("fleet"))):
        add(name, P(*gh, "--global-batch-size", gbs, "--simulate", "0", "--top", "1"), expect,
            timeout=120)
    add("simulate-negative-nodes", P(*gh, "--global-batch-size", "8", "--simulate", "-1"),
        refuse("simulate"))
    shape_only = fx.root / "p-shape-only"
    (shape_only / "models").mkdir(parents=True, exist_ok=True)
    (shape_only / "models" / "S.json").write_text(_json.dumps({
        "model": "S", "bytes_per_value": 2, "shape": {
            "layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000}}))
    add("model-shape-only", dtsim("plan", "--model", "S", "--profiles", str(shape_only), *gh,
                                  *q), ok("given by its shape: every time is estimated"),
        note="searched on the roofline estimates train --plan gives a shape (it was refused: "
             "'model' must be a profile with measured times)")
    add("model-shape-only-tp-not-dividing-heads", dtsim(
        "plan", "--model", "S", "--profiles", str(shape_only), *gh, *q, "--tp", "3"),
        refuse("tp"), note="TP 3 fits a 4-GPU node but not S's 4 heads: the line names the "
                           "heads (it said only 'measured' and 'fits a node')")
    half_tied = fx.root / "p-shape-half-tied"
    (half_tied / "models").mkdir(parents=True, exist_ok=True)
    (half_tied / "models" / "S.json").write_text(_json.dumps({
        "model": "S", "bytes_per_value": 2, "tied_embeddings": False, "shape": {
            "layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000,
            "tied": True}}))
    add("model-shape-tie-disagrees", dtsim("plan", "--model", "S", "--profiles",
                                           str(half_tied), *gh, *q), refuse("model"),
        note="the shape's tied and tied_embeddings are one fact: a shape-only profile was "
             "sized tied (no head weight) and run untied (no tied all-reduce) by their defaults")
    huge_tied = fx.root / "p-shape-tied-huge-vocabulary"
    (huge_tied / "models").mkdir(parents=True, exist_ok=True)
    (huge_tied / "models" / "S.json").write_text(_json.dumps({
        "model": "S", "bytes_per_value": 2, "shape": {
            "layers": 4, "hidden": 256, "heads": 4, "sequence": 128,
            "vocabulary": 10 ** 15, "tied": True}}))
    add("model-shape-tied-vocabulary-1e15", dtsim(
        "plan", "--model", "S", "--profiles", str(huge_tied), *gh, *q), refuse("fleet"),
        timeout=60, note="no GPU holds it; the tied all-reduce's bound was summed one bucket at "
                         "a time (1e8 buckets: a stall)")
    no_sheet = fx.root / "p-shape-no-datasheet"
    (no_sheet / "models").mkdir(parents=True, exist_ok=True)
    (no_sheet / "models" / "S.json").write_text((shape_only / "models" / "S.json").read_text())
    (no_sheet / "gpus.json").write_text(_json.dumps({"gpus": [
        {"name": "X1", "memory_bytes": 8e10, "price_per_hour": 1.0, "overhead_bytes": 0}]}))
    add("model-shape-only-no-datasheet", dtsim("plan", "--model", "S", "--profiles",
                                               str(no_sheet), "--nodes", "X1:4x1@z", *q),
        refuse("fleet"), note="no peak FLOP/s or memory bandwidth to estimate a shape on")
    # audit4: a shape at its limits, fleets larger than any plan uses, overflowing times
    for name, shape, expect, why in (
            ("layers-1e6", {"layers": 1000000}, refuse("layers"),
             "10^6 layers estimated and searched one by one: a runaway before"),
            ("hidden-1e8", {"hidden": 100000000, "heads": 1}, refuse("fleet"),
             "it named bucket_size, which nobody gave (the whole model's all-reduce, beyond any "
             "GPU's memory, cut into buckets)"),
            ("vocabulary-1e15", {"vocabulary": 10**15}, refuse("fleet"), "as hidden-1e8")):
        d = fx.root / f"p-shape-{name}"
        (d / "models").mkdir(parents=True, exist_ok=True)
        (d / "models" / "S.json").write_text(_json.dumps({
            "model": "S", "bytes_per_value": 2, "shape": {
                "layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000,
                **shape}}))
        add(f"model-shape-{name}", dtsim("plan", "--model", "S", "--profiles", str(d), *gh, *q),
            expect, timeout=60, note=why)
    big = fx._write("ufleet/count-999999999.json", '{"nodes": [{"gpu": "GH-96", '
                    '"gpus_per_node": 4, "zone": "us-central1-a", "count": 999999999}]}')
    add("fleet-file-count-999999999-runs", P("--fleet", str(big), *q), ok("predicted"),
        timeout=60, note="the largest count a file takes, as --nodes (10^9 was a list of every "
        "node, 15 GB, and a hang before: nodes are kept as runs)")
    add("nodes-count-999999999-runs", P("--nodes", "GH-96:4x999999999@us-central1-a", *q),
        ok("predicted"), timeout=60, note="the largest count --nodes takes: a hang before")
    add("mtbf-1e400s-is-none", P(*gh, *_override(q, ("--simulate", "1", "--mtbf", "1e400s"))),
        ok("predicted"),
        note="as --mtbf 1e400 and inf: no failure (it was refused as not finite)")
    add("restart-cost-1e400-plain", P(*gh, *q, "--mtbf", "1h", "--restart-cost", "1e400"),
        refuse("restart_cost"), note="as 1e400s: a finite time (it was read as inf)")
    add("simulate-with-failures-ok", P(*gh, "--global-batch-size", "8", "--simulate", "1",
                                       "--top", "1", "--mtbf", "1000", "--restart-cost", "5"),
        ok("predicted"))
    add("fleet-from-runs-unknown", P("--fleet-from-runs", "mit-N9", "--simulate", "0"),
        refuse("fleet_from_runs"))
    add("fleet-from-runs-empty-item", P("--fleet-from-runs", "mit-N2_D1,", "--simulate", "0"),
        refuse("fleet_from_runs"))
    for name, text in (("not-json", "{"), ("list", "[1]"), ("no-nodes", "{}"),
                       ("nodes-not-list", '{"nodes": 5}'),
                       ("node-count-huge", '{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, '
                                           '"zone": "us-central1-a", "count": 1e400}]}'),
                       ("node-count-zero", '{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, '
                                           '"zone": "us-central1-a", "count": 0}]}')):
        f = fx._write(f"ufleet/{name}.json", text)
        add(f"fleet-file-{name}", P("--fleet", str(f), *q), refuse("fleet|nodes|count"))
    for name, path in (("fifo", fx.fifo["trace.csv"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir)):
        add(f"fleet-file-{name}", P("--fleet", str(path), *q), refuse("fleet"), timeout=20)
    add("large-fleet-interrupted", P("--nodes", "GH-96:4x100@us-central1-a,A100-40:8x50@us-"
                                     "central1-a,RTX-3090:8x50@us-central1-a",
                                     "--global-batch-size", "1024", "--simulate", "0"),
        Expect("interrupt", "interrupted"), interrupt_after=8.0, timeout=30,
        note="a 1200-GPU three-type fleet: a search of minutes (a bar with its ETA on a "
             "terminal) that Ctrl-C stops at once")
    return cases


def users_strategy_cases(fx: Fixtures) -> list[Case]:
    """``dtsim train --strategy`` with a user's own parameters, tables and traces."""
    if not _has_option("train", "--strategy"):
        return []
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case("train/" + id_, list(argv), expect, **kw))

    T = lambda *a: dtsim("train", "--replications", "1", *a)  # noqa: E731
    fail = ("--mtbf", "100", "--steps", "20", "--stages", "4", "--replicas", "2")
    for spec, expect in (
            # without Varuna's growth (the Oobleck artifact's rule) a job that loses a worker
            # every 12.5 s never checkpoints: the watchdog stops it; with growth and no sleep
            # each morph's checkpoint keeps the steps done, and the job finishes (1.1e6 s);
            # with Varuna's manager's 120 s sleep after each failure (the default since
            # varunadepth) the job is asleep more than it runs: the watchdog stops it again;
            # with no sleep but Varuna's restart limit (varunanotice) the relaunches after 3
            # quick ones wait for the manager's poll, the job stalls and the watchdog stops it
            # naming the loss rate; window=0 (no limit) keeps the 9 reconfigurations
            ("checkpoint-restart:every=1e18,grow=false", ok("stopped without progress")),
            ("checkpoint-restart:every=1000000000000000000,grow=false",
             ok("stopped without progress")),
            ("checkpoint-restart:grow=false", ok("stopped without progress")),
            ("checkpoint-restart:settle=0", ok("stopped without progress")),
            ("checkpoint-restart:settle=0,window=0", ok("9 reconfigurations")),
            ("checkpoint-restart", ok("stopped without progress")),
            ("redundancy:slowdown=1e300", ok("stopped without progress")),
            ("redundancy:slowdown=inf", refuse("slowdown")),
            ("redundancy:slowdown=nan", refuse("slowdown")),
            ("checkpoint-restart:every=1.5", refuse("every")),
            ("checkpoint-restart:every=-1", refuse("every")),
            ("checkpoint-restart:every=1e400", refuse("every")),
            ("checkpoint-restart:checkpoint=inf", refuse("checkpoint")),
            ("checkpoint-restart:checkpoint=nan", refuse("checkpoint")),
            ("checkpoint-restart:restart=inf", refuse("restart")),
            ("checkpoint-restart:restart=-1", refuse("restart")),
            ("checkpoint-restart:overhead_bound=0", refuse("overhead_bound")),
            ("checkpoint-restart:overhead_bound=2", refuse("overhead_bound")),
            ("checkpoint-restart:snapshot=async", refuse("snapshot")),
            ("checkpoint-restart:notice=maybe", refuse("notice")),
            ("checkpoint-restart:boot=inf", refuse("boot")),
            ("checkpoint-restart:interval=adaptive", ok("checkpoint-restart")),
            ("checkpoint-restart:interval=overhead", ok("checkpoint-restart")),
            ("checkpoint-restart:snapshot=overlapped,copy=1", ok("checkpoint-restart")),
            # Varuna's job morphing: grow (a boolean) and its poll (a time > 0, with grow only)
            ("checkpoint-restart:grow=maybe", refuse("grow")),
            ("checkpoint-restart:poll=0", refuse("poll")),
            ("checkpoint-restart:poll=-60", refuse("poll")),
            ("checkpoint-restart:poll=inf", refuse("poll")),
            ("checkpoint-restart:poll=nan", refuse("poll")),
            ("checkpoint-restart:poll=x", refuse("poll")),
            ("checkpoint-restart:grow=false,poll=60", refuse("poll")),
            ("checkpoint-restart:poll=60", ok("checkpoint-restart")),
            # the manager's sleep after a failure (a time >= 0, with grow only)
            ("checkpoint-restart:settle=-1", refuse("settle")),
            ("checkpoint-restart:settle=inf", refuse("settle")),
            ("checkpoint-restart:settle=nan", refuse("settle")),
            ("checkpoint-restart:settle=x", refuse("settle")),
            ("checkpoint-restart:grow=false,settle=60", refuse("settle")),
            ("checkpoint-restart:settle=1min", ok("checkpoint-restart")),
            # varunanotice: the manager's lead before a notified preemption (a time >= 0,
            # with grow and a preemption notice only) and its restart window (>= 0, grow)
            ("checkpoint-restart:lead=-1", refuse("lead")),
            ("checkpoint-restart:lead=inf", refuse("lead")),
            ("checkpoint-restart:lead=nan", refuse("lead")),
            ("checkpoint-restart:lead=x", refuse("lead")),
            ("checkpoint-restart:grow=false,lead=30", refuse("lead")),
            ("checkpoint-restart:lead=60", refuse("lead")),
            ("checkpoint-restart:notice=ignore,lead=30", refuse("lead")),
            ("checkpoint-restart:window=-1", refuse("window")),
            ("checkpoint-restart:window=inf", refuse("window")),
            ("checkpoint-restart:window=nan", refuse("window")),
            ("checkpoint-restart:window=x", refuse("window")),
            ("checkpoint-restart:grow=false,window=300", refuse("window")),
            ("checkpoint-restart:window=0", ok("checkpoint-restart")),
            ("checkpoint-restart:window=5min", ok("checkpoint-restart")),
            # smallfix7: what a notice does, with no --preemption-notice: taken and ignored
            ("checkpoint-restart:notice=ignore", refuse("notice")),
            ("checkpoint-restart:notice=checkpoint", refuse("notice")),
            ("reconfiguration:notice=drain", refuse("notice")),
            ("redundancy:rebalance=inf", refuse("rebalance")),
            # audit 7: a cost the failures always interrupt ran for hours (the watchdog waits
            # 1000 x it): 1.6e12 expected transitions, refused naming it
            ("redundancy:rebalance=1e10", refuse("rebalance")),
            ("checkpoint-restart:restart=1e10", refuse("restart")),
            ("reconfiguration:reconfigure=1e10", refuse("reconfigure")),
            ("redundancy:threshold=-0.1", refuse("threshold")),
            ("redundancy:overhead=-1", refuse("overhead")),
            ("redundancy:overhead=x", refuse("overhead")),
            ("redundancy:every=-2", refuse("every")),
            ("reconfiguration:reconfigure=inf", refuse("reconfigure")),
            ("reconfiguration:min_nodes=0", refuse("min_nodes")),
            ("reconfiguration:min_nodes=99", refuse("min_nodes")),
            ("reconfiguration:grow=maybe", refuse("grow")),
            ("reconfiguration:grow=yes", ok("reconfiguration")),
            ("reconfiguration:every=5,checkpoint=2", ok("reconfiguration")),
            ("redundancy:", ok("redundancy")),
            (":every=2", refuse("strategy")),
            ("redundancy:every=2,", ok("redundancy")),
            ("redundancy:=2", refuse("strategy")),
            ("redundancy:every==2", refuse("every")),
            ("REDUNDANCY", refuse("strategy")),
            ("redundancy:Every=2", refuse("strategy")),
    ):
        name = (spec.replace("==", "-eq-eq-").replace(":", "-").replace("=", "-")
                .replace(",", "-").strip("-") or "empty")
        add(f"strategy-{name}", T(*fail, "--strategy", spec), expect, timeout=120)
    add("strategy-pipeline-names-fatal", T("--stages", "2", "--replicas", "2", "--steps", "4",
                                           "--strategy", "redundancy:every=0,boot=0",
                                           "--step-times", str(_steps(fx, "u33", "pipelines",
                                                                      "1,20\n2,10\n")),
                                           "--failure-trace", str(fx._write(
                                               "u33/names.csv", "worker,start,end\n"
                                               "s0r0,5,1e9\ns1r0,6,1e9\n")), "--json"),
        ok('"fatal_failures": 1'), note="s0r0 and s1r0 are pipeline 0: their loss is fatal")
    add("strategy-stall-limit-without-failures", T("--strategy", "redundancy", "--stall-limit",
                                                   "100"), refuse("stall_limit"))
    add("strategy-replace-time-zero-joins", T("--strategy", "checkpoint-restart",
                                              "--mtbf", "2000", "--replace-time", "0",
                                              "--steps", "10", "--stages", "4", "--replicas", "2"),
        ok("checkpoint-restart"))
    # step-time tables
    for name, per, rows, expect in (
            ("count-1e12", "workers", "1000000000000,5\n", refuse("step_times")),
            ("pipelines-1e12", "pipelines", "1000000000000,5\n", refuse("step_times")),
            ("count-5000-digits", "workers", "9" * 5000 + ",5\n", refuse("step_times")),
            ("time-nan", "workers", "4,nan\n", refuse("step_times")),
            ("time-inf", "workers", "4,inf\n", refuse("step_times")),
            ("time-1e400", "workers", "4,1e400\n", refuse("step_times")),
            ("time-negative", "workers", "4,-1\n", refuse("step_times")),
            ("count-zero", "workers", "0,5\n", refuse("step_times")),
            ("count-float", "workers", "4.5,5\n", refuse("step_times")),
            ("count-blank", "workers", ",5\n", refuse("step_times")),
            ("empty", "workers", "", refuse("step_times")),
            ("bom", "workers", "4,5\n", ok("redundancy")),
    ):
        f = _steps(fx, f"u-{name}", per, rows)
        if name == "bom":
            f.write_text("\ufeff" + f.read_text())
        add(f"step-times-{name}", T("--strategy", "redundancy", "--stages", "2", "--replicas", "2",
                                    "--step-times", str(f)), expect)
    both = fx._write("u33/both.csv", "workers,pipelines,step_time\n4,2,5\n")
    add("step-times-both-columns", T("--strategy", "redundancy", "--step-times", str(both)),
        refuse("step_times"))
    big = fx.long_tables["steps"]  # written by make_long_tables() when a case needs it
    add("step-times-1e7-rows-interrupted", T("--strategy", "redundancy", "--step-times", str(big)),
        Expect("interrupt", "interrupted"), interrupt_after=6.0, timeout=30,
        note="10^7 rows: read with a bar (on a terminal), stopped at Ctrl-C")
    for name, path in (("fifo", fx.fifo["speeds.csv"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir), ("binary", fx.binary)):
        add(f"step-times-{name}", T("--strategy", "redundancy", "--step-times", str(path)),
            refuse("step_times"), timeout=20)
    # price series
    for name, rows, expect in (
            ("nan", "0,nan\n", refuse("price_series")),
            ("inf", "0,inf\n", refuse("price_series")),
            ("1e400", "0,1e400\n", refuse("price_series")),
            ("time-nan", "nan,1\n", refuse("price_series")),
            ("time-inf", "0,1\ninf,2\n", refuse("price_series")),
            ("text", "0,cheap\n", refuse("price_series")),
            ("bom", "0,1\n", ok("cost")),
    ):
        f = _prices(fx, f"u-{name}", rows)
        if name == "bom":
            f.write_text("\ufeff" + f.read_text())
        add(f"price-series-{name}", T("--price-series", str(f)), expect)
    bigp = fx.long_tables["prices"]
    add("price-series-1e7-rows-interrupted", T("--price-series", str(bigp)),
        Expect("interrupt", "interrupted"), interrupt_after=6.0, timeout=30)
    # configs whose memory cannot fit
    add("virtual-stages-1e9", T("--schedule", "interleaved", "--virtual-stages", "1000000000"),
        refuse("virtual_stages"), timeout=60, note="was over a GiB")
    add("virtual-stages-text", T("--schedule", "interleaved", "--virtual-stages", "two"),
        refuse("--virtual-stages"))
    add("sync-wait-with-plan", T("--plan", str(REPO / "sim/profiles/data/runs/mit-N2_D1.json"),
                                 "--model", "OPT-350", "--sync-wait", "1"), refuse("sync_wait"),
        note="was accepted and ignored")
    add("p2p-blocking-no-transfers", T("--p2p", "blocking"), refuse("p2p"))
    add("p2p-overlap-no-transfers", T("--p2p", "overlap"), refuse("p2p"))
    add("p2p-blocking-one-stage", T("--p2p", "blocking", "--stages", "1", "--latency", "1"),
        refuse("p2p"))
    add("p2p-blocking-with-latency", T("--p2p", "blocking", "--latency", "0.5", "--schedule",
                                       "1f1b"), ok("throughput"))
    add("stall-limit-without-failures", T("--stall-limit", "100"), refuse("stall_limit"))
    add("stall-limit-with-failures", T("--stall-limit", "100", "--mtbf", "1000"), ok("throughput"))
    return cases


def users_design_cases(fx: Fixtures) -> list[Case]:
    """``dtsim design --failure-trace`` on a user's own trace files."""
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case("design/" + id_, list(argv), expect, **kw))

    D = lambda *a: dtsim("design", *a)  # noqa: E731

    def trace(name: str, text: str) -> str:
        return str(fx._write(f"udesign/{name}", text))

    big = trace("count-1e12.csv", "0,1000000000000\n100,1000000000000\n")
    half = trace("half-1e12.csv", "0,1000000000000\n100,500000000000\n200,500000000000\n")
    for name, argv, expect in (
            ("trace-count-1e12", (big,), refuse("failure_trace")),
            ("trace-count-1e12-max-replicas", (big, "--max-replicas", "3"), ok("replicas r")),
            ("trace-half-1e12-max-replicas", (half, "--stages", "8", "--max-replicas", "20"),
             ok("replicas r")),
            ("trace-half-1e12-too-few-replicas", (half, "--stages", "8", "--max-replicas", "5"),
             ok("needs more than max_replicas=5")),
            ("trace-count-1e12-optimal", (big, "--skip-penalty", "0.1"), refuse("failure_trace")),
            ("trace-count-1e12-optimal-bounded", (big, "--skip-penalty", "0.1", "--max-replicas",
                                                  "2"), ok("cost-optimal")),
            ("trace-all-zero", (trace("zero.csv", "0,0\n100,0\n"),), refuse("failure_trace")),
            ("trace-one-line", (trace("one.csv", "0,5\n"),), refuse("trace|failure_trace")),
            ("trace-empty", (trace("empty.csv", ""),), refuse("trace|failure_trace")),
            ("trace-negative-count", (trace("neg.csv", "0,5\n10,-1\n"),),
             refuse("trace|failure_trace")),
            ("trace-times-backwards", (trace("back.csv", "10,5\n0,4\n20,4\n"),),
             refuse("trace|failure_trace")),
            ("trace-time-nan", (trace("nan.csv", "0,5\nnan,4\n20,4\n"),),
             refuse("trace|failure_trace")),
            ("trace-time-inf", (trace("inf.csv", "0,5\ninf,4\n"),), refuse("trace|failure_trace")),
            ("trace-time-1e400", (trace("big.csv", "0,5\n1e400,4\n"),),
             refuse("trace|failure_trace")),
            ("trace-count-5000-digits", (trace("digits.csv", "0," + "9" * 5000 + "\n10,4\n"),),
             refuse("trace|failure_trace")),
            ("trace-bom", (trace("bom.csv", "\ufeff0,8\n50,6\n100,8\n"), "--stages", "2",
                           "--time-unit", "s"), ok("replicas r")),
            ("trace-crlf", (trace("crlf.csv", "0,8\r\n50,6\r\n100,8\r\n"), "--stages", "2",
                            "--time-unit", "s"), ok("replicas r")),
            ("trace-format-unknown", ("aws-p3", "--trace-format", "excel"), refuse("trace_format")),
            ("trace-format-wrong", (trace("fmt.csv", "0,8\n50,6\n"), "--trace-format",
                                    "oobleck"), refuse("trace|failure_trace")),
            ("time-unit-with-oobleck", ("aws-p3", "--time-unit", "s"), refuse("time_unit")),
            ("time-unit-unknown", (trace("tu.csv", "0,8\n50,6\n"), "--time-unit", "fortnight"),
             refuse("time_unit")),
            ("stages-zero", ("aws-p3", "--stages", "0"), refuse("stages")),
            ("stages-1e9", ("aws-p3", "--stages", "1000000000"), ok("fewer than the")),
            ("target-drop-zero", ("aws-p3", "--stages", "4", "--target-drop", "0"),
             refuse("target_drop")),
            ("target-drop-one", ("aws-p3", "--stages", "4", "--target-drop", "1"),
             refuse("target_drop")),
            ("target-drop-nan", ("aws-p3", "--stages", "4", "--target-drop", "nan"),
             refuse("target_drop")),
            ("target-drop-1e-300", ("aws-p3", "--stages", "4", "--target-drop", "1e-300"),
             ok("feasible")),
            ("skip-budget-above-L", ("aws-p3", "--stages", "4", "--skip-budget", "5"),
             refuse("skip_budget")),
            ("max-replicas-zero", ("aws-p3", "--stages", "4", "--max-replicas", "0"),
             refuse("max_replicas")),
            ("max-replicas-huge", ("aws-p3", "--stages", "4", "--max-replicas", "1000000000"),
             ok("replicas r")),
            ("skip-penalty-nan", ("aws-p3", "--stages", "4", "--skip-penalty", "nan"),
             refuse("skip_penalty")),
            ("penalty-unknown", ("aws-p3", "--stages", "4", "--skip-penalty", "0.1", "--penalty",
                                 "cubic"), refuse("penalty")),
            ("trace-verify-microbatches-zero", ("aws-p3", "--stages", "4", "--verify",
                                          "--microbatches", "0"), refuse("microbatches")),
            ("trace-verify-microbatches-1e12", ("aws-p3", "--stages", "4", "--verify",
                                          "--microbatches", "1000000000000"),
             refuse("microbatches")),
            ("trace-verify-replications-zero", ("aws-p3", "--stages", "4", "--verify",
                                          "--replications", "0"), refuse("replications")),
            ("microbatches-without-verify", ("aws-p3", "--stages", "4", "--microbatches", "10"),
             refuse("microbatches")),
            ("trace-file-policy-recent", ("aws-p3", "--stages", "4", "--trace-policy", "recent"),
             refuse("trace_policy")),
            ("trace-speedup", ("aws-p3", "--trace-speedup", "2"), refuse("trace_speedup")),
            ("trace-start", ("aws-p3", "--trace-start", "10"), refuse("trace_start")),
            ("trace-dtsim-named", (str(fx.trace_ok),), refuse("failure_trace")),
    ):
        add(name if name.startswith("trace-") else "trace-" + name,
            D("--failure-trace", *argv), expect, timeout=60)
    for name, path in (("fifo", fx.fifo["trace.csv"]), ("dev-zero", "/dev/zero"),
                       ("folder", fx.dir), ("binary", fx.binary),
                       ("missing", fx.root / "no-trace.csv")):
        add(f"trace-{name}", D("--failure-trace", str(path)), refuse("failure_trace|trace"),
            timeout=20)
    return cases


def users_byzantine_cases(fx: Fixtures) -> list[Case]:
    """``dtsim gossip`` with Byzantine options a user combines: rules, attacks, sizes."""
    cases: list[Case] = []
    if not _has_option("gossip", "--attack-scope"):
        return cases

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case("byz/" + id_, list(argv), expect, **kw))

    G = lambda *a: dtsim("gossip", *a)  # noqa: E731
    N = ("--protocol", "neighbourhood", "--rounds", "3", "--replications", "2")
    Q = ("--objective", "quadratic")
    ring = ("--topology", "ring:n=8")
    for name, extra, expect in (
            ("trim-leaves-nothing", (*ring, "--rule", "trimmed", "--trim", "2"), refuse("trim")),
            ("trim-huge", (*ring, "--rule", "trimmed", "--trim", "1000000000"), refuse("trim")),
            ("trim-negative", (*ring, "--rule", "trimmed", "--trim", "-1"), refuse("trim")),
            ("trim-ok", (*ring, "--rule", "trimmed", "--trim", "1"), ok("gossip")),
            ("trim-without-trimmed", (*ring, "--trim", "1"), refuse("trim")),
            ("trim-complete-ok", ("--rule", "trimmed", "--trim", "3"), ok("gossip")),
            ("trim-empties-some-nodes", ("--topology", "star:n=8", "--rule", "trimmed", "--trim",
                                         "2"), ok("gossip")),
            ("bucketing-1e9", ("--bucketing", "1000000000"), refuse("bucketing")),
            ("bucketing-1e9-permute", ("--bucketing", "1000000000", "--bucketing-form", "permute"),
             ok("gossip")),
            ("bucketing-text", ("--bucketing", "two"), refuse("--bucketing")),
            ("rfa-iters-1e9", ("--rule", "rfa", "--rfa-iters", "1000000000"),
             Expect("interrupt", "interrupted")),
            ("rfa-nu-nan", ("--rule", "rfa", "--rfa-nu", "nan"), refuse("rfa_nu")),
            ("rfa-nu-inf", ("--rule", "rfa", "--rfa-nu", "inf"), refuse("rfa_nu")),
            ("cc-tau-nan", ("--rule", "centered-clip", "--cc-tau", "nan"), refuse("cc_tau")),
            ("cc-tau-inf", ("--rule", "centered-clip", "--cc-tau", "inf"), refuse("cc_tau")),
            ("cc-iters-negative", ("--rule", "centered-clip", "--cc-iters", "-1"),
             refuse("cc_iters")),
            ("krum-m-zero", ("--rule", "krum", "--krum-m", "0"), refuse("krum_m")),
            ("krum-f-negative", ("--rule", "krum", "--krum-f", "-1"), refuse("krum_f")),
            ("krum-f-huge", ("--rule", "krum", "--krum-f", "1000000000"), refuse("krum_f")),
            ("momentum-nan", ("--momentum", "nan"), refuse("momentum")),
            ("momentum-inf", ("--momentum", "inf"), refuse("momentum")),
            ("lr-nan", ("--lr", "nan"), refuse("lr")),
            ("lr-negative", ("--lr", "-0.1"), refuse("lr")),
            ("local-steps-zero", ("--local-steps", "0"), refuse("local_steps")),
            ("grad-noise-negative", ("--grad-noise", "-1"), refuse("grad_noise")),
            ("adversary-value-nan", ("--adversary", "stubborn", "--adversary-value", "nan"),
             refuse("adversary_value")),
            ("adversary-value-inf", ("--adversary", "stubborn", "--adversary-value", "inf"),
             refuse("adversary_value")),
            ("num-adversaries-all", ("--adversary", "stubborn", "--num-adversaries", "16"),
             refuse("num_adversaries")),
            ("num-adversaries-negative", ("--adversary", "stubborn", "--num-adversaries", "-1"),
             refuse("num_adversaries")),
            ("num-adversaries-without-adversary", ("--num-adversaries", "2"),
             refuse("num_adversaries")),
            ("adversary-unknown", ("--adversary", "sybil"), refuse("adversary")),
            ("adversary-nodes-out-of-range", ("--adversary", "stubborn", "--adversary-nodes",
                                              "99"), refuse("adversary_nodes")),
            ("adversary-nodes-text", ("--adversary", "stubborn", "--adversary-nodes", "a"),
             refuse("adversary_nodes|--adversary-nodes")),
            ("gossip-rounds-1e9", ("--gossip-rounds", "1000000000"),
             Expect("interrupt", "interrupted")),
            ("gossip-rounds-negative", ("--gossip-rounds", "-1"), refuse("gossip_rounds")),
            ("dim-1e9", ("--dim", "1000000000"), refuse("dim")),
            ("nodes-1e9", ("--nodes", "1000000000"), refuse("nodes")),
            ("rule-median-ok", ("--rule", "median"), ok("gossip")),
            ("data-unknown", ("--data", "imagenet"), refuse("data")),
            ("partition-unknown", ("--partition", "skewed"), refuse("partition")),
            ("alpha-zero", ("--partition", "dirichlet", "--alpha", "0"), refuse("alpha")),
            ("alpha-without-dirichlet", ("--alpha", "0.5"), refuse("alpha")),
            ("objective-seed-without-objective", ("--objective-seed", "3"),
             refuse("objective_seed|objective")),
    ):
        base = N if "--rule" in extra or "bucketing" in name or "trim" in name else N
        argv = G(*base, *Q, *extra) if "objective-seed-without" not in name else G(*N, *extra)
        add(name, argv, expect, timeout=60,
            **({"interrupt_after": 6.0} if expect.kind == "interrupt" else {}))
    add("rounds-1e9-records", G("--protocol", "neighbourhood", "--rounds", "1000000000",
                                "--replications", "1", *Q), refuse("rounds"))
    add("rounds-1e9-interrupted", G("--protocol", "neighbourhood", "--rounds", "1000000000",
                                    "--record-every", "10000000", "--replications", "1", *Q),
        Expect("interrupt", "interrupted"), interrupt_after=6.0, timeout=30,
        note="10^9 aggregation rounds: a bar with its ETA on a terminal, Ctrl-C stops it")
    return cases


def timeline_cases(fx: Fixtures) -> list[Case]:
    """--timeline (issue 36): the file, the window, the cap, what cannot be recorded, and
    dtsim plot --timeline's input and output. An existing file is overwritten (ok)."""
    cases: list[Case] = []
    if not _has_option("plot", "--timeline"):  # (the other commands take it from _timeline.py)
        return cases
    T = fx.root
    small = ("--stages", "2", "--microbatches-per-step", "2", "--steps", "1", "--replications", "1")
    out = str(T / "tl.json")

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    flows = fx._write("tl_flows.csv", "src,dst,size,start\n0,1,10,0\n")
    per_command = {
        "train": small,
        "pipeline": ("--stages", "2", "--stage-time", "1", "--microbatches", "10",
                     "--replications", "1"),
        "network": ("--topology", "tree:racks=1,hosts=2", "--flows", str(flows)),
        "gossip": ("--protocol", "edge", "--nodes", "4", "--rounds", "4", "--replications", "1"),
    }
    for cmd, base in per_command.items():
        add(f"{cmd}/timeline-folder", dtsim(cmd, *base, "--timeline", str(fx.dir)),
            refuse("timeline"))
        add(f"{cmd}/timeline-empty", dtsim(cmd, *base, "--timeline", ""), refuse("timeline"))
        add(f"{cmd}/timeline-under-a-file", dtsim(cmd, *base, "--timeline",
                                                  fx.under_file + "/t.json"), refuse("timeline"))
        add(f"{cmd}/timeline-dev-full", dtsim(cmd, *base, "--timeline", "/dev/full"),
            refuse("timeline"))
        for what, w in (("reversed", "5:1"), ("equal", "2:2"), ("nan", "nan:1"),
                        ("nan-end", "0:nan"), ("negative", "-1:2"), ("text", "soon"),
                        ("no-colon", "3"), ("inf-start", "inf:")):
            add(f"{cmd}/timeline-window-{what}", dtsim(cmd, *base, "--timeline", out,
                                                       "--timeline-window", w),
                refuse("timeline_window"))
        add(f"{cmd}/timeline-window-without-timeline", dtsim(cmd, *base, "--timeline-window",
                                                             "0:1"), refuse("timeline_window"))
        for what, n in (("zero", "0"), ("negative", "-5"), ("nan", "nan"), ("float", "2.5"),
                        ("huge", "1000000000"), ("text", "many")):
            add(f"{cmd}/timeline-max-events-{what}", dtsim(cmd, *base, "--timeline", out,
                                                           "--timeline-max-events", n),
                refuse("timeline_max_events"))
        add(f"{cmd}/timeline-max-events-without-timeline",
            dtsim(cmd, *base, "--timeline-max-events", "10"), refuse("timeline_max_events"))
        if cmd == "network":  # one run: no --timeline-replication
            continue
        for what, k in (("equal-to-replications", "1"), ("negative", "-1"), ("text", "last"),
                        ("float", "0.5"), ("nan", "nan"), ("unicode-digit", "\u0660")):
            add(f"{cmd}/timeline-replication-{what}", dtsim(cmd, *base, "--timeline", out,
                                                            "--timeline-replication", k),
                refuse("timeline_replication"), note="--replications 1: K must be 0")
        add(f"{cmd}/timeline-replication-without-timeline",
            dtsim(cmd, *base, "--timeline-replication", "0"), refuse("timeline_replication"))
    # what cannot be recorded, and runs too large: one line before any work
    add("train/timeline-compiled-engine", dtsim("train", *small, "--schedule", "swarm",
                                                "--engine", "compiled", "--timeline", out),
        refuse("timeline"))
    add("train/timeline-run-too-large", dtsim("train", "--steps", "100000000", "--timeline", out),
        refuse("timeline"), note="about 2.4e10 passes: refused, not run")
    add("train/timeline-cap-too-small-for-run", dtsim("train", *_override(small, (
        "--steps", "1000")), "--timeline", out,
                                                      "--timeline-max-events", "1"),
        refuse("timeline"), note="the run's 8000 passes are more than 50 x a cap of 1")
    add("pipeline/timeline-vector-engine", dtsim("pipeline", "--stages", "3", "--timeline", out),
        refuse("timeline"), note="auto runs the vector engine here: give --engine des")
    add("pipeline/timeline-importance", dtsim("pipeline", "--method", "importance", "--timeline",
                                              out), refuse("timeline"))
    add("pipeline/timeline-queueing", dtsim("pipeline", "--queueing", "--timeline", out),
        refuse("timeline"))
    add("gossip/timeline-matching", dtsim("gossip", "--protocol", "matching", "--timeline", out),
        refuse("timeline"))
    add("gossip/timeline-training", dtsim("gossip", "--protocol", "edge", "--objective",
                                          "quadratic", "--timeline", out), refuse("timeline"))
    add("gossip/timeline-too-large", dtsim("gossip", "--protocol", "async", "--engine", "des",
                                           "--nodes", "100000", "--rounds", "1000",
                                           "--timeline", out), refuse("timeline"))
    # a file that is not a timeline dtsim wrote is replaced only with --overwrite (outsafe_cases)
    existing = fx._write("tl_existing.json", "old content, not a timeline\n")
    add("train/timeline-overwrites-a-file", dtsim("train", *small, "--timeline", str(existing),
                                                  "--overwrite"),
        ok("timeline:"), timeout=120, note="--overwrite replaces any file (documented)")
    add("train/timeline-window-and-cap", dtsim("train", *small, "--timeline", out,
                                               "--timeline-window", "1:2",
                                               "--timeline-max-events", "3"),
        ok("timeline:"), timeout=120)
    # dtsim plot --timeline: its input is data, its output a figure file
    bad_json = fx._write("tl_bad.json", "{not json")
    not_tef = fx._write("tl_not_tef.json", '{"traceEvents": [{"ph": "X", "name": "a", '
                        '"pid": 1, "tid": 1, "ts": 0, "dur": -1}]}')
    empty_tef = fx._write("tl_empty.json", '{"traceEvents": []}')
    add("plot/timeline-missing", dtsim("plot", "--timeline", str(T / "nope.json")),
        refuse("timeline"))
    add("plot/timeline-folder", dtsim("plot", "--timeline", str(fx.dir)), refuse("timeline"))
    add("plot/timeline-not-json", dtsim("plot", "--timeline", str(bad_json)), refuse("timeline"))
    add("plot/timeline-binary", dtsim("plot", "--timeline", str(fx.binary)), refuse("timeline"))
    add("plot/timeline-negative-dur", dtsim("plot", "--timeline", str(not_tef)),
        refuse("timeline"))
    add("plot/timeline-no-events", dtsim("plot", "--timeline", str(empty_tef)),
        refuse("timeline"))
    for name, fifo in fx.fifo.items():  # a FIFO would block a reader: refused from its stat
        add(f"plot/timeline-fifo-{name}", dtsim("plot", "--timeline", str(fifo)),
            refuse("timeline"))
        break
    add("plot/timeline-out-no-extension", dtsim("plot", "--timeline", str(not_tef), "--out",
                                                str(T / "figure")), refuse("out"))
    add("plot/timeline-out-is-the-input", dtsim("plot", "--timeline", str(not_tef), "--out",
                                                str(not_tef)), refuse("out"))
    add("plot/timeline-out-folder", dtsim("plot", "--timeline", str(not_tef), "--out",
                                          str(fx.dir)), refuse("out"))
    add("plot/out-without-timeline", dtsim("plot", str(fx.dir), "--out", str(T / "x.png")),
        refuse("out"))
    add("plot/timeline-and-outdir", dtsim("plot", str(fx.dir), "--timeline", str(not_tef)),
        refuse("OUTDIR"))
    add("plot/neither-outdir-nor-timeline", dtsim("plot"), refuse("OUTDIR"))
    return cases


# ----------------------------------------------------------------------------- audit6


def export_plan_cases(fx: Fixtures) -> list[Case]:
    """--export-plan: a plan (a Megatron-LM launch line, a Sailor plan_config, a dtsim plan
    result) written as dtsim's JSON plan; an existing file is kept unless --overwrite."""
    if not _has_option("train", "--export-plan"):
        return []
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    launch = fx._write("xp-launch.sh", "torchrun --nnodes 4 --nproc-per-node 4 pretrain_gpt.py "
                       "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                       "--num-layers 24 --untie-embeddings-and-output-weights "
                       "--micro-batch-size 2 --global-batch-size 64 --fp16 "
                       "--use-distributed-optimizer\n")
    existing = fx._write("xp-existing.json", "{}\n")
    one = ("--steps", "1", "--replications", "1")
    T = lambda *a: dtsim("train", "--plan", str(launch), "--model", "OPT-350",  # noqa: E731
                         "--gpu", "RTX-3090", *one, *a)
    add("train/export-plan-writes", T("--export-plan", str(fx.root / "xp-new.json")),
        ok("plan written to"))
    add("train/export-plan-existing-file", T("--export-plan", str(existing)),
        refuse("export_plan"), note="an existing file is kept (--overwrite replaces it)")
    add("train/export-plan-overwrite", T("--export-plan", str(fx.root / "xp-over.json"),
                                         "--overwrite"), ok("plan written to"))
    add("train/export-plan-folder", T("--export-plan", str(fx.dir)), refuse("export_plan"))
    add("train/export-plan-under-a-file", T("--export-plan", fx.under_file + "/p.json"),
        refuse("export_plan"))
    add("train/export-plan-dev-full", T("--export-plan", "/dev/full"), refuse("export_plan"))
    add("train/export-plan-without-plan", dtsim("train", "--export-plan", "p.json"),
        refuse("export_plan"))
    add("train/overwrite-without-export-plan", T("--overwrite"), refuse("overwrite"))
    add("train/export-plan-is-the-timeline", T("--export-plan", "xp-t.json", "--timeline",
                                               "./xp-t.json"), refuse("export_plan"),
        note="the timeline, written after the run, would replace the plan")
    if not _has_option("plan", "--export-plan"):
        return cases
    P = lambda *a: dtsim("plan", "--model", "OPT-350", "--nodes",  # noqa: E731
                         "GH-96:4x2@us-central1-a", "--global-batch-size", "8", "--simulate",
                         "0", "--top", "2", *a)
    add("plan/export-plan-existing-file", P("--export-plan", str(existing)),
        refuse("export_plan"))
    add("plan/export-plan-with-out", P("--export-plan", "p.json", "--out", "o.json"),
        refuse("export_plan"), note="both write the plan; --out replaces a plan dtsim wrote, "
        "--export-plan none")
    add("plan/overwrite-without-export-plan", P("--overwrite"), refuse("overwrite"))
    add("plan/rank-without-a-file", P("--rank", "2"), refuse("rank"))
    add("plan/rank-above-top", P("--rank", "3", "--export-plan", "p.json"), refuse("rank"))
    add("plan/rank-zero", P("--rank", "0", "--out", "o.json"), refuse("rank"))
    add("plan/export-plan-rank", P("--rank", "2", "--export-plan",
                                   str(fx.root / "xp-rank.json")), ok("plan 2 written to"))
    return cases

def outsafe_cases(fx: Fixtures) -> list[Case]:
    """Outputs never replace a file of the user's (ids ``*/outsafe-*``): an existing file is
    replaced only when dtsim wrote it (content it always writes) or with ``--overwrite``; a
    bench history is appended to only if it is one; a results folder another experiment file
    of the same NAME wrote is refused. Each refusal before any work, the file left as it was."""
    if not _has_option("trace", "--overwrite"):
        return []
    cases: list[Case] = []
    T = fx.root

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    mine = str(fx._write("outsafe/notes.json", '{"my": "own notes"}\n'))
    png = str(fx._write("outsafe/photo.png", "not dtsim's figure\n"))
    tl = fx._write("outsafe/in.json", '{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, '
                   '"tid": 1, "ts": 0, "dur": 5}]}')
    small = ("--stages", "2", "--microbatches-per-step", "2", "--steps", "1", "--replications", "1")
    flows = fx._write("outsafe/flows.csv", "src,dst,size,start\n0,1,10,0\n")
    per_command = {
        "train": small,
        "pipeline": ("--stages", "2", "--stage-time", "1", "--microbatches", "10",
                     "--replications", "1", "--engine", "des"),
        "network": ("--topology", "tree:racks=1,hosts=2", "--flows", str(flows)),
        "gossip": ("--protocol", "edge", "--nodes", "4", "--rounds", "4", "--replications", "1"),
    }
    for cmd, base in per_command.items():
        add(f"{cmd}/outsafe-timeline-a-users-file", dtsim(cmd, *base, "--timeline", mine),
            refuse("timeline"), note="not a timeline dtsim wrote: kept (--overwrite replaces it)")
        add(f"{cmd}/outsafe-overwrite-without-a-file", dtsim(cmd, *base, "--overwrite"),
            refuse("overwrite"))
    own = fx._write("outsafe/own_tl.json", '{"traceEvents":[\n],"displayTimeUnit":"ms",'
                    '"otherData":{"generator":"dtsim train","time_unit":"simulated seconds, '
                    'written as microseconds (1 s = 1e6)"}}\n')
    add("train/outsafe-timeline-replaces-its-own", dtsim("train", *small, "--timeline", str(own)),
        ok("timeline:"), timeout=120, note="a timeline dtsim wrote: re-running replaces it")
    P = per_command["pipeline"]
    add("pipeline/outsafe-event-log-a-users-file", dtsim("pipeline", *P, "--event-log", mine),
        refuse("event_log"))
    add("pipeline/outsafe-event-log-overwrite", dtsim("pipeline", *P, "--event-log",
                                                      str(T / "outsafe/ev.csv"), "--overwrite"),
        ok("event log"))
    PL = lambda *a: dtsim("plan", "--model", "OPT-350", "--nodes",  # noqa: E731
                          "GH-96:4x2@us-central1-a", "--global-batch-size", "8", "--simulate",
                          "0", "--top", "2", *a)
    add("plan/outsafe-out-a-users-file", PL("--out", mine), refuse("out"),
        note="was overwritten silently")
    own_plan = fx._write("outsafe/own_plan.json", '{\n "stages": []\n}\n')
    add("plan/outsafe-out-replaces-its-own", PL("--out", str(own_plan)), ok("written to"),
        note="a plan in dtsim's exact layout: re-running replaces it")
    add("plan/outsafe-out-overwrite", PL("--out", str(T / "outsafe/p.json"), "--overwrite"),
        ok("written to"))
    add("plot/outsafe-timeline-out-a-users-file", dtsim("plot", "--timeline", str(tl), "--out",
                                                        png), refuse("out"))
    add("plot/outsafe-overwrite-without-timeline", dtsim("plot", str(fx.dir), "--overwrite"),
        refuse("overwrite"))
    add("plot/outsafe-outdir-a-users-figure", dtsim("plot", str(fx.planted.with_name("userfig"))),
        refuse("OUTDIR"), note="smallfix8: the default figures were drawn over the user's files")
    linked = fx._write("outsafe/linked_notes.json", '{"my": "own notes"}\n')
    link = T / "outsafe/link_to_notes.json"  # a link to the user's file: kept a link
    if not link.is_symlink():
        os.symlink(linked, link)
    add("plan/outsafe-out-a-link-to-a-users-file", PL("--out", str(link)), refuse("out"))
    add("plan/outsafe-out-a-link-overwrite", PL("--out", str(link), "--overwrite"),
        ok("written to"), note="smallfix8: the link was replaced by a file; now its target is")
    add("trace/outsafe-plot-out-a-users-file", dtsim("trace", "plot", "aws-p3", "--out", png),
        refuse("out"))
    add("bench/outsafe-out-not-a-bench-history", dtsim("bench", "--quick", "--parts", "simpy",
                                                       "--out", mine), refuse("out"),
        note="a JSON line would have been appended to the user's file")
    rep = fx._write("outsafe/rep/report.md", "# my own report\n")
    add("reproduce/outsafe-out-holds-a-users-report", dtsim("reproduce", "--quick", "--out",
                                                            str(rep.parent)), refuse("out"))
    other = fx._write("outsafe/res/manifest.json", json.dumps(
        {"experiment": "good", "file": str(fx.file)}))
    add("run/outsafe-out-of-another-experiment-file", dtsim(
        "run", str(fx.experiments["good"]), "--executor", "serial", "--out", str(other.parent)),
        refuse("out"), note="the folder's manifest names another existing file of NAME 'good'")
    return cases



def audit6_cases(fx: Fixtures) -> list[Case]:
    """audit6: numbers in other scripts' digits (every float reader and a topology spec's
    integers, as ascii_int already did for the CLI's integers), DiLoCo runs whose failures
    run away, a FIXED function that raises or exits, and the files a config's hash reads."""
    cases: list[Case] = []
    T = fx.root

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    tr = lambda *a: dtsim("train", *a)  # noqa: E731
    dl = ("--replicas", "4", "--microbatches-per-step", "4", "--steps", "8", "--replications", "1")
    # -- other scripts' digits: float() and a spec's \d read them ('\u0663' is 3) --
    note = "other scripts' digits: float() read them (an ASCII number only, as ascii_int)"
    add("train/availability-unicode-digits", tr("--availability", "\u0660.\u0665"),
        refuse("availability"), note=note)
    add("train/mtbf-unicode-digits", tr("--mtbf", "\u0663\u0660\u0660\u0660"), refuse("mtbf"),
        note="a plain number (no unit) was read by float(): an mtbf of 3000")
    add("train/strategy-every-unicode-digit", tr("--strategy", "checkpoint-restart:every=\u0663"),
        refuse("every"), note="strategy specs' integers were int()'s, not ascii_int's")
    add("train/strategy-slowdown-unicode-digits", tr("--strategy",
                                                     "redundancy:slowdown=\u0661.\u0665"),
        refuse("slowdown"), note=note)
    add("train/diloco-topk-unicode-digits", tr(*dl, "--sync", "diloco:every=4,topk=\u0660.\u0661"),
        refuse("sync"), note=note)
    add("train/timeline-window-unicode-digit", tr("--stages", "2", "--steps", "1",
                                                  "--replications", "1", "--timeline",
                                                  str(T / "a6_tl.json"), "--timeline-window",
                                                  "\u0661:2"), refuse("timeline_window"))
    add("pipeline/stage-time-unicode-digit", dtsim("pipeline", "--stages", "2", "--stage-time",
                                                   "\u0661,2"),
        refuse("stage_time"), note=note)
    add("failures/availability-unicode-digits", dtsim("failures", "--availability",
                                                      "\u0660.5"), refuse("availability"))
    add("gossip/noise-unicode-digit", dtsim("gossip", "--noise", "\u0661"), refuse("noise"))
    add("plan/price-unicode-digit", dtsim("plan", "--model", "OPT-350", "--nodes",
                                          "GH-96:4x2@us-central1-a", "--global-batch-size", "8",
                                          "--simulate", "0", "--top", "1", "--price",
                                          "GH-96=\u0661"),
        refuse("price"))
    add("topologies/torus-dims-superscript", dtsim("topologies", "torus:dims=4x\u00b2"),
        refuse("topology"), note="was a traceback: str.isdigit('\u00b2') is true, int() refuses it")
    add("topologies/ring-n-unicode-digit", dtsim("topologies", "ring:n=\u0668"),
        refuse("topology"), note="a spec's integer matched \\d: built a ring of 8")
    add("topologies/tree-bandwidth-unicode-digit", dtsim(
        "topologies", "tree:racks=2,hosts=4,host_bandwidth=\u0661"), refuse("topology"))
    add("train/speeds-unicode-digit", tr("--stages", "1", "--speeds", str(fx._write(
        "a6_speeds.csv", "stage,replica,speed\n0,0,\u0661\n"))), refuse("speeds"),
        note="the CSV readers' numbers were int()'s and float()'s")
    add("train/step-times-unicode-digits", tr("--strategy", "redundancy", "--step-times",
                                              str(fx._write("a6_steps.csv", "workers,step_time\n"
                                                            "4,\u0661\u0660\n"))),
        refuse("step_times"))
    add("train/price-series-unicode-digit", tr("--price-series", str(fx._write(
        "a6_prices.csv", "time,price\n0,\u0663\n"))), refuse("price_series"),
        note="billed 3 a worker-hour")
    # -- DiLoCo with failures: the run goes on to its stall limit however often workers fail --
    runaway = "ran until killed: its failures up to the stall limit (7.7e9 transitions)"
    add("train/diloco-mtbf-runaway", tr(*dl, "--sync", "diloco:every=4", "--mtbf", "1e-4",
                                        "--replace-time", "1e-4"), refuse("mtbf"), note=runaway)
    add("train/diloco-streaming-mtbf-runaway", tr(*dl, "--sync",
                                                  "diloco:every=4,fragments=2,overlap=1",
                                                  "--mtbf", "1e-9", "--replace-time", "1e-9"),
        refuse("mtbf"), note=runaway)
    add("train/diloco-availability-runaway", tr(*dl, "--sync", "diloco:every=4",
                                                "--availability", "0.5", "--mean-downtime",
                                                "1e-6"), refuse("mean_downtime"), note=runaway)
    add("train/diloco-domain-outage-runaway", tr(*dl, "--sync", "diloco:every=4",
                                                 "--domain-outage", "0.5", "--domain-downtime",
                                                 "1e-6"), refuse("domain_downtime"), note=runaway)
    add("train/diloco-mtbf-memory", tr(*dl, "--sync", "diloco:every=4", "--mtbf", "1e-2",
                                       "--replace-time", "1e-2"), refuse("mtbf"),
        note="7.7e7 transitions keep about 4.6 GiB (the cases' limit is 4 GiB)")
    add("train/diloco-streaming-failures-max-time-ok", tr(
        *dl, "--sync", "diloco:every=4,fragments=2,overlap=1", "--mtbf", "1", "--replace-time",
        "1", "--max-time", "100"), ok("DiLoCo"), timeout=120,
        note="max_time bounds the run: allowed (1.6e3 transitions)")
    add("train/diloco-failures-run-that-ends-ok", tr(
        "--stages", "1", "--replicas", "200", "--steps", "1000", "--sync",
        "diloco:every=1000,groups=1", "--availability", "0.9", "--mean-downtime", "1",
        "--replications", "1"), ok("DiLoCo"), timeout=120,
        note="review9's false refusal (1.2e8 expected over the whole stall limit): the run ends "
             "at 5,898 (1.0e4 expected), 2.4e5 transitions")
    # -- FIXED(config): a function that raises or exits --
    head = ("from sim.failures import ClusterConfig, failures_model\n"
            "NAME = 'a6fixed{k}'\nBASE = ClusterConfig(workers=4, domains=2, horizon=50.0)\n"
            "FACTORS = {{'availability': [0.9]}}\nREPLICATIONS = 2\n"
            "def model(config, streams):\n    return failures_model(config, streams)\n"
            "def FIXED(config):\n{body}")
    for k, (what, body, was) in enumerate([
            ("raises", "    raise KeyError('nope')\n", "a traceback"),
            ("exits", "    import sys\n    sys.exit(3)\n", "exit 3, nothing said"),
            ("recursion", "    return FIXED(config)\n", "a traceback (RecursionError)")]):
        f = fx._write(f"exp/a6_fixed{k}.py", head.format(k=k, body=body))
        add(f"run/FIXED-function-{what}", dtsim("run", str(f), "--out", str(T / f"a6_of{k}")),
            refuse("FIXED(config) of point 0"), note=f"was {was}")
    # -- the files a config's hash reads: never blocking, never unbounded --
    big = T / "a6_sparse.bin"
    with open(big, "wb") as fh:
        fh.truncate(20 * 2**30)  # sparse: no disk used
    for what, path, was in (("huge-file", str(big), "read all 20 GiB"),
                            ("proc-kmsg", "/proc/kmsg", "waited for ever (as root)")):
        f = fx._write(f"exp/a6_hash_{what}.py", (
            f"NAME = 'a6hash'\nBASE = {{'p': 0.5, 'data': {path!r}}}\n"
            "FACTORS = {'p': [0.1]}\nREPLICATIONS = 2\n"
            "def model(config, streams):\n    return {'x': config['p']}\n"))
        add(f"run/point-names-{what}", dtsim("run", str(f), "--executor", "serial", "--quiet",
                                             "--out", str(T / f"a6_oh_{what}")),
            ok("2 tasks"), note=f"the config's hash {was}")
    return cases


# ----------------------------------------------------------------------------- leftovers


def audit8_cases(fx: Fixtures) -> list[Case]:
    """audit8: the last two sessions' inputs as a user types them (ids hold ``/a8-``): event-log
    specs and files, DiLoCo's ring-loss keys, checkpoint-restart's grow and poll (and the keys
    that apply only with another), Megatron launch-line flags, preemption notices, the GPU
    catalogue's compute_capability, overhead_bytes and currency. Each ``FIXED`` note names a
    case that misbehaved before (said in its note)."""
    if not (REPO / "sim" / "traces" / "events.py").is_file():
        return []
    import json as _json

    cases: list[Case] = []
    R = fx.root / "a8"

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    def w(name: str, text: str) -> str:
        return str(fx._write(f"a8/{name}", text))

    # -- event logs: the spec ------------------------------------------------------------
    ev = "events:worker=instance_id,time=timestamp,down=preempted,up=launched"
    head = "timestamp,instance_id,event\n"
    iso = w("iso.csv", head + "2024-03-01T12:00:00Z,i-a,launched\n"
            "2024-03-01T13:10:00+01:00,i-a,preempted\n")
    num = w("num.csv", head + "100,i-a,launched\n200,i-a,preempted\n300,i-b,launched\n")
    S = lambda f, spec, *a: dtsim("trace", "stats", f, "--trace-format", spec, *a)  # noqa: E731
    for what, spec in (
            ("colon-alone", "events:"), ("worker-empty", ev.replace("instance_id", "")),
            ("event-empty", ev + ",event="), ("down-empty", ev.replace("preempted", "")),
            ("same-column", ev.replace("timestamp", "instance_id")),
            ("same-word-down-up", ev.replace("launched", "preempted")),
            ("name-upper-case", ev.replace("events", "EVENTS")),
            ("key-upper-case", ev.replace("worker", "Worker")),
            ("start-end-empty", ev + ",start=,end=")):
        add(f"trace/a8-events-spec-{what}", S(iso, spec), refuse("trace_format"))
    for what, bound in (("end-nan", "end=nan"), ("end-inf", "end=inf"),
                        ("start-minus-inf", "start=-inf"), ("start-rate", "start=10 GB/s"),
                        ("start-with-unit", "start=100s"), ("start-twice", "start=50,start=60")):
        add(f"trace/a8-events-{what}", S(num, f"{ev},{bound}"), refuse("trace_format"),
            note="start= and end= are written as the log's times (epoch numbers here)")
    add("trace/a8-events-end-before-events", S(iso, ev + ",end=2024-03-01T11:00:00Z"),
        refuse("trace"))
    add("trace/a8-events-end-at-first", S(iso, ev + ",end=2024-03-01T12:00:00Z"),
        refuse("trace"))
    add("trace/a8-events-start-after-end",
        S(iso, ev + ",start=2024-03-01T13:00:00Z,end=2024-03-01T12:30:00Z"), refuse("trace"))
    add("trace/a8-events-time-unit-rate", S(num, ev, "--time-unit", "10GB/s"),
        refuse("time_unit"))
    add("trace/a8-events-time-unit-upper-case", S(num, ev, "--time-unit", "MS"),
        refuse("time_unit"))
    add("train/a8-events-spec-without-trace", dtsim("train", "--steps", "1", "--trace-format", ev),
        refuse("trace_format"))
    add("pipeline/a8-events-spec-without-trace", dtsim("pipeline", "--trace-format", ev),
        refuse("trace_format"))
    # -- event logs: the files -------------------------------------------------------------
    for what, text in (
            ("time-nan", head + "100,i-a,launched\nnan,i-a,preempted\n"),
            ("time-inf", head + "100,i-a,launched\ninf,i-a,preempted\n"),
            ("time-with-unit", head + "10s,i-a,launched\n20s,i-a,preempted\n"),
            ("empty-file", ""), ("header-only", head),
            ("empty-word", head + "100,i-a,launched\n150,i-a,\n200,i-a,preempted\n")):
        add(f"trace/a8-events-{what}", S(w(f"{what}.csv", text), ev), refuse("trace"))
    fixed = "FIXED (audit8): read silently before"
    for what, text, note in (
            ("column-twice", "timestamp,instance_id,event,timestamp\n100,i-a,launched,5\n"
             "200,i-a,preempted,7\n", fixed + " (the first 'timestamp' column taken)"),
            ("event-column-twice", "timestamp,instance_id,event,event\n100,i-a,launched,x\n"
             "200,i-a,preempted,y\n", fixed + " (the first 'event' column taken)"),
            ("row-too-long", head + "100,i-a,launched,extra\n200,i-a,preempted\n",
             fixed + " (the cell past the header dropped)")):
        add(f"trace/a8-events-{what}", S(w(f"{what}.csv", text), ev), refuse("trace"),
            note=note)
    add("trace/a8-events-far-start", S(num, ev + ",start=-1e300"), refuse("trace"),
        note="FIXED (audit8): every time 1e300 s from start=: stats of a zero span")
    add("train/a8-events-far-start", dtsim("train", "--stages", "1", "--steps", "4",
                                           "--replications", "1", "--failure-trace", num,
                                           "--trace-format", ev + ",start=-1e300",
                                           "--trace-loop"), refuse("failure_trace"),
        note="FIXED (audit8): exit 1, 'KeyError: i-a' (a launch and a preemption made one "
        "instant by rounding)")
    for what, text, spec in (
            ("words-mixed-case", None, ev.replace("preempted", "PREEMPTED").replace(
                "launched", "Launched")),
            ("end-far-future", None, ev + ",end=9999-12-31T23:59:59Z"),
            ("rows-unsorted", head + "300,i-a,launched\n200,i-a,preempted\n400,i-a,preempted\n",
             ev),
            ("epoch-ms", head + "1709294400000,i-a,launched\n1709294500000,i-a,preempted\n", ev),
            ("negative-epoch", head + "-100,i-a,launched\n200,i-a,preempted\n", ev),
            ("trailing-empty-cell", head + "100,i-a,launched,\n200,i-a,preempted, \n", ev),
            ("unused-column-twice", "timestamp,instance_id,event,note,note\n"
             "100,i-a,launched,x,y\n200,i-a,preempted,,\n", ev),
            ("bom-crlf-spaces", "\ufefftimestamp, instance_id, event\r\n100, i-a, launched\r\n"
             "200, i-a, preempted\r\n", ev),
            ("same-instant", head + "100,i-a,launched\n100,i-a,preempted\n100,i-b,launched\n"
             "300,i-b,preempted\n", ev)):
        f = iso if text is None else w(f"ok-{what}.csv", text)
        add(f"trace/a8-events-ok-{what}", S(f, spec), ok("slot 0: i-a"))

    # -- DiLoCo's ring-loss keys -------------------------------------------------------------
    dl = ("train", "--replicas", "4", "--microbatches-per-step", "4", "--steps", "8",
          "--mtbf", "100", "--replace-time", "5", "--replications", "1", "--sync")
    for key in ("heartbeat=", "heartbeat=nan", "heartbeat=inf", "heartbeat=10GB/s",
                "heartbeat=5m", "heartbeat=6,heartbeat=7", "on_loss=", "on_loss=Discard",
                "on_loss=DISCARD", "on_loss=wait", "on_loss=discard,on_loss=discard", "retries=",
                "retries=-1", "retries=2.5", "retries=1e9", "retries=nan", "retries=inf"):
        add(f"train/a8-diloco-{key.replace('=', '-').replace(',', '-').replace('/', '-')}",
            dtsim(*dl, "diloco:every=4," + key), refuse("sync"))
    add("train/a8-diloco-retries-1e8-ok", dtsim(*dl, "diloco:every=4,retries=100000000"),
        ok("DiLoCo"), note="an integer count of tries: bounded by the losses, not a runaway")
    add("train/a8-diloco-heartbeat-tiny-ok", dtsim(*dl, "diloco:every=4,heartbeat=1e-300"),
        ok("DiLoCo"))

    # -- checkpoint-restart's grow and poll --------------------------------------------------
    C = ("train", "--replications", "1", "--mtbf", "100", "--steps", "20", "--stages", "4",
         "--replicas", "2", "--strategy")
    for spec, param, note in (
            ("checkpoint-restart:grow=false,poll=300", "poll",
             "FIXED (audit8): poll at its default with grow=false was taken and ignored"),
            ("checkpoint-restart:copy=0", "copy",
             "FIXED (audit8): copy without snapshot=overlapped taken and ignored at 0"),
            ("checkpoint-restart:overhead_bound=0.05", "overhead_bound",
             "FIXED (audit8): overhead_bound without interval=overhead taken and ignored"),
            ("checkpoint-restart:poll=1e-300", "poll",
             "FIXED (audit8): a hang (at + poll == at: the first poll's instant for ever)"),
            ("checkpoint-restart:poll=1e-3", "poll",
             "FIXED (audit8): 4e8 polls over 1000 failure-free runs; 30 s of CPU for 20 steps"),
            ("checkpoint-restart:settle=1e300", "settle",
             "FIXED (lead): a sleep longer than the run; stalled, the watchdog blamed workers"),
            ("checkpoint-restart:grow=false,settle=120", "settle",
             "settle at its default with grow=false does nothing"),
            ("checkpoint-restart:grow=", "grow", ""),
            ("checkpoint-restart:poll=", "poll", ""),
            ("checkpoint-restart:poll=10GB/s", "poll", "a rate where a time is wanted"),
            ("checkpoint-restart:poll=5m", "poll", "m: milli or minute?"),
            ("redundancy:poll=60", "strategy", "poll is checkpoint-restart's"),
            ("reconfiguration:poll=60", "strategy", "poll is checkpoint-restart's")):
        tail = spec.replace(":", "-").replace("=", "-").replace(",", "-").replace("/", "-")
        add(f"train/a8-strategy-{tail}", dtsim(*C, spec), refuse(param), note=note)
    add("train/a8-strategy-poll-unit-off-the-second",
        dtsim(*C[:-1], "--hour", "60", "--strategy", "checkpoint-restart:poll=5min"),
        refuse("hour"))
    for spec in ("checkpoint-restart:poll=5min", "checkpoint-restart:grow=True",
                 "checkpoint-restart:poll=0.01", "checkpoint-restart:poll=1e300",
                 "checkpoint-restart:interval=overhead,overhead_bound=0.05",
                 "checkpoint-restart:snapshot=overlapped,copy=0"):
        add(f"train/a8-strategy-ok-{spec.split(':')[1].replace('=', '-').replace(',', '-')}",
            dtsim(*C, spec), ok("checkpoint-restart"), timeout=60)

    # -- Megatron launch-line flags --------------------------------------------------------
    def launch(name: str, extra: str) -> str:
        return w(name, "torchrun --nnodes 2 --nproc-per-node 4 pretrain_gpt.py "
                 "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 24 "
                 "--micro-batch-size 2 --global-batch-size 16 "
                 f"--untie-embeddings-and-output-weights {extra}\n")

    M = ("--model", "OPT-350", "--gpu", "RTX-3090", "--zone", "us-central1-a", "--steps", "1",
         "--replications", "1")
    for what, extra in (
            ("transformer-impl-no-value", "--fp16 --transformer-impl"),
            ("transformer-impl-mixed-case", "--fp16 --transformer-impl Transformer_Engine"),
            ("attention-backend-upper-case", "--fp16 --attention-backend FLASH"),
            ("attention-backend-no-value", "--fp16 --attention-backend"),
            ("recompute-granularity-no-value", "--fp16 --recompute-granularity"),
            ("recompute-granularity-mixed-case", "--fp16 --recompute-granularity Selective"),
            ("recompute-granularity-last-full",
             "--fp16 --recompute-granularity selective --recompute-granularity full"),
            ("recompute-modules-no-value", "--fp16 --recompute-activations --recompute-modules"),
            ("distributed-optimizer-with-value", "--fp16 --use-distributed-optimizer=true"),
            ("legacy-models-with-value", "--fp16 --use-legacy-models=false"),
            ("overlap-param-gather-with-value", "--fp16 --overlap-param-gather=1")):
        add(f"train/a8-megatron-{what}", dtsim("train", "--plan", launch(f"ml-{what}.sh", extra),
                                               *M), refuse("plan"))
    for what, extra in (
            ("transformer-impl-twice", "--fp16 --transformer-impl local --transformer-impl "
             "transformer_engine"),
            ("attention-backend-twice", "--fp16 --attention-backend flash --attention-backend "
             "unfused"),
            ("transformer-impl-equals", "--fp16 --transformer-impl=local"),
            ("attention-backend-equals", "--fp16 --attention-backend=unfused"),
            ("distributed-optimizer-twice", "--fp16 --use-distributed-optimizer "
             "--use-distributed-optimizer")):
        add(f"train/a8-megatron-ok-{what}", dtsim("train", "--plan",
                                                  launch(f"ml-ok-{what}.sh", extra), *M),
            ok("step time"), note="argparse's rule, as Megatron-LM's: the last value given")

    # -- preemption notices ------------------------------------------------------------------
    N = ("train", "--replications", "1", "--mtbf", "3000", "--replace-time", "60")
    for what, value in (("azure", "azure"), ("empty", ""), ("two-clouds", "aws,gcp"),
                        ("rate", "10GB/s"), ("nan", "nan")):
        add(f"train/a8-notice-{what}", dtsim(*N, "--strategy", "checkpoint-restart",
                                             "--preemption-notice", value),
            refuse("preemption_notice"))
    add("train/a8-notice-diloco", dtsim(*N, "--sync", "diloco:every=2", "--replicas", "2",
                                        "--microbatches-per-step", "2", "--steps", "4",
                                        "--preemption-notice", "aws"),
        refuse("preemption_notice"), note="no strategy: nothing would use the notice")
    add("train/a8-notice-use-mixed-case", dtsim(*N, "--strategy",
                                                "checkpoint-restart:notice=Checkpoint",
                                                "--preemption-notice", "aws"), refuse("notice"))
    for what, value, text in (("upper-case", "AWS", "preemption notice 120"),
                              ("spaced-unit", "2 min", "preemption notice 120"),
                              ("zero", "0", "checkpoint-restart"),
                              ("longer-than-the-run", "1e9", "preemption notice 1e+09")):
        add(f"train/a8-notice-ok-{what}", dtsim(*N, "--strategy", "checkpoint-restart",
                                                "--preemption-notice", value), ok(text))

    # -- the GPU catalogue's new fields --------------------------------------------------------
    shipped = REPO / "sim" / "profiles" / "data"
    shape = {"layers": 2, "hidden": 64, "heads": 4, "sequence": 32, "vocabulary": 100}
    link = {"src": {"gpu": "T4", "zone": "z"}, "dst": {"gpu": "T4", "zone": "z"}}
    net = {"links": [{**link, "flows": k, "bandwidth": 1e9} for k in (1, 2)]}
    tiny = w("tiny-plan.json", _json.dumps({
        "model": "Tiny", "microbatch_size": 1, "global_batch_size": 2,
        "stages": [{"first_layer": 0, "last_layer": 3, "replicas": [
            {"gpu": "T4", "tp": 2, "gpus_per_node": 2, "zone": "z"}]}]}))

    def catalogue(name: str, key: str, value: Any) -> str:
        cat = _json.loads((shipped / "gpus.json").read_text())
        for g in cat["gpus"]:
            if g["name"] == "T4":
                if value is _json:  # the key left out
                    g.pop(key, None)
                else:
                    g[key] = value
        w(f"{name}/gpus.json", _json.dumps(cat))
        w(f"{name}/models/m.json", _json.dumps({"model": "Tiny", "shape": shape,
                                                "bytes_per_value": 2}))
        w(f"{name}/network.json", _json.dumps(net))
        return str(R / name)

    G = lambda d: dtsim("train", "--plan", tiny, "--profiles", d, "--steps", "1",  # noqa: E731
                        "--replications", "1")
    w("p-cc-nan/gpus.json", (shipped / "gpus.json").read_text().replace(
        '"compute_capability": 7.5}', '"compute_capability": NaN}', 1))
    w("p-cc-nan/models/m.json", _json.dumps({"model": "Tiny", "shape": shape,
                                             "bytes_per_value": 2}))
    w("p-cc-nan/network.json", _json.dumps(net))
    add("train/a8-gpus-compute-capability-nan", G(str(R / "p-cc-nan")), refuse("gpus"))
    for what, key, value, param, note in (
            ("currency-lower-case", "currency", "usd", "gpus", ""),
            ("currency-empty", "currency", "", "gpus", ""),
            ("currency-null", "currency", None, "gpus", ""),
            ("currency-number", "currency", 1, "gpus", ""),
            ("compute-capability-75", "compute_capability", 75, "compute_capability",
             "FIXED (audit8): sm_75 written whole was read as >= 8.0 (flash attention on a T4)"),
            ("compute-capability-two-decimals", "compute_capability", 8.05, "compute_capability",
             "FIXED (audit8): taken"),
            ("compute-capability-huge", "compute_capability", 1e300, "compute_capability",
             "FIXED (audit8): taken"),
            ("compute-capability-bool", "compute_capability", True, "gpus", ""),
            ("overhead-parsecs", "overhead_bytes", "2 parsecs", "gpus", "an unknown unit"),
            ("overhead-rate", "overhead_bytes", "2GB/s", "gpus", "a rate where a size is wanted"),
            ("overhead-null", "overhead_bytes", None, "gpus", ""),
            ("overhead-bool", "overhead_bytes", True, "gpus", ""),
            ("overhead-huge", "overhead_bytes", 1e300, "plan", "no plan fits")):
        add(f"train/a8-gpus-{what}", G(catalogue(f"p-{what}", key, value)), refuse(param),
            note=note)
    for what, key, value in (("compute-capability-null", "compute_capability", None),
                             ("compute-capability-12.1", "compute_capability", 12.1),
                             ("overhead-with-unit", "overhead_bytes", "2GB"),
                             ("overhead-tp1-absent", "overhead_tp1_bytes", _json)):
        add(f"train/a8-gpus-ok-{what}", G(catalogue(f"p-ok-{what}", key, value)),
            ok("throughput"))
    return cases


def audit9_cases(fx: Fixtures) -> list[Case]:
    """audit9: the last two sessions' options and the Python API (ids hold ``/a9-``): DiLoCo's
    recovery= and what its outer loop builds before the first step (layers, fragments, the sync
    schedule), routings with schedules and strategies, --export-plan/--overwrite/--rank,
    checkpoint-restart's settle/grow/notice, dtsim plot --metric, the GPU catalogue's prices,
    memory and currency, the configs built from Python (unit text, nonsense), event logs (time
    zones, encodings), graph files with named hosts, Megatron launch lines whose TP x PP does
    not divide the world. Each ``FIXED (audit9)`` note names a case that misbehaved before."""
    if not (REPO / "sim" / "traces" / "events.py").is_file():
        return []
    import json as _json

    cases: list[Case] = []
    R = fx.root / "a9"

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    def w(name: str, text: str | bytes) -> str:
        p = R / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            p.write_bytes(text)
        else:
            p.write_text(text)
        return str(p)

    # -- DiLoCo: recovery=, and what the outer loop builds whole before its first step ---------
    dl = ("train", "--replicas", "4", "--microbatches-per-step", "4", "--steps", "8",
          "--mtbf", "100", "--replace-time", "5", "--replications", "1", "--sync")
    for what, spec in (("recovery-empty", "recovery="), ("recovery-upper-case", "recovery=PRIME"),
                       ("recovery-unknown", "recovery=zero"),
                       ("recovery-twice", "recovery=prime,recovery=params")):
        add(f"train/a9-diloco-{what}", dtsim(*dl, "diloco:every=4," + spec), refuse("sync"))
    add("train/a9-diloco-recovery-without-failures",
        dtsim("train", "--replicas", "4", "--microbatches-per-step", "4", "--steps", "8",
              "--replications", "1", "--sync", "diloco:every=4,recovery=params"), refuse("sync"))
    add("train/a9-allreduce-recovery", dtsim("train", "--replicas", "4", "--steps", "8",
                                             "--replications", "1", "--mtbf", "100", "--sync",
                                             "allreduce:recovery=params"), refuse("sync"))
    add("train/a9-diloco-ok-recovery-torchft",
        dtsim(*dl[:-1], "--param-size", "1GB", "--sync", "diloco:every=4,recovery=torchft"),
        ok("DiLoCo"), note="with a size: recovery without one is refused (smallfix8)")
    fixed = "FIXED (audit9): "
    add("train/a9-diloco-layers-1e9", dtsim(*dl, "diloco:every=4,fragments=2,layers=1000000000"),
        refuse("sync"), timeout=90,
        note=fixed + "a list of 1e9 layers built for the cut: exit 1, MemoryError after 42 s")
    nf = ("train", "--replicas", "4", "--microbatches-per-step", "4", "--replications", "1")
    add("train/a9-diloco-every-1-steps-1e12",
        dtsim(*nf, "--steps", "1000000000000", "--sync", "diloco:every=1"), refuse("steps"),
        timeout=90, note=fixed + "the sync schedule built whole before the first step: exit 1, "
        "MemoryError after minutes (a plain --steps 1e12 runs and is stopped by Ctrl-C)")
    add("train/a9-diloco-fragments-1e9",
        dtsim(*nf, "--steps", "1000000000", "--sync",
              "diloco:every=1000000000,fragments=1000000000"), refuse("sync"), timeout=90,
        note=fixed + "1e9 fragments' tables: exit 1, MemoryError after 30 s")
    add("train/a9-diloco-ok-layers-1000", dtsim(*dl, "diloco:every=4,fragments=2,layers=1000"),
        ok("DiLoCo"))
    add("api/a9-TrainingConfig-diloco-layers-1e9", api(
        "from sim.training.config import TrainingConfig\n"
        "TrainingConfig(replicas=4, microbatches=4, steps=8, "
        "sync='diloco:every=4,fragments=2,layers=1000000000')"), refuse("sync"),
        note=fixed + "the config accepted it; its run failed with a MemoryError")

    # -- routings with schedules and strategies ------------------------------------------------
    rt = ("train", "--replicas", "2", "--steps", "3", "--replications", "2")
    for sched in ("gpipe", "1f1b", "1f1b-dynamic", "interleaved"):
        add(f"train/a9-routing-least-assigned-time-{sched}",
            dtsim(*rt, "--schedule", sched, "--routing", "least-assigned-time"), refuse("routing"))
    add("train/a9-routing-queue-interleaved", dtsim(*rt, "--schedule", "interleaved", "--routing",
                                                   "queue"), refuse("routing"))
    add("train/a9-routing-upper-case", dtsim(*rt, "--schedule", "swarm", "--routing",
                                            "LEAST-ASSIGNED-TIME"), refuse("routing"))
    add("train/a9-routing-least-assigned-time-async-strategy",
        dtsim(*rt, "--schedule", "async", "--routing", "least-assigned-time", "--mtbf", "500",
              "--strategy", "checkpoint-restart"), refuse("strategy"))
    for sched in ("swarm", "async"):
        add(f"train/a9-routing-ok-least-assigned-time-{sched}",
            dtsim(*rt, "--schedule", sched, "--routing", "least-assigned-time"),
            ok("least-assigned-time"))
    add("train/a9-routing-ok-least-assigned-time-swarm-checkpoint-restart",
        dtsim(*rt, "--schedule", "swarm", "--routing", "least-assigned-time", "--mtbf", "500",
              "--strategy", "checkpoint-restart"), ok("checkpoint-restart"), timeout=60)

    # -- --export-plan, --overwrite, --rank, outputs named as folders ----------------------------
    P = lambda *a: dtsim("plan", "--model", "OPT-350", "--nodes",  # noqa: E731
                         "GH-96:4x2@us-central1-a", "--global-batch-size", "8", "--simulate",
                         "0", "--top", "2", *a)
    for what, value in (("negative", "-1"), ("fraction", "1.5"), ("nan", "nan"), ("empty", "")):
        add(f"plan/a9-rank-{what}", P("--rank", value, "--export-plan", str(R / "r.json")),
            refuse("rank"))
    add("plan/a9-rank-twice", P("--rank", "1", "--rank", "2", "--export-plan",
                                str(R / "r.json")), refuse("rank"))
    add("plan/a9-export-plan-empty", P("--export-plan", ""), refuse("export_plan"))
    slash = "FIXED (audit9): a name ending in '/' wrote a file without the slash"
    add("plan/a9-export-plan-trailing-slash", P("--export-plan", str(R / "xp-dir") + "/"),
        refuse("export_plan"), note=slash, timeout=60)
    add("plan/a9-out-trailing-slash", P("--out", str(R / "out-dir") + "/"), refuse("out"),
        note=slash, timeout=60)
    add("train/a9-timeline-trailing-slash",
        dtsim("train", "--steps", "1", "--replications", "1", "--timeline",
              str(R / "tl-dir") + "/"), refuse("timeline"), note=slash)

    same = ("FIXED (audit9): with --overwrite the output replaced a file the command reads "
            "(exit 0{})")
    launch = w("xp-self.sh", "torchrun --nnodes 2 --nproc-per-node 4 pretrain_gpt.py "
               "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-layers 24 "
               "--micro-batch-size 2 --global-batch-size 16 --untie-embeddings-and-output-weights "
               "--fp16\n")
    XT = ("train", "--plan", launch, "--model", "OPT-350", "--gpu", "RTX-3090", "--zone",
          "us-central1-a", "--steps", "1", "--replications", "1", "--overwrite")
    add("train/a9-export-plan-is-the-plan", dtsim(*XT, "--export-plan", launch),
        refuse("export_plan"), note=same.format(": the launch line became JSON"))
    add("train/a9-timeline-is-the-plan", dtsim(*XT, "--timeline", launch), refuse("timeline"),
        note=same.format(": the launch line became a timeline"))
    trace2 = w("xp-trace.csv", "worker,start,end\nw0,1,2\nw1,3,4\n")
    add("train/a9-timeline-is-the-failure-trace",
        dtsim("train", "--stages", "2", "--microbatches-per-step", "2", "--steps", "1",
              "--replications", "1", "--failure-trace", trace2, "--timeline", trace2,
              "--overwrite"), refuse("timeline"), note=same.format(": the trace became a timeline"))
    fleet = w("xp-fleet.json", '{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, '
              '"zone": "us-central1-a", "count": 2}]}')
    FP = ("plan", "--model", "OPT-350", "--fleet", fleet, "--global-batch-size", "8",
          "--simulate", "0", "--top", "2", "--overwrite")
    add("plan/a9-export-plan-is-the-fleet", dtsim(*FP, "--export-plan", fleet),
        refuse("export_plan"), timeout=60,
        note="FIXED (audit9): the plan written over the fleet, then 'fleet' refused on reading "
        "it again (exit 2 after the search)")
    add("plan/a9-out-is-the-fleet", dtsim(*FP, "--out", fleet), refuse("out"), timeout=60,
        note=same.format(""))
    lead = ("FIXED (lead, review16): audit9's rule was train's and plan's only; with "
            "--overwrite the {} replaced the user's {}")
    add("pipeline/timeline-is-the-failure-trace",
        dtsim("pipeline", "--stages", "1", "--replicas", "1", "--failure-trace", trace2,
              "--trace-loop", "--timeline", trace2, "--overwrite"), refuse("timeline"),
        note=lead.format("timeline", "trace"))
    add("pipeline/event-log-is-the-failure-trace",
        dtsim("pipeline", "--stages", "1", "--replicas", "1", "--failure-trace", trace2,
              "--trace-loop", "--event-log", trace2, "--overwrite"), refuse("event_log"),
        note=lead.format("event log", "trace"))
    graph = w("xp-graph.edges", "a b\nb c\nc a\n")
    add("gossip/timeline-is-the-topology",
        dtsim("gossip", "--topology", graph, "--rounds", "3", "--timeline", graph,
              "--overwrite"), refuse("timeline"), note=lead.format("timeline", "graph file"))

    # -- checkpoint-restart: settle, grow, notice -------------------------------------------------
    C = ("train", "--replications", "1", "--mtbf", "100", "--steps", "20", "--stages", "4",
         "--replicas", "2", "--strategy")
    for spec, param in (("settle=-1", "settle"), ("settle=nan", "settle"),
                        ("settle=inf", "settle"), ("settle=", "settle"),
                        ("settle=2GB", "settle"), ("settle=True", "settle"),
                        ("settle=1,settle=2", "strategy"), ("grow=nan", "grow"),
                        ("notice=", "notice"), ("notice=bogus", "notice"),
                        ("notice=ignore", "notice")):
        tail = spec.replace("=", "-").replace(",", "-") or "empty"
        add(f"train/a9-checkpoint-restart-{tail}", dtsim(*C, "checkpoint-restart:" + spec),
            refuse(param))

    # -- dtsim plot --metric -------------------------------------------------------------------
    tl = R / "tl.json"
    add("plot/a9-timeline-with-metric", [sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys
        r = subprocess.run([sys.executable, "-m", "sim", "train", "--steps", "1",
                            "--replications", "1", "--quiet", "--timeline", {str(tl)!r}],
                           capture_output=True)
        if r.returncode:
            sys.exit("the timeline was not written")
        from sim.cli import main
        sys.exit(main(["plot", "--timeline", {str(tl)!r}, "--metric", "throughput",
                       "--out", {str(R / "tl.png")!r}]))
    """)], refuse("metric"), allow_work=True,
        note="FIXED (audit9): --metric with --timeline was taken and ignored (the Gantt chart "
        "drawn, exit 0)")
    add("plot/a9-metric-empty", dtsim("plot", str(fx.planted), "--metric", ""), refuse("metric"))

    # -- the GPU catalogue: prices, memory with units, currency ---------------------------------
    shipped = REPO / "sim" / "profiles" / "data"
    shape = {"layers": 2, "hidden": 64, "heads": 4, "sequence": 32, "vocabulary": 100}
    link = {"src": {"gpu": "T4", "zone": "z"}, "dst": {"gpu": "T4", "zone": "z"}}
    net = {"links": [{**link, "flows": k, "bandwidth": 1e9} for k in (1, 2)]}
    tiny = w("tiny-plan.json", _json.dumps({
        "model": "Tiny", "microbatch_size": 1, "global_batch_size": 2,
        "stages": [{"first_layer": 0, "last_layer": 3, "replicas": [
            {"gpu": "T4", "tp": 2, "gpus_per_node": 2, "zone": "z"}]}]}))

    def catalogue(name: str, key: str, value: Any) -> str:
        cat = _json.loads((shipped / "gpus.json").read_text())
        for g in cat["gpus"]:
            if g["name"] == "T4":
                g[key] = value
        w(f"{name}/gpus.json", _json.dumps(cat))
        w(f"{name}/models/m.json", _json.dumps({"model": "Tiny", "shape": shape,
                                                "bytes_per_value": 2}))
        w(f"{name}/network.json", _json.dumps(net))
        return str(R / name)

    G = lambda d: dtsim("train", "--plan", tiny, "--profiles", d, "--steps", "1",  # noqa: E731
                        "--replications", "1")
    for what, key, value, param in (
            ("price-text", "price_per_hour", "2.5", "gpus"),
            ("price-with-unit", "price_per_hour", "$2.5/h", "gpus"),
            ("price-negative", "price_per_hour", -1, "price_per_hour"),
            ("price-bool", "price_per_hour", True, "gpus"),
            ("memory-rate", "memory_bytes", "16GB/s", "gpus"),
            ("memory-plain-text", "memory_bytes", "16", "gpus"),
            ("memory-bool", "memory_bytes", True, "gpus"),
            ("memory-bits", "memory_bytes", "16Gb", "plan"),
            ("bandwidth-size", "intra_node_bandwidth", "300GB", "gpus"),
            ("currency-spaced", "currency", "USD ", "gpus"),
            ("currency-symbol", "currency", "US$", "gpus"),
            ("compute-capability-text", "compute_capability", "7.5", "gpus"),
            ("compute-capability-negative", "compute_capability", -7.5, "compute_capability"),
            ("name-empty", "name", "", "gpu")):
        add(f"train/a9-gpus-{what}", G(catalogue(f"p-{what}", key, value)), refuse(param))
    for what, key, value in (("memory-gib", "memory_bytes", "16 GiB"),
                             ("memory-gb", "memory_bytes", "16GB"),
                             ("currency-usd", "currency", "USD"),
                             ("price-zero", "price_per_hour", 0)):
        add(f"train/a9-gpus-ok-{what}", G(catalogue(f"p-ok-{what}", key, value)),
            ok("throughput"))

    # -- configs built from Python: unit text and nonsense ---------------------------------------
    TC = "from sim.training.config import TrainingConfig as T\n"
    LC = "from sim.training.learners import LearnersConfig as C\n"
    for what, snippet, param in (
            ("mtbf-size", TC + "T(mtbf='2GB')", "mtbf"),
            ("mtbf-empty", TC + "T(mtbf='')", "mtbf"),
            ("mtbf-bool", TC + "T(mtbf=True)", "mtbf"),
            ("steps-bool", TC + "T(steps=True)", "steps"),
            ("steps-float", TC + "T(steps=1e12)", "steps"),
            ("value-bits-float", TC + "T(value_bits=16.0)", "value_bits"),
            ("availability-text", TC + "T(availability='0.9')", "availability"),
            ("param-size-rate", TC + "T(param_size='2GB/s')", "param_size"),
            ("param-size-inf", TC + "T(param_size=float('inf'))", "param_size"),
            ("latency-list-item-size", TC + "T(stages=3, latency=('1ms', '2GB', '3ms'))",
             "latency"),
            ("hour-with-unit", TC + "T(hour='1h')", "hour"),
            ("notice-negative", TC + "T(notice=-1)", "notice"),
            ("routing-none", TC + "T(routing=None)", "routing"),
            ("sync-none", TC + "T(sync=None)", "sync"),
            ("strategy-number", TC + "T(strategy=3, mtbf=100)", "strategy"),
            ("settle-negative-unit", TC + "T(replicas=2, mtbf=100, "
             "strategy='checkpoint-restart:settle=-5min')", "settle"),
            ("samples-1e308", TC + "T(samples_per_microbatch=1e308)", "samples_per_microbatch"),
            ("contention-text", TC + "T(contention='off')", "contention"),
            ("learners-heartbeat-unit", LC + "C(heartbeat='5min', mtbf=100)", "heartbeat"),
            ("learners-heartbeat-nan", LC + "C(heartbeat=float('nan'), mtbf=100)", "heartbeat"),
            ("learners-heartbeat-1e308", LC + "C(heartbeat=1e308, mtbf=100)", "heartbeat"),
            ("learners-recovery-upper-case", LC + "C(recovery='PARAMS', mtbf=100, size=1e9)",
             "recovery"),
            ("learners-recovery-none", LC + "C(recovery=None, mtbf=100, size=1e9)", "recovery"),
            ("learners-retries-bool", LC + "C(retries=True, mtbf=100)", "retries"),
            ("learners-1e9", LC + "C(learners=10**9)", "learners"),
            ("learners-steps-1e12", LC + "C(steps=10**12, every=1)", "steps")):
        add(f"api/a9-{what}", api(snippet), refuse(param))
    for what, snippet, text in (
            ("units-read", TC + "c = T(mtbf='30min', replace_time='5min', param_size='2GB', "
             "bandwidth='10Gbit/s', latency='5ms')\nprint(c.mtbf, c.param_size)", "1800.0 2"),
            ("diloco-heartbeat-unit", TC + "c = T(replicas=4, microbatches=4, steps=8, mtbf=100, "
             "sync='diloco:every=4,heartbeat=5min')\nprint(c.sync)", "heartbeat=300")):
        add(f"api/a9-ok-{what}", api(snippet), ok(text))

    # -- event logs: time zones and encodings -----------------------------------------------------
    ev = "events:worker=instance_id,time=timestamp,down=preempted,up=launched"
    head = "timestamp,instance_id,event\n"
    S = lambda f: dtsim("trace", "stats", f, "--trace-format", ev)  # noqa: E731
    for what, text in (
            ("zone-and-naive", head + "2024-03-01T12:00:00,i-a,launched\n"
             "2024-03-01T13:10:00Z,i-a,preempted\n"),
            ("epoch-and-iso", head + "100,i-a,launched\n2024-03-01T13:10:00Z,i-a,preempted\n"),
            ("zone-name", head + "2024-03-01T12:00:00Z,i-a,launched\n"
             "2024-03-01T13:10:00 PST,i-a,preempted\n"),
            ("zone-out-of-range", head + "2024-03-01T12:00:00Z,i-a,launched\n"
             "2024-03-01T13:10:00+25:00,i-a,preempted\n"),
            ("not-utf8", (head + "100,i-\xff,launched\n200,i-\xff,preempted\n").encode("latin-1")),
            ("utf16", "\ufefftimestamp,instance_id,event\n100,i-a,launched\n".encode("utf-16-le"))):
        add(f"trace/a9-events-{what}", S(w(f"ev-{what}.csv", text)), refuse("trace"))
    for what, text in (
            ("naive", head + "2024-03-01T12:00:00,i-a,launched\n2024-03-01T13:10:00,i-a,"
             "preempted\n"),
            ("space-and-fraction", head + "2024-03-01 12:00:00+00:00,i-a,launched\n"
             "2024-03-01T13:10:00.5Z,i-a,preempted\n")):
        add(f"trace/a9-events-ok-{what}", S(w(f"ev-ok-{what}.csv", text)), ok("slot 0: i-a"))

    # -- graph files with named hosts -------------------------------------------------------------
    T = lambda f: dtsim("topologies", f)  # noqa: E731
    add("topologies/a9-json-node-id-number-and-text", T(w("g-numid.json", _json.dumps({
        "nodes": [{"id": 1}, {"id": "1"}, {"id": "b"}],
        "links": [{"source": 1, "target": "b"}, {"source": "1", "target": "b"}]}))),
        refuse("topology"), note="FIXED (audit9): 1 and \"1\" read as two nodes named alike "
        "(a trace or --network-nodes naming host 1 could mean either)")
    for what, name, text in (
            ("json-node-twice", "g-dup.json", _json.dumps({
                "nodes": [{"id": "a"}, {"id": "a"}, {"id": "b"}],
                "links": [{"source": "a", "target": "b"}]})),
            ("json-node-id-bool", "g-bool.json", _json.dumps({
                "nodes": [{"id": True}, {"id": "b"}], "links": [{"source": True, "target": "b"}]})),
            ("edges-self-loop", "g-loop.edges", "a b 1ms 1Gbit/s\nb c 1ms 1Gbit/s\n"
             "c a 1ms 1Gbit/s\nb b 1ms 1Gbit/s\n"),
            ("edges-reversed-twice", "g-rev.edges", "a b 1ms 1GB/s\nb c 1ms 1GB/s\n"
             "c a 1ms 1GB/s\nb a 2ms 2GB/s\n"),
            ("edges-bandwidth-zero", "g-bw0.edges", "a b 1ms 0Gbit/s\nb c 1ms 1Gbit/s\n"),
            ("edges-bandwidth-negative", "g-bwneg.edges", "a b 1ms -1Gbit/s\nb c 1ms 1Gbit/s\n"),
            ("edges-spaced-unit", "g-gbps.edges", "a b 1ms 1 Gbps\nb c 1ms 1Gbit/s\n")):
        add(f"topologies/a9-{what}", T(w(name, text)), refuse("topology"))
    for what, name, text in (
            ("unicode-names", "g-uni.edges", "n\u0153ud-\u03b1 n\u0153ud-\u03b2 1ms 1Gbit/s\n"
             "n\u0153ud-\u03b2 \u6771\u4eac 1ms 1Gbit/s\n\u6771\u4eac n\u0153ud-\u03b1 1ms 1Gbit/s\n"),
            ("numbers-and-names", "g-mixed.edges", "lab-1 2 1ms 1Gbit/s\n2 lab-3 1ms 1Gbit/s\n"),
            ("json-1-and-01", "g-01.json", _json.dumps({
                "nodes": [{"id": 1}, {"id": "01"}, {"id": "b"}],
                "links": [{"source": 1, "target": "b"}, {"source": "01", "target": "b"}]})),
            ("bytes-per-second", "g-GBs.edges", "a b 1ms 1GB/s\nb c 1ms 1GB/s\n")):
        add(f"topologies/a9-ok-{what}", T(w(name, text)), ok("nodes"))

    # -- Megatron launch lines whose TP x PP does not divide the world ----------------------------
    M = ("--model", "OPT-350", "--gpu", "RTX-3090", "--zone", "us-central1-a", "--steps", "1",
         "--replications", "1")
    for what, nodes, tp, pp, layers in (("tp-pp-not-dividing", 2, 3, 2, 24),
                                        ("tp-pp-above-world", 1, 4, 2, 24),
                                        ("layers-1e9", 2, 2, 2, 1000000000)):
        f = w(f"ml-{what}.sh", f"torchrun --nnodes {nodes} --nproc-per-node 4 pretrain_gpt.py "
              f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} "
              f"--num-layers {layers} --micro-batch-size 2 --global-batch-size 16 --fp16 "
              "--untie-embeddings-and-output-weights\n")
        add(f"train/a9-megatron-{what}", dtsim("train", "--plan", f, *M), refuse("plan"))
    dsc = _json.dumps({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                       "train_batch_size": 16, "fp16": {"enabled": True}})
    for what, launcher, mp in (("mp-pp-not-dividing", "--num_nodes 2 --num_gpus 4", 3),
                               ("mp-pp-above-world", "--num_nodes 1 --num_gpus 4", 4)):
        w(f"ds-{what}/ds_config.json", dsc)
        w(f"ds-{what}/hostfile", "w0 slots=4\nw1 slots=4\n")
        f = w(f"ds-{what}/launch.sh", f"deepspeed {launcher} pretrain_gpt2.py "
              f"--model-parallel-size {mp} --pipe-parallel-size 2 --num-layers 24 "
              "--hidden-size 1024 --seq-length 2048 --batch-size 2 --fp16 --deepspeed "
              "--deepspeed_config ds_config.json\n")
        add(f"train/a9-deepspeed-{what}", dtsim("train", "--plan", f, *M), refuse("plan"))
    return cases


def usertrial12_cases(fx: Fixtures) -> list[Case]:
    """usertrial12: a researcher's own folder and graph file (named hosts, links with units)."""
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    mine = fx._write("ut12_mine/summary.csv", "node,accuracy\nlab-pc-01,0.91\n").parent
    add("run/out-with-foreign-summary", dtsim("run", str(fx.experiments["good"]), "--executor",
                                              "serial", "--quiet", "--out", str(mine)),
        refuse("out"), note="a summary.csv with no records.csv or manifest.json is not a "
                            "run's: it was overwritten")
    campus = fx._write("ut12_campus.edges", "lab-pc-01 lab-pc-02 200us 1Gbit/s\n"
                       "lab-pc-02 cloud-a 12ms 500Mbit/s\ncloud-a lab-pc-01 50us 25Gbit/s\n")
    E = ("gossip", "--topology", str(campus), "--protocol", "edge", "--rounds", "5",
         "--replications", "2")
    add("gossip/size-with-edge", dtsim(*E, "--size", "2GB"), refuse("size"),
        note="edge's clock counts steps (2/n each): the size was read by nothing")
    add("gossip/size-with-edge-training", dtsim(*E, "--objective", "quadratic", "--size", "2GB"),
        refuse("size"), note="accepted and unused")
    add("gossip/size-training-infinite-bandwidth",
        dtsim("gossip", "--nodes", "8", "--protocol", "neighbourhood", "--rounds", "3",
              "--replications", "2", "--objective", "quadratic", "--size", "2GB"),
        refuse("size"), note="plain gossip refused it; training accepted it unused")
    return cases


def zero_step_cases(fx: Fixtures) -> list[Case]:
    """A fixed program whose every pass, transfer and sync takes 0 s (its step is 0 s), and a
    checkpoint flag folded into a strategy key the spec sets too, and the implicit complete
    graph's link parameters (the lead's fixes of 2026-12-07 from smallfix2's, review13's and
    smallfix3's reports)."""
    T = lambda *a: dtsim("train", "--replications", "2", "--steps", "3", *a)  # noqa: E731
    return [Case(f"train/forward-time-zero-{e}", T("--forward-time", "0", "--engine", e),
                 ok("not measured"), note="its throughput is not measured (as the DES says); "
                 "the closed form divided by the 0 s step: a traceback")
            for e in ("auto", "des")] + [
        Case(f"train/strategy-key-and-flag-{flag}", T("--stages", "4", "--replicas", "2",
             "--mtbf", "500", "--strategy", f"checkpoint-restart:{key}=5", f"--{flag}", "7"),
             refuse(flag.replace("-", "_")), note="review13: the flag replaced the strategy's "
             "key silently")
        for flag, key in (("checkpoint-every", "every"), ("checkpoint-cost", "checkpoint"),
                          ("restart-cost", "restart"))] + [
        Case(f"gossip/complete-{what}", dtsim("gossip", "--topology", f"complete:n=4,{kv}",
                                               "--rounds", "3", "--replications", "2"),
             refuse("topology"), note=f"smallfix3: the complete graph is never built, so its "
             f"link checks never ran ({was})")
        for what, kv, was in (("bandwidth-zero", "bandwidth=0", "a ZeroDivisionError traceback"),
                              ("latency-negative", "latency=-1",
                               "every replication failed: 'Negative delay'"))]


def leftovers_cases(fx: Fixtures) -> list[Case]:
    """leftovers: trace files and graph files in other scripts' digits (the readers' patterns
    used \\d and float(), which read '\u0663' as 3); each refused naming path:line or the file."""
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    TC = lambda *a: dtsim("trace", "stats", *a)  # noqa: E731
    note = "other scripts' digits: the trace's \\d pattern and float() read '\u0663' as 3"
    for fmt, name, text, unit in (
            ("bamboo", "lo_bamboo.csv", "0,4\n10,4\n10,\u0663\n20,3\n", ("--time-unit", "s")),
            ("gcloud", "lo_gcloud.txt", "2021-12-11, 00:00:00, 4\n2021-12-11, 00:10:00, "
                                        "\u0663\n2021-12-11, 00:20:00, 3\n", ()),
            ("oobleck", "lo_oobleck.csv", "0,add,a\n\u0662000,remove,a\n", ()),
            ("simgrid", "lo_simgrid.txt", "0 1\n1\u0660 0\n20 1\n", ("--time-unit", "s")),
            ("dtsim", "lo_dtsim.csv", "worker,start,end\na,1,\u0663\n", ())):
        add(f"trace/stats-{fmt}-unicode-digit", TC(str(fx._write(name, text)), "--trace-format",
                                                   fmt, *unit), refuse("trace"), note=note)
    gnote = "other scripts' digits: a graph file's latency '\u0663' was read as 3"
    for name, text in (("lo_lat.edges", "a b latency=\u0663\nb c latency=2\n"),
                       ("lo_bw.json", '{"nodes": [{"id": "a"}, {"id": "b"}], "links": '
                                      '[{"source": "a", "target": "b", "bandwidth": "\u0661"}]}')):
        add(f"topologies/file-{name.split('.')[-1]}-unicode-digit",
            dtsim("topologies", str(fx._write(name, text))), refuse("topology"), note=gnote)
    return cases


# ----------------------------------------------------------------------------- units (issue 33)
# Sizes, rates and times with units (sim.units): every option and file that takes one, each
# refused in one line naming the parameter, the rule and the value; ids start with "units/".

#: Values no size, rate or time option takes, and why (the note of each case).
_BAD_QUANTITIES = (
    ("parsecs", "10 parsecs", "an unknown unit"),
    ("overflow", "1e400GB", "beyond the largest float"),
    ("negative", "-2GB", "a negative quantity"),
    ("no-number", "GB", "a unit without a number"),
    ("nan", "nanGB", "nan with a unit"),
    ("inf-with-unit", "infGB", "inf with a unit (inf is unit-free: give it plain)"),
    ("unicode-digits", "\u0662GB", "an Arabic-Indic digit"),
    ("kilo-ambiguous", "2KB", "K: 1000 or 1024? (kB or KiB)"),
    ("milli-bytes", "5mB", "m is milli"),
    ("lower-case", "2gb", "units are case-sensitive (GB, Gb)"),
    ("huge-exponent", "1e99999999GB", "answered at once, no 10**99999999 computed"),
    ("long-mantissa", "1" * 5000 + "GB", "more digits than Python converts"),
)
#: A value of each other kind: refused where a size, a rate or a time is wanted.
_OTHER_KIND = {"size": ("2GB/h", "rate where a size is wanted"),
               "rate": ("10Gbit", "size where a rate is wanted"),
               "time": ("2GB/s", "rate where a time is wanted")}
_VALID = {"size": "2GB", "rate": "10Gbit/s", "time": "5ms"}


def unit_cases(fx: Fixtures) -> list[Case]:
    """Quantities with units (issue 33): bad values of every unit-taking option and file."""
    if not _has_option("train", "--param-size") or not (REPO / "sim" / "units.py").is_file():
        return []
    cases: list[Case] = []

    def add(id_: str, argv: Sequence[str], expect: Expect, **kw) -> None:
        cases.append(Case(id_, list(argv), expect, **kw))

    w = fx._write
    TR = ("train", "--replications", "1", "--steps", "2")
    net = ("--network", "tree:racks=1,hosts=8")
    options = [  # (id, argv before the option, option, its kind, its dest)
        ("train", TR, "--param-size", "size", "param_size"),
        ("train", TR, "--activation-size", "size", "activation_size"),
        ("train", TR + net, "--bucket-size", "size", "bucket_size"),
        ("train", TR, "--bandwidth", "rate", "bandwidth"),
        ("train", TR + net, "--nic", "rate", "nic"),
        ("train", TR, "--latency", "time", "latency"),
        ("pipeline", ("pipeline",), "--transfer-size", "size", "transfer_size"),
        ("pipeline", ("pipeline",), "--bandwidth", "rate", "bandwidth"),
        ("pipeline", ("pipeline",), "--latency", "time", "latency"),
        ("pipeline", ("pipeline", "--queueing", "--network", "tree:racks=1,hosts=8"), "--nic",
         "rate", "nic"),
        ("gossip", ("gossip", "--replications", "1"), "--size", "size", "size"),
        ("gossip", ("gossip", "--replications", "1"), "--nic", "rate", "nic"),
    ]
    flows = w("units/flows.csv", "src,dst,size,start\n0,5,1MB,0\n")
    options.append(("network", ("network", "--topology", "tree:racks=2,hosts=4", "--flows",
                                str(flows)), "--nic", "rate", "nic"))
    for command, head, option, kind, dest in options:
        for what, value, note in _BAD_QUANTITIES:
            if kind != "size":  # the same values with the kind's own unit
                value = value.replace("GB", "GB/s" if kind == "rate" else "s").replace(
                    "2KB", "2KB/s" if kind == "rate" else "2Ks").replace(
                    "5mB", "5mB/s" if kind == "rate" else "5m").replace(
                    "2gb", "2gb/s" if kind == "rate" else "2S")
            add(f"units/{command}{option}-{what}", dtsim(*head, option, value), refuse(dest),
                note=note)
        other, note = _OTHER_KIND[kind]
        add(f"units/{command}{option}-other-kind", dtsim(*head, option, other), refuse(dest),
            note=note)
    add("units/train--latency-list-item", dtsim(*TR, "--stages", "3", "--latency", "1ms,2GB"),
        refuse("latency"), note="one bad item of a per-hop list")
    # (smallfix2) a value with a unit the config refuses is shown as typed, not in B/s or s
    typed_note = "shown as typed (it showed the library's value: 0.0, 3.6e+303)"
    for id_, argv, dest in (
            ("train-bandwidth-zero-as-typed", (*TR, "--bandwidth", "0Gbit/s"), "bandwidth"),
            ("train-mtbf-zero-as-typed", (*TR, "--mtbf", "0ms"), "mtbf"),
            ("train-latency-huge-as-typed", (*TR, "--latency", "1e300h"), "latency"),
            ("train-strategy-rate-zero-as-typed", (*TR, "--replicas", "2", "--strategy",
                                                   "checkpoint-restart:checkpoint_bandwidth=0GB/s"),
             "checkpoint_bandwidth"),
            ("pipeline-bandwidth-zero-as-typed", ("pipeline", "--transfer-size", "1GB",
                                                  "--bandwidth", "0Gbit/s"), "bandwidth"),
            ("gossip-nic-zero-as-typed", ("gossip", "--replications", "1", "--nic", "0Gbit/s"),
             "nic"),
            ("learners-bandwidth-zero-as-typed", ("learners", "--bandwidth", "0Gbit/s"),
             "bandwidth"),
            ("learners-grace-as-typed", ("learners", "--grace", "5min"), "grace"),
            ("network-nic-zero-as-typed", ("network", "--topology", "tree:racks=2,hosts=4",
                                           "--flows", str(flows), "--nic", "0Gbit/s"), "nic")):
        add(f"units/{id_}", dtsim(*argv), refuse(dest), note=typed_note)
    # (smallfix3) a topology spec's link value with a unit: the spec and the value as typed
    spec_note = "spec and value as typed (it showed 'ring:n=4,bandwidth=0.0' and 0.0)"
    for id_, argv, dest in (
            ("topologies-spec-bandwidth-zero-as-typed", ("topologies", "ring:n=4,bandwidth=0Gbit/s"),
             "topology"),
            ("topologies-spec-matrix-as-typed", ("topologies", "geo:regions=2,hosts=1,"
                                                 "bandwidth_matrix=0/1Gbit/s;2Gbit/s/0"),
             "topology"),
            ("train-topology-bandwidth-zero-as-typed",
             (*TR, "--topology", "ring:n=4,bandwidth=0Gbit/s"), "topology"),
            ("train-network-bandwidth-zero-as-typed",
             (*TR, "--replicas", "2", "--network", "ring:n=4,bandwidth=0Gbit/s"), "network"),
            ("pipeline-topology-bandwidth-zero-as-typed",
             ("pipeline", "--topology", "ring:n=48,bandwidth=0Gbit/s"), "topology"),
            ("topologies-spec-nodes-bandwidth-zero-as-typed",
             ("topologies", "ring:bandwidth=0Gbit/s", "--nodes", "4"), "topology")):
        add(f"units/{id_}", dtsim(*argv), refuse(dest), note=spec_note)

    # the time unit: a rate or time with a unit needs --hour 3600 (a second)
    add("units/train-hour-with-rate-unit", dtsim(*TR, "--hour", "60", "--param-size", "1GB",
                                                 "--bandwidth", "10Gbit/s"), refuse("hour"),
        note="10Gbit/s is per second; with --hour 60 a time unit is a minute")
    add("units/train-hour-with-network-units",
        dtsim(*TR, "--hour", "1", "--network", "tree:racks=1,hosts=8,host_latency=5us"),
        refuse("hour"), note="the network's latency is in seconds; --hour 1 makes hours")

    # flows CSV: sizes and starts
    N = ("network", "--topology", "tree:racks=2,hosts=4", "--flows")
    for what, row, note in (
            ("size-rate", "0,5,2GB/h,0", "a rate where a size is wanted"),
            ("size-parsecs", "0,5,10 parsecs,0", "an unknown unit"),
            ("size-negative", "0,5,-2GB,0", "a negative size"),
            ("size-nan", "0,5,nanGB,0", "nan with a unit"),
            ("size-overflow", "0,5,1e400GB,0", "beyond the largest float"),
            ("size-kilo", "0,5,4KB,0", "K: 1000 or 1024?"),
            ("start-size", "0,5,1GB,2GB", "a size where a time is wanted"),
            ("start-minute", "0,5,1GB,5m", "m: minute or milli?"),
            ("start-unicode", "0,5,1GB,\u0665ms", "a non-ASCII digit")):
        f = w(f"units/flows-{what}.csv", "src,dst,size,start\n" + row + "\n")
        add(f"units/network-flows-{what}", dtsim(*N, str(f)), refuse("flows"), note=note)

    # topology spec parameters (a *bandwidth* one takes a rate, a *latency* one a time)
    F = ("network", "--flows", str(flows), "--topology")
    for what, spec, note in (
            ("bandwidth-size", "tree:racks=2,hosts=4,host_bandwidth=10GB", "a size, not a rate"),
            ("bandwidth-parsecs", "tree:racks=2,hosts=4,host_bandwidth=10parsecs",
             "an unknown unit"),
            ("bandwidth-negative", "tree:racks=2,hosts=4,uplink_bandwidth=-1GB/s",
             "a negative rate"),
            ("latency-rate", "tree:racks=2,hosts=4,host_latency=2GB/s", "a rate, not a time"),
            ("latency-minute", "tree:racks=2,hosts=4,host_latency=5m", "m: minute or milli?"),
            ("latency-matrix-size", "geo:hosts=2,latency_matrix=0/40GB;40GB/0",
             "a matrix entry with a size"),
            ("ring-bandwidth-nan", "ring:n=6,bandwidth=nanGB/s", "nan with a unit")):
        add(f"units/network-spec-{what}", dtsim(*F, spec), refuse("topology"), note=note)
    add("units/train-network-spec-bandwidth-size",
        dtsim(*TR, "--network", "tree:racks=1,hosts=8,host_bandwidth=10GB"), refuse("network"),
        note="a size, not a rate, in --network's spec")
    add("units/gossip-topology-latency-size",
        dtsim("gossip", "--replications", "1", "--topology", "ring:n=8,latency=2GB"),
        refuse("topology"), note="a size, not a time")

    # graph files: edge bandwidth / latency, node NICs, curves
    for what, text, note in (
            ("edges-latency-size", "0 1 latency=2GB\n", "a size, not a time"),
            ("edges-bandwidth-size", "0 1 1ms 10Gbit\n", "a size, not a rate"),
            ("edges-bandwidth-overflow", "0 1 latency=1ms bandwidth=1e400GB/s\n",
             "beyond the largest float"),
            ("edges-bandwidth-kilo", "0 1 bandwidth=5KB/s\n", "K: 1000 or 1024?"),
            ("edges-curve-table-size", "0 1 bandwidth_curve=table:1kB=5GB\n",
             "a table point whose bandwidth is a size")):
        f = w(f"units/{what}.edges", text)
        add(f"units/network-{what}", dtsim(*F, str(f)), refuse("topology"), note=note)
    gml = w("units/nic.graphml",
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n'
            '<key id="nic" for="node" attr.name="nic" attr.type="string"/>\n'
            '<key id="bw" for="edge" attr.name="bandwidth" attr.type="string"/>\n'
            '<graph edgedefault="undirected"><node id="0"><data key="nic">10GB</data></node>'
            '<node id="1"/><node id="5"/><edge source="0" target="1"><data key="bw">1GB/s</data>'
            '</edge><edge source="1" target="5"><data key="bw">nanGB/s</data></edge>'
            '</graph></graphml>\n')
    add("units/network-graphml-nic-size", dtsim(*F, str(gml)), refuse("topology"),
        note="a node nic of 10GB (a size, not a rate)")

    # profile files: a fleet's links (dtsim plan --fleet)
    P = ("plan", "--model", "OPT-350", "--global-batch-size", "8", "--simulate", "0", "--fleet")
    end = '{"gpu": "GH-96", "zone": "z"}'
    for what, link, note in (
            ("bandwidth-size", '"bandwidth": "10Gbit"', "a size, not a rate"),
            ("latency-parsecs", '"bandwidth": 1e9, "latency": "5 parsecs"', "an unknown unit"),
            ("curve-min-kilo", '"curve": {"coefficients": [1.0], "min_bytes": "64KB"}',
             "K: 1000 or 1024?"),
            ("bandwidth-negative", '"bandwidth": "-1GB/s"', "a negative rate")):
        f = w(f"units/fleet-{what}.json",
              '{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "z", "count": 2}], '
              f'"links": [{{"src": {end}, "dst": {end}, {link}}}]}}\n')
        add(f"units/plan-fleet-{what}", dtsim(*P, str(f)), refuse("network"), note=note)

    # profile files: a model profile's layer times (dtsim train --plan --profiles DIR)
    plan = w("units/model-plan.json",
             '{"model": "M", "microbatch_size": 1, "global_batch_size": 2, "stages": '
             '[{"first_layer": 0, "last_layer": 0, "replicas": [{"gpu": "GH-96", "tp": 1, '
             '"gpus_per_node": 1, "zone": "z"}]}]}\n')
    for what, row, expect, note in (
            ("parsecs", '"1 parsecs", 0.002', refuse("model"), "an unknown unit"),
            ("plain-text", '"0.001", 0.002', refuse("model"),
             "a number as text: numbers are written as numbers"),
            ("size", '"2GB", 0.002', refuse("model"), "a size, not a time"),
            ("negative", '"-1ms", 0.002', refuse("model"), "a negative time"),
            ("inf", '"1e400s", 0.002', refuse("model"), "beyond the largest float"),
            ("ok", '"1.9ms", "3.8 ms", "400us"', ok("throughput"), "times with units run")):
        w(f"units/model-times-{what}/models/m.json",
          '{"model": "M", "layers": 1, "sizes": [{"tp": 1, "layers": [{"params": 1000, '
          '"activation_bytes": 4096, "activation_memory_bytes": 8192}]}], "times": '
          f'[{{"gpu": "GH-96", "microbatch_size": 1, "tp": 1, "layers": [[{row}]]}}]}}\n')
        add(f"units/train-model-times-{what}",
            dtsim(*TR, "--plan", str(plan), "--profiles",
                  str(fx.root / f"units/model-times-{what}")), expect, note=note)

    # with units, each surface runs (exit 0; a mix is one warning line, which is no alarm)
    add("units/train-network-ok", dtsim(*TR, "--network", "tree:racks=1,hosts=8,host_bandwidth="
                                        "100Gbit/s,uplink_bandwidth=400Gbit/s,host_latency=2us,"
                                        "uplink_latency=5us", "--param-size", "1.4GB",
                                        "--activation-size", "16MiB", "--nic", "25Gbps"),
        ok("transfers: --param-size 1.4GB"))
    add("units/train-mixed-warns", dtsim(*TR, *net, "--param-size", "1.4GB"), ok("throughput"),
        note="a size in GB over the tree's plain 100 B/s: one warning line, the run goes on")
    good = w("units/good.csv", "src,dst,size,start\n0,5,1GB,0\n1,5,800Mbit,10ms\n")
    add("units/network-ok", dtsim("network", "--topology", "tree:racks=2,hosts=4,host_bandwidth="
                                  "10Gbit/s,uplink_bandwidth=40Gbit/s,host_latency=5us,"
                                  "uplink_latency=5us", "--flows", str(good), "--nic", "25Gbps"),
        ok("size (B)"))
    add("units/gossip-ok", dtsim("gossip", "--replications", "1", "--protocol", "async",
                                 "--rounds", "2", "--topology", "ring:n=8,bandwidth=1MB/s,"
                                 "latency=1ms", "--size", "250kB", "--nic", "2MB/s"),
        ok("units: --size 250kB"))
    add("units/pipeline-ok", dtsim("pipeline", "--replications", "1", "--microbatches", "100",
                                   "--stage-time", "1", "--transfer-size", "20MB", "--bandwidth",
                                   "1GB/s", "--latency", "5ms"), ok("transfers: --transfer-size"))
    fleet = w("units/fleet-ok.json",
              '{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "z", "count": 2}], '
              f'"links": [{{"src": {end}, "dst": {end}, "bandwidth": "100Gbit/s", '
              '"latency": "5us"}]}\n')
    add("units/plan-fleet-ok", dtsim(*P, str(fleet), "--top", "1"), ok("predicted"))
    return cases


def _has_option(command: str, option: str) -> bool:
    """True when ``dtsim COMMAND`` has ``option`` (read from its module's source)."""
    try:
        import sim.commands as commands
    except ImportError:
        return False
    f = Path(commands.__file__).parent / f"{command}.py"
    return f.is_file() and f'"{option}"' in f.read_text()


def _has_command(name: str) -> bool:
    try:
        import sim.commands as commands
    except ImportError:
        return False
    return (Path(commands.__file__).parent / f"{name}.py").is_file()


# ----------------------------------------------------------------------------- running


def _limit_memory() -> None:
    os.setsid()
    # a case starts as from a terminal, with Ctrl-C at its default disposition: a process
    # that ignores SIGINT (a pytest-xdist worker, where the slow test of the whole table
    # runs) passes that on to its children, and Python started so never sees the Ctrl-C
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


#: Working folder of the cases (the scratch folder while the table runs), so a
#: ``python -m sim`` there imports the installed ``sim`` (or PYTHONPATH's).
_CWD: list[str] = [tempfile.gettempdir()]


def _spawn(case: Case) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "default"  # show every warning the command would let through
    env["COLUMNS"] = "200"
    return subprocess.Popen(case.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, cwd=case.cwd or _CWD[0], env=env,
                            preexec_fn=_limit_memory, text=True, errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait(proc: subprocess.Popen, deadline: float) -> tuple[int | None, str, str, bool]:
    try:
        out, err = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        return None, out, err, True


def _err_lines(err: str) -> list[str]:
    """The non-empty lines of stderr (a progress bar's carriage returns split lines too)."""
    return [ln.strip() for ln in err.replace("\r", "\n").splitlines() if ln.strip()]


def _last_line(err: str) -> str:
    lines = _err_lines(err)
    return lines[-1] if lines else ""


#: Files the probes of sim.errors write and remove at once (never left behind).
_PROBE = ".dtsim-probe-"


def snapshot(root: str | Path) -> dict[str, tuple[int, int]]:
    """``relative path -> (size, mtime_ns)`` of every file and folder below ``root``.

    Folders map to ``(-1, 0)`` (their times change when a probe file comes
    and goes); what a case creates, removes or rewrites shows as a difference.
    """
    out: dict[str, tuple[int, int]] = {}
    root = str(root)
    for dirpath, _dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out[rel + "/"] = (-1, 0)
        for f in filenames:
            if f.startswith(_PROBE):
                continue
            p = os.path.join(dirpath, f)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """What differs between two :func:`snapshot` s: ``+new``, ``-gone``, ``~changed``."""
    out = [f"+{k}" for k in after if k not in before]
    out += [f"-{k}" for k in before if k not in after]
    out += [f"~{k}" for k in after if k in before and after[k] != before[k]]
    return sorted(out)


def _names(last: str, param: str) -> bool:
    """True when ``last`` names ``param`` (``a|b``: either) as ConfigError or argparse does."""
    if "|" in param:
        return any(_names(last, p) for p in param.split("|"))
    low = last.lower()
    forms = {param, param.replace("_", "-"), param.replace("-", "_")}
    return any(f"'{f.lower()}'" in low or f"--{f.lower()}" in low
               or f"argument {f.lower()}:" in low for f in forms)


_ALARMS = ("Traceback", "Warning:", "warnings.warn", "CommClosedError", "Exception ignored",
           "Task exception was never retrieved")


def judge(case: Case, status: int | None, out: str, err: str, hang: bool, *,
          cpu: float | None = None, changed: Sequence[str] = ()) -> tuple[str, str]:
    """The verdict of one run and a short detail.

    ``cpu`` is the CPU seconds the command took and ``changed`` what it
    created or changed in the scratch folder (:func:`changes`); a refusal
    must show no work: one line on stderr, nothing on stdout, no file, no
    progress bar, little CPU.
    """
    last = _last_line(err)
    lines = _err_lines(err)
    if hang:
        return "hang", f"no answer in {case.timeout:g} s"
    if "Traceback" in err:
        return "traceback", ""
    kind = case.expect.kind
    if kind == "refuse":
        if status == 0:
            return "silent ignore", "exit 0"
        if status != 2:
            return "wrong exit", f"exit {status}"
        if not _names(last, case.expect.text):
            return "wrong parameter", f"wanted {case.expect.text!r}"
        if len(lines) != 1:
            return "not one line", f"{len(lines)} lines on stderr"
        if out.strip():
            return "work done", f"printed on stdout: {out.strip().splitlines()[0][:60]!r}"
        if "%|" in err or "it/s]" in err:
            return "work done", "a progress bar"
        if changed and not case.allow_work:
            return "work done", f"files: {', '.join(changed[:3])}" + (
                f" (+{len(changed) - 3})" if len(changed) > 3 else "")
        limit = REFUSE_CPU if case.cpu_limit is None else case.cpu_limit
        if cpu is not None and cpu > limit and not case.allow_work:
            return "work done", f"{cpu:.1f} s of CPU (a refusal takes at most {limit:g})"
        return "pass", ""
    if kind == "fail":
        if status != 1:
            return "wrong exit", f"exit {status}, wanted 1"
        if case.expect.text.lower() not in last.lower():
            return "wrong parameter", f"wanted {case.expect.text!r}"
        if len(lines) != 1:
            return "not one line", f"{len(lines)} lines on stderr"
        return "pass", ""
    if kind == "interrupt":
        if status != 130:
            return "wrong exit", f"exit {status}, wanted 130"
        if case.expect.text not in last:
            return "unexpected output", last
        return "pass", ""
    # ok (and bench, whose exit 1 reports a missed speed target in one line)
    if kind == "bench" and status == 1 and "target(s) missed" in last:
        status = 0
        err = err.replace(last, "")
    if status != 0:
        return "wrong exit", f"exit {status}, wanted 0"
    alarm = next((a for a in _ALARMS if a in err), None)
    if alarm:
        return "noisy stderr", alarm
    if case.expect.text and case.expect.text not in out:
        return "unexpected output", f"{case.expect.text!r} not on stdout"
    return "pass", ""


def run_case(case: Case) -> Outcome:
    """Run one case (several synchronised copies for a race) and judge it.

    A refusal judged "work done" on its CPU time alone is run once more: on a
    loaded machine the CPU time of an import varies, and a refusal that really
    works before refusing takes the time again.
    """
    o = _run_case(case)
    if o.verdict == "work done" and "of CPU" in o.detail and not o.changed:
        o = _run_case(case)
    return o


def _run_case(case: Case) -> Outcome:
    t0 = time.monotonic()
    if case.parallel > 1:
        return _run_race(case, t0)
    root = _CWD[0]
    before = snapshot(root) if case.expect.kind == "refuse" else {}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = _spawn(case)
    deadline = t0 + case.timeout
    if case.interrupt_after is not None:
        try:
            proc.wait(timeout=case.interrupt_after)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
    status, out, err, hang = _wait(proc, deadline)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    changed = changes(before, snapshot(root)) if case.expect.kind == "refuse" else []
    verdict, detail = judge(case, status, out, err, hang, cpu=cpu, changed=changed)
    made = [p for p in case.must_not_exist if os.path.exists(p)]
    if made and verdict == "pass":
        verdict, detail = "ran code from data", f"created {made[0]}"
    return Outcome(case, status, _last_line(err), "Traceback" in err, hang,
                   time.monotonic() - t0, verdict, detail, cpu=cpu, lines=len(_err_lines(err)),
                   changed=changed)


def _run_race(case: Case, t0: float) -> Outcome:
    # Every copy imports the CLI first, then waits for the same wall-clock
    # instant (a barrier) and runs the command in-process, so import times do
    # not spread the starts: they reach the new folder within a millisecond.
    start = time.time() + 6.0
    argv = list(case.argv)
    assert argv[:3] == [sys.executable, "-m", "sim"], "a race runs a dtsim command"
    wrapped = [sys.executable, "-c",
               "import sys, time\n"
               "from sim.cli import main\n"
               f"time.sleep(max(0.0, {start!r} - time.time()))\n"
               "sys.exit(main(sys.argv[1:]))\n", *argv[3:]]
    procs = [_spawn(Case(case.id, wrapped, case.expect, cwd=case.cwd)) for _ in range(case.parallel)]
    deadline = t0 + case.timeout
    results = [_wait(p, deadline) for p in procs]
    statuses = [r[0] for r in results]
    errs = [r[2] for r in results]
    tb = any("Traceback" in e for e in errs)
    hang = any(r[3] for r in results)
    lasts = [_last_line(e) for e in errs]
    if hang:
        verdict, detail = "hang", ""
    elif tb:
        verdict, detail = "traceback", f"{sum('Traceback' in e for e in errs)} of {case.parallel}"
    elif 0 not in statuses:
        verdict, detail = "wrong exit", f"no run finished: {statuses}"
    elif any(s not in (0, 2) for s in statuses):
        verdict, detail = "wrong exit", f"statuses {statuses}"
    elif any(s == 2 and not _names(ln, "out") for s, ln in zip(statuses, lasts, strict=True)):
        verdict, detail = "wrong parameter", "a refusal that does not name 'out'"
    else:
        verdict, detail = "pass", f"{statuses.count(0)} ran, {statuses.count(2)} refused"
    shown = next((ln for s, ln in zip(statuses, lasts, strict=True) if s != 0), lasts[0])
    return Outcome(case, None if hang else max(s or 0 for s in statuses), shown, tb, hang,
                   time.monotonic() - t0, verdict, detail, statuses)


# ----------------------------------------------------------------------------- report

SILENT, WRONG = "silent ignore", "wrong parameter"


def totals(outcomes: Sequence[Outcome]) -> dict[str, int]:
    """Counts of the table: cases, passed, failed, tracebacks, hangs, silent ignores, ..."""
    return {
        "cases": len(outcomes),
        "passed": sum(o.verdict == "pass" for o in outcomes),
        "failed": sum(o.verdict != "pass" for o in outcomes),
        "tracebacks": sum(o.traceback for o in outcomes),
        "hangs": sum(o.hang for o in outcomes),
        "silent ignores": sum(o.verdict == SILENT for o in outcomes),
        "wrong parameter names": sum(o.verdict == WRONG for o in outcomes),
        "other failures": sum(o.verdict not in ("pass", SILENT, WRONG, "traceback", "hang")
                              for o in outcomes),
    }


def _cmd_text(case: Case, fx_root: str) -> str:
    argv = list(case.argv)
    if argv[:3] == [sys.executable, "-m", "sim"]:
        text = "dtsim " + " ".join(_quote(a) for a in argv[3:])
    elif argv[:2] == [sys.executable, "-c"] and len(argv) == 4:
        text = "python: " + " ".join(argv[3].split())
    else:
        text = " ".join(_quote(a) for a in argv)
    if case.parallel > 1:
        text = f"{case.parallel} x at one instant: " + text
    return text.replace(fx_root, "$TMP")


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_./:=,+" for c in a) else repr(a)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_markdown(outcomes: Sequence[Outcome], path: Path, fx_root: str, mountable: bool) -> None:
    """docs/bad_inputs.md: the totals and one row per case."""
    t = totals(outcomes)
    lines = [
        "# Bad inputs and faults: what every command does",
        "",
        "Written by `python tools/bad_inputs.py` (do not edit by hand). Each row is one "
        "bad input or fault; the verdict is `pass` when the command did what the row "
        "expects: **refuse** = exit 2 with exactly one stderr line naming the parameter "
        "(`'param' must be <rule>: <value>`) and no sign of work (nothing on stdout, no file "
        f"created or changed in the scratch folder, no progress bar, at most {REFUSE_CPU:g} s "
        "of CPU), **fail** = exit 1 in one stderr line after keeping "
        "what finished, **ok** = exit 0 with a clean stderr, **interrupt** = Ctrl-C "
        "stops it in one line (exit 130). `$TMP` is the audit's scratch folder; "
        + ("read-only and full locations are small tmpfs mounts." if mountable else
           "read-only locations are paths below a regular file and the full disk is "
           "/dev/full (no mounts here).")
        + f" Every case runs under a {MEMORY_LIMIT / 2**30:g} GiB address-space limit "
        "(RLIMIT_AS), which the memory estimates count as what is available.",
        "",
        "| total | count |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {v} |" for k, v in t.items()]
    lines += ["", "| case | command | expected | exit | seconds | CPU s | last stderr line "
              "| traceback | verdict |", "|---|---|---|---:|---:|---:|---|---|---|"]
    for o in outcomes:
        exp = o.case.expect
        want = exp.kind + (f" `{exp.text}`" if exp.text else "")
        status = "hang" if o.hang else ("" if o.status is None else str(o.status))
        if o.statuses:
            status = ",".join("-" if s is None else str(s) for s in o.statuses)
        last = o.last.replace(fx_root, "$TMP")
        if len(last) > 160:
            last = last[:157] + "..."
        verdict = o.verdict + (f" ({o.detail})" if o.detail and o.verdict != "pass" else "")
        cpu = "" if o.cpu is None else f"{o.cpu:.1f}"
        lines.append(f"| {o.case.id} | `{_cell(_cmd_text(o.case, fx_root))}` | {want} | {status} "
                     f"| {o.seconds:.1f} | {cpu} | {_cell(last)} | {'yes' if o.traceback else 'no'} "
                     f"| {_cell(verdict)} |")
    notes = [o for o in outcomes if o.case.note]
    if notes:
        lines += ["", "Notes:", ""]
        lines += [f"- {o.case.id}: {o.case.note}" for o in notes]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


@contextlib.contextmanager
def fixtures() -> Iterator[Fixtures]:
    """The audit's scratch folder and mounts, removed afterwards."""
    fx = Fixtures()
    previous = signal.signal(signal.SIGTERM, _terminate)
    _CWD[0] = str(fx.root)
    try:
        yield fx
    finally:
        fx.close()
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwind, so the mounts and the scratch folder are removed


def run_cases(select: Callable[[Case], bool] = lambda c: True, *,
              log: Callable[[str], None] | None = None) -> tuple[list[Outcome], Fixtures]:
    """Run the selected cases; return their outcomes (fixtures already removed)."""
    outcomes = []
    with fixtures() as fx:
        if any(select(c) and "existing-results" in c.id for c in build_cases(fx)):
            fx.make_ro_results()
        if any(select(c) and str(fx.planted.parent) in " ".join(c.argv) for c in build_cases(fx)):
            fx.make_planted()
        tables = [str(t) for t in fx.long_tables.values()]
        if any(select(c) and any(t in c.argv for t in tables) for c in build_cases(fx)):
            fx.make_long_tables()
        for case in build_cases(fx):
            if not select(case):
                continue
            o = run_case(case)
            outcomes.append(o)
            if log is not None:
                log(f"{o.verdict:17s} {o.seconds:6.1f}s  {case.id}: {o.last[:110]}")
    return outcomes, fx


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=None, metavar="TEXT",
                    help="run the cases whose id contains TEXT (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the cases, do not run them")
    ap.add_argument("--doc", default=str(DOC), help=f"markdown table to write (default {DOC})")
    args = ap.parse_args(argv)

    def select(c: Case) -> bool:
        return not args.only or any(t in c.id for t in args.only)

    if args.list:
        with fixtures() as fx:
            for c in build_cases(fx):
                if select(c):
                    print(f"{c.id}: {_cmd_text(c, str(fx.root))} -> {c.expect.kind} {c.expect.text}")
        return 0
    outcomes, fx = run_cases(select, log=lambda s: print(s, flush=True))
    if not args.only:
        write_markdown(outcomes, Path(args.doc), str(fx.root), fx.mountable)
        print(f"wrote {args.doc}")
    t = totals(outcomes)
    print(", ".join(f"{k} {v}" for k, v in t.items()))
    return 0 if t["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

