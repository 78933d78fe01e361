"""Suite-wide setup: under pytest-xdist, the workers share the cold compilation of the kernels.

The numba kernels (``sim.training.kernel``, ``sim.gossip.kernel``,
``sim.gossip.edge_kernel``) are compiled with ``cache=True``: a process loads a
kernel from numba's on-disk cache when an earlier process has written it. On a
fresh clone the cache is empty, and every xdist worker compiled every kernel
itself the first time one of its tests needed it (tens of seconds of CPU per
kernel family per worker). Here, once the workers have collected (so the
scheduler already hands tests to the others), worker ``gwK`` of ``N`` compiles the
families ``K, K + N, ...`` among those the collected tests use, so each family is
compiled once and the other workers load it from the cache when their tests
reach it (a test whose configs need another specialisation of a kernel, other
argument types, still compiles that one itself). Nothing a test checks changes:
the kernels are the same, only which process compiles them first. Without
xdist, or without numba, this does nothing. It also compiles dtsim's modules
to bytecode once per run (see ``pytest_configure``).

The property tests (hypothesis) run one fixed set of examples: the profile
``dtsim`` derandomizes them (examples drawn from a seed of each test's own) and
keeps no example database, so a run on any machine draws what CI draws.

It also gives the tests ``plain_python``, which runs a kernel's logic as plain
Python (numba's JIT off) in a fresh interpreter: the default suite checks the
training kernel (whose compilation costs about 90 s of CPU) and the network
loop that way and leaves their compiled binaries to the ``slow`` tests.
"""

from __future__ import annotations

import os

import pytest

try:  # the property tests' examples: the same on every run (a fixed seed, no database)
    from hypothesis import settings as _hyp_settings
except ImportError:  # hypothesis is a dev dependency; without it no test uses it
    pass
else:
    _hyp_settings.register_profile("dtsim", derandomize=True, database=None)
    _hyp_settings.load_profile("dtsim")


def _training_kernel() -> None:
    from sim.engines import select
    from sim.rng import Streams
    from sim.training import TrainingConfig

    cfg = TrainingConfig(stages=2, replicas=2, microbatches=4, steps=1, schedule="swarm",
                         routing="queue", sync="none")
    select("training", cfg, "compiled").engine.run(cfg, Streams(0).replication(0))


def _gossip_kernel(protocol: str) -> None:
    from sim.gossip import GossipConfig, gossip_model
    from sim.rng import Streams

    gossip_model(GossipConfig(nodes=10, protocol=protocol, rounds=2, engine="compiled"),
                 Streams(0).replication(0))


def _async_kernel() -> None:
    _gossip_kernel("async")


def _edge_kernel() -> None:
    _gossip_kernel("edge")


def _network_kernel() -> None:
    # the compiled flow engine (every NetworkService and exchange), the planner's cut and the
    # traced program evaluation: about 25 s of CPU to compile on a fresh clone
    import numpy as np

    from sim.analytic.training import program_makespan
    from sim.network import build_network
    from sim.network.kernel import CompiledFlowEngine
    from sim.planner.cut import RowBank, StageTable, greedy_cut_stages
    from sim.training.schedules import device_program

    net = build_network("ring:n=4,latency=0.1,bandwidth=2", nic=1.0)
    eng = CompiledFlowEngine(net, flows=1)
    eng.add(0, 1, 1.0, 0.0)
    eng.advance_times(0.5)
    eng.cancel(0)
    eng.exchanger(1.0, 2)(3, 1.0)
    eng.exchanges_done(9.0)
    eng.rates()
    eng.utilisation(1.0)
    bank, table = RowBank(3), StageTable()
    sid = table.add([bank.id(0, [0.0, 1.0, 2.0])], [bank.id(1, [0.0, 1.0, 1.0])], [5.0])
    greedy_cut_stages(bank.rows, table.bounds, table.crow, table.mrow, table.mcap,
                      np.array([sid, sid]), 2, np.empty(3, dtype=np.int64))
    progs = [device_program("1f1b", 2, 64, j, blocking=True) for j in range(2)]
    program_makespan(progs, [1.0, 1.0], [2.0, 2.0], [0.1], [0.1], blocking=True)


def _uses_network_kernel(item) -> bool:
    return any(word in item.path.name for word in (
        "network", "gossip", "training", "plan", "profiles", "cli", "bench", "experiment",
        "pipeline", "analytic"))


def _uses_training_kernel(item) -> bool:
    # the default suite runs this kernel's logic as plain Python (``plain_python``); only the
    # slow tests of these files run the compiled kernel
    return (item.path.name in ("test_training_compiled.py", "test_bench.py")
            and item.get_closest_marker("slow") is not None)


def _uses_gossip_kernels(item) -> bool:
    return "gossip" in item.path.name or item.path.name == "test_bench.py"


#: One entry per kernel family, the most expensive first, with which collected tests use it.
KERNEL_FAMILIES = (
    (_training_kernel, _uses_training_kernel),  # about 90 s
    (_network_kernel, _uses_network_kernel),  # about 25 s
    (_async_kernel, _uses_gossip_kernels),  # about 15 s of CPU on this machine
    (_edge_kernel, _uses_gossip_kernels),  # about 15 s (edge_chunk, which compiles edge_steps)
)


def pytest_configure(config) -> None:
    """Once per run, in the first process: dtsim's modules compiled to bytecode.

    Python caches a module's bytecode in ``__pycache__`` unless told not to
    (``PYTHONDONTWRITEBYTECODE``, set on this project's machines); a cache
    present is read either way. Without one, each of the suite's ~100 Python
    subprocesses (the CLI runs, the local pool's workers, the kernels as plain
    Python) recompiles every dtsim module it imports (about 0.4 s of CPU each).
    This writes what a plain ``python`` run would have written; it changes no
    code and no number.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller (or the only process) has done it
    import compileall
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for package in ("sim", "topologies", "experiments"):
        compileall.compile_dir(root / package, quiet=2, workers=1)
    if getattr(config.option, "numprocesses", None) and config.getoption("assertmode") == "rewrite":
        tests = Path(__file__).resolve().parent
        files: set[Path] = set()
        for arg in config.args:  # the test files this run collects (by default, all)
            path = (Path(config.invocation_params.dir) / arg.split("::")[0]).resolve()
            if path.is_dir() and (path == tests or tests in path.parents or path in tests.parents):
                files.update(tests.glob("test_*.py"))
            elif path.suffix == ".py" and path.parent == tests and path.is_file():
                files.add(path)
        if files:
            _rewrite_tests_once(sorted(files) + [tests / "conftest.py"])


#: Rewrites the asserts of the test files named on its command line and writes pytest's
#: cache of the rewritten code (the ``.pyc`` pytest itself writes and reads in
#: ``__pycache__``), unless a valid one is there.
_REWRITE_CHILD = """
import sys
from pathlib import Path
from _pytest.assertion import rewrite

class _State:
    def trace(self, message):
        pass

for name in sys.argv[1:]:
    fn = Path(name)
    pyc = rewrite.get_cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
    if rewrite._read_pyc(fn, pyc) is None and rewrite.try_makedirs(pyc.parent):
        rewrite._write_pyc(_State(), *reversed(rewrite._rewrite_test(fn, None)), pyc)
"""


def _rewrite_tests_once(files) -> None:
    """Under xdist, the test files' asserts rewritten once, split over two processes.

    Every xdist worker imports every test file, and pytest rewrites its asserts
    (to report the values of a failing one) on import: about 10 s of CPU per
    worker for this suite. pytest caches the rewritten code in ``__pycache__``
    unless bytecode writing is off (``PYTHONDONTWRITEBYTECODE``, set on this
    project's machines) and reads a cache present either way; on a fresh clone
    there is none and each worker rewrites everything. Here the controller
    writes that cache first, in two processes, with pytest's own functions and
    file names (the code is the same, only who rewrites it; a cache pytest
    finds stale or cannot read is rewritten as before). It uses pytest's
    private ``_pytest.assertion.rewrite`` module: on any failure the workers
    simply rewrite as they did without it.
    """
    import subprocess
    import sys

    files = sorted(files, key=lambda f: f.stat().st_size, reverse=True)
    halves: list[list[str]] = [[], []]
    sizes = [0, 0]
    for f in files:  # largest first, each to the lighter half
        k = sizes.index(min(sizes))
        halves[k].append(str(f))
        sizes[k] += f.stat().st_size
    procs = [subprocess.Popen([sys.executable, "-c", _REWRITE_CHILD, *half],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for half in halves if half]
    for proc in procs:
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session) -> None:
    """Before a worker's first test (after collection, so the others are already running)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or session.config.option.collectonly:
        return
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    needed = [family for family, uses in KERNEL_FAMILIES if any(map(uses, session.items))]
    k = int(worker[2:])
    n = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    for family in needed[k::n]:
        try:
            family()
        except Exception:  # a broken kernel fails in its own tests, not here
            pass


# --------------------------------------------------------------------------- kernels as plain Python

_PLAIN_CHILD = """
import pickle, sys
import numpy as np
np.seterr(over="ignore")  # xoshiro's uint64 products wrap, as they do in the compiled kernels
calls = pickle.load(sys.stdin.buffer)
pickle.dump([fn(*args, **kwargs) for fn, args, kwargs in calls], sys.stdout.buffer)
"""


def run_plain_python(calls):
    """Run ``calls`` (``(function, args, kwargs)`` triples) with numba's JIT off; their results.

    The kernels' logic is then plain Python: the same statements, draws and
    arithmetic as the compiled kernels (numba compiles these functions without
    fast-math, so each operation is the same IEEE operation), without the cold
    compilation (tens of seconds of CPU per kernel family on a fresh clone).
    The default suite checks the kernels' logic this way; the ``slow`` tests
    check the compiled binaries themselves. A fresh interpreter is needed
    because numba reads ``NUMBA_DISABLE_JIT`` when a function is decorated,
    that is, when its module is first imported.
    """
    import pickle
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    done = subprocess.run([sys.executable, "-c", _PLAIN_CHILD], input=pickle.dumps(calls),
                          capture_output=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode(errors="replace")[-4000:])
    return pickle.loads(done.stdout)


@pytest.fixture(scope="session")
def plain_python():
    """:func:`run_plain_python`, for tests of the numba kernels' logic without compiling them."""
    return run_plain_python


def tie_model(profiles, name):
    """``profiles`` with model ``name`` made a tied model: its output head shares the word
    embedding (a profile with ``tied_embeddings: true``, as Megatron-DeepSpeed's GPTModelPipe
    or Megatron-LM's GPT without --untie-embeddings-and-output-weights build it). The tied
    weight is the first layer less its learned position embedding (sequence x hidden values,
    not split over TP: the first layer's output per sample). The shipped profiles' models are
    untied as the Sailor artifact builds them (sim.profiles.sailor.ties_embeddings)."""
    from dataclasses import replace

    m = profiles.model(name)
    tied = tuple((tp, row[0].params - round(row[0].activation_bytes / m.bytes_per_value))
                 for tp, row in m.sizes)
    models = tuple(replace(x, tied_embeddings=True, tied_params=tied) if x.name == name else x
                   for x in profiles.models)
    return replace(profiles, models=models)


@pytest.fixture(scope="session")
def tie():
    """:func:`tie_model`: a shipped profile's model as a tied one, for tests of the tied
    all-reduce."""
    return tie_model


def write_tied_profiles(folder, name):
    """A profiles folder (``folder``, created) holding the shipped network and model ``name``
    as a tied model (:func:`tie_model`) in dtsim's model format, for ``--profiles``."""
    import json
    import shutil
    from pathlib import Path

    from sim.profiles import load_profiles
    from sim.profiles.formats import DATA_DIR, model_to_data

    d = Path(folder)
    (d / "models").mkdir(parents=True, exist_ok=True)
    for f in ("bandwidths.json", "intra_node_bandwidths.json"):
        shutil.copy(DATA_DIR / f, d / f)
    m = tie_model(load_profiles(models=(name,)), name).model(name)
    (d / "models" / f"{name}.json").write_text(json.dumps(model_to_data(m)))
    return d


@pytest.fixture(scope="session")
def tied_profiles_folder(tmp_path_factory):
    """A profiles folder whose OPT-350 is tied (:func:`write_tied_profiles`)."""
    return write_tied_profiles(tmp_path_factory.mktemp("tied") / "profiles", "OPT-350")
