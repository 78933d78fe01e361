"""Timelines (sim.timeline, --timeline): the engines' own events, in the Trace Event Format.

The events are checked against references the engines do not share: the max-plus schedule of
the frameworks' programs, ``dtsim network``'s finish times, the failure model's own clocks and
an independent listener, a replayed trace's intervals; every file against the format; every
run's numbers against the same run without a recorder.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from sim.analytic.training import program_makespan
from sim.cli import main
from sim.errors import ConfigError
from sim.rng import Streams
from sim.timeline import NULL, Recorder, gantt, parse_window, read_timeline, validate
from sim.training import TrainingConfig, TrainingSystem, training_model
from sim.training.schedules import device_program

US = 1e6
UNEQUAL = dict(stages=4, microbatches=6, steps=2, forward_time=(2.9, 0.6, 1.1, 1.8),
               backward_times=(3.0, 1.4, 0.7, 2.2), latency=(0.3, 0.05, 0.2), sync="none")


def _x(trace: dict, cat: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X" and (cat is None or e["cat"] == cat)]


def _record(cfg: TrainingConfig, seed: int = 0) -> tuple[dict, dict]:
    rec = Recorder()
    metrics = training_model(cfg, Streams(seed).replication(0), recorder=rec)
    trace = rec.trace()
    assert validate(trace) == []
    return metrics, trace


# ----------------------------------------------------------------------------- the engines' own events


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_passes_equal_the_max_plus_schedule(schedule):
    """GPipe and fixed-order 1F1B, unequal stages and hops: every pass's start and end in the
    file equal the max-plus schedule's (program_makespan) to 1e-9, in both steps."""
    cfg = TrainingConfig(schedule=schedule, **UNEQUAL)
    tf, tb = cfg.forward_time, cfg.backward_time
    done: dict = {}
    T = program_makespan([device_program(schedule, 4, 6, j) for j in range(4)], list(tf),
                         list(tb), list(cfg.hop_times), list(cfg.hop_times_back), finish=done)
    metrics, trace = _record(cfg)
    assert metrics["step_time_mean"] == pytest.approx(T, abs=1e-9)
    starts = {e["args"]["step"]: e["ts"] / US for e in _x(trace, "step")}
    assert starts == pytest.approx({0: 0.0, 1: T}, abs=1e-9)
    passes = _x(trace, "compute")
    assert len(passes) == 2 * 2 * 6 * 4
    worst = 0.0
    for e in passes:
        a = e["args"]
        kind = "F" if e["name"] == "forward" else "B"
        end = starts[a["step"]] + done[(kind, a["stage"], a["microbatch"])]
        dur = (tf if kind == "F" else tb)[a["stage"]]
        assert e["pid"] == trace_pid(trace, f"s{a['stage']}r0")
        worst = max(worst, abs((e["ts"] + e["dur"]) / US - end), abs(e["ts"] / US - (end - dur)))
    assert worst < 1e-9


def _fifo_law(done: dict, S: int, p: int, act, grad) -> dict:
    """Every transfer's (sent, start, arrival) by the FIFO channel law, from the reference's
    pass ends: a pass's output is sent as it ends and, per channel (sending device, receiving
    device), starts when the one sent before it has arrived, then takes its hop's time."""
    sends = []
    for (kind, s, i), t in done.items():
        if kind == "F" and s < S - 1:
            sends.append((t, "a", s, i, s % p, (s + 1) % p, act[s]))
        elif kind == "B" and s > 0:
            sends.append((t, "g", s - 1, i, s % p, (s - 1) % p, grad[s - 1]))
    last: dict = {}
    out = {}
    for t, tag, h, i, a, b, d in sorted(sends):
        start = max(t, last.get((a, b), t))
        last[(a, b)] = start + d
        out[(tag, h, i)] = (t, start, start + d)
    return out


def _transfers(trace: dict, offset: float = 0.0) -> tuple[dict, dict]:
    """The sender's transfer spans and queue spans by (tag, hop, microbatch), in time units
    from ``offset``."""
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    moved, queued = {}, {}
    for e in _x(trace):  # on the sender's send thread (spread over lanes "send", "send 2"...)
        if (e["cat"] not in ("transfer", "queue")
                or threads[(e["pid"], e["tid"])].split()[0] != "send"):
            continue
        a = e["args"]
        grad = e["name"].startswith("gradient")
        key = ("g" if grad else "a", a["stage"] if grad else a["stage"] - 1, a["microbatch"])
        span = (e["ts"] / US - offset, (e["ts"] + e["dur"]) / US - offset)
        (queued if e["cat"] == "queue" else moved)[key] = span
    return moved, queued


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_transfers_on_fifo_channels_equal_the_max_plus_schedule(schedule):
    """Over a network of one link per hop, hops longer than the passes: transfers queue on
    their FIFO channels (p2p overlap, the default). Every pass equals the max-plus schedule
    with channels (1e-9), which the schedule without channels misses; every transfer moves
    from when it leaves its channel's queue to its arrival, and its wait there is a queue span
    from the pass that sent it: both as the FIFO law gives them from the reference's passes."""
    from sim.network import LinkValue, NetworkValue

    L, m, A = 4, 6, 1.2
    f, b = (0.5, 0.3, 0.6, 0.4), (1.0, 0.5, 0.8, 0.9)
    bw, lat = (0.5, 2.0, 0.8), (0.05, 0.1, 0.02)
    d = [lat[j] + A / bw[j] for j in range(L - 1)]
    chain = NetworkValue(tuple(LinkValue(f"h{j}", f"h{j + 1}", bandwidth=bw[j], latency=lat[j])
                               for j in range(L - 1)))
    cfg = TrainingConfig(stages=L, microbatches=m, steps=2, schedule=schedule, forward_time=f,
                         backward_times=b, activation_size=A, network=chain,
                         network_nodes=tuple((f"h{j}",) for j in range(L)), sync="none")
    progs = [device_program(schedule, L, m, j) for j in range(L)]
    done: dict = {}
    began: dict = {}
    T = program_makespan(progs, list(f), list(b), d, d, finish=done, starts=began)
    assert T > program_makespan(progs, list(f), list(b), d, d, channels=False) + 0.5
    metrics, trace = _record(cfg)
    assert metrics["step_time_mean"] == pytest.approx(T, abs=1e-9)
    passes = _x(trace, "compute")
    assert len(passes) == 2 * 2 * m * L
    for e in passes:
        a = e["args"]
        key = ("F" if e["name"] == "forward" else "B", a["stage"], a["microbatch"])
        t = a["step"] * T
        assert e["ts"] / US - t == pytest.approx(began[key], abs=1e-9)
        assert (e["ts"] + e["dur"]) / US - t == pytest.approx(done[key], abs=1e-9)
    law = _fifo_law(done, L, L, d, d)
    waits = 0
    for step in range(2):
        steps = {e["args"]["step"]: e for e in _x(trace, "step")}
        step_trace = {**trace, "traceEvents": [e for e in trace["traceEvents"] if e["ph"] == "M"
                                               or (e.get("args") or {}).get("step") == step]}
        assert steps[step]["ts"] / US == pytest.approx(step * T, abs=1e-9)
        moved, queued = _transfers(step_trace, step * T)
        assert sorted(moved) == sorted(law)
        for key, (sent, start, arrival) in law.items():
            assert moved[key] == pytest.approx((start, arrival), abs=1e-9)
            if start > sent + 1e-9:  # (a wait under the file's 0.1 ns is no event)
                waits += 1
                assert queued[key] == pytest.approx((sent, start), abs=1e-9)
            else:
                assert key not in queued
        assert len(queued) == sum(1 for x in law.values() if x[1] > x[0] + 1e-9)
    assert waits >= 4


def test_framework_hops_on_fifo_channels_equal_the_max_plus_schedule():
    """The framework engine's closed form (interleaved 1F1B, the wrap-around hop sharing the
    last -> first channel): each hop moves from when its channel frees to its arrival, and
    waits there from the pass that sent it, as the FIFO law gives them (1e-9)."""
    L, v, m, h = 3, 2, 6, 2.0
    f = [0.3, 0.5, 0.2]
    cfg = TrainingConfig(stages=L, virtual_stages=v, microbatches=m, steps=1,
                         schedule="interleaved", forward_time=tuple(f), backward_ratio=2.0,
                         latency=h, sync="none")
    S = L * v
    progs = [device_program("interleaved", L, m, j, v=v) for j in range(L)]
    done: dict = {}
    hops = [h] * (S - 1)
    T = program_makespan(progs, [f[s % L] / v for s in range(S)],
                         [2 * f[s % L] / v for s in range(S)], hops, hops, finish=done)
    metrics, trace = _record(cfg)
    assert metrics["step_time_mean"] == pytest.approx(T, abs=1e-9)
    law = _fifo_law(done, S, L, hops, hops)
    moved, queued = _transfers(trace)
    assert sorted(moved) == sorted(law)
    for key, (sent, start, arrival) in law.items():
        assert moved[key] == pytest.approx((start, arrival), abs=1e-9)
        assert (key in queued) == (start > sent + 1e-9)
        if key in queued:
            assert queued[key] == pytest.approx((sent, start), abs=1e-9)
    assert queued


def test_overlapped_allreduce_buckets_are_the_ring_law_after_their_gradients():
    """sync allreduce:overlap=backward: each bucket of each stage's all-reduce is a span on every
    participant, starting when every participant's last backward of the step has produced it
    (evenly over the pass) and the bucket before is done, lasting the ring law (1e-9); the
    step ends with the last bucket (the optimizer step is 0)."""
    from sim.analytic import ring_allreduce_time
    from sim.analytic.training import bucket_ready_times
    from sim.training.traffic import gradient_buckets

    r, P, W, lat = 3, 60.0, 20.0, 0.05
    cfg = TrainingConfig(stages=2, replicas=r, microbatches=6, steps=2, schedule="1f1b",
                         routing="round-robin", forward_time=(1.0, 0.7), backward_ratio=2.0,
                         param_size=P, bandwidth=W, latency=lat,
                         sync="allreduce:overlap=backward,bucket_size=25")
    sizes = gradient_buckets(P, 25.0)
    assert len(sizes) == 3
    metrics, trace = _record(cfg)
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    buckets = [e for e in _x(trace, "collective") if e["name"] == "all-reduce bucket"]
    assert len(buckets) == 2 * 2 * len(sizes) * r  # steps x stages x buckets x participants
    ends = {e["args"]["step"]: (e["ts"] + e["dur"]) / US for e in _x(trace, "step")}
    for step in range(2):
        for j in range(2):
            last = {}  # each replica's last backward of the step: (start, duration)
            for e in _x(trace, "compute"):
                a = e["args"]
                if e["name"] == "backward" and a["step"] == step and a["stage"] == j:
                    last[a["replica"]] = max(last.get(a["replica"], (-1, 0)),
                                             (e["ts"] / US, e["dur"] / US))
            assert len(last) == r
            ready = [max(col) for col in zip(*(bucket_ready_times(t0, dt, sizes)
                                               for t0, dt in last.values()), strict=True)]
            mine = [e for e in buckets if e["args"]["step"] == step and e["args"]["stage"] == j]
            assert sorted({names[e["pid"]] for e in mine}) == [f"s{j}r{i}" for i in range(r)]
            end = -math.inf
            for bk, (rb, size) in enumerate(zip(ready, sizes, strict=True)):
                start = max(rb, end)
                end = start + ring_allreduce_time(r, size, W, lat)
                for e in (e for e in mine if e["args"]["bucket"] == bk):
                    assert e["args"]["bytes"] == size and e["args"]["participants"] == r
                    assert e["ts"] / US == pytest.approx(start, abs=1e-9)
                    assert (e["ts"] + e["dur"]) / US == pytest.approx(end, abs=1e-9)
            assert end <= ends[step] + 1e-9
        assert max((e["ts"] + e["dur"]) / US for e in buckets
                   if e["args"]["step"] == step) == pytest.approx(ends[step], abs=1e-9)


def trace_pid(trace: dict, name: str) -> int:
    return next(e["pid"] for e in trace["traceEvents"]
                if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == name)


def test_flow_ends_equal_dtsim_network_finish(tmp_path, capsys):
    """dtsim network --timeline: every flow's end (both ends of it) is the finish it prints,
    and every link counter stays in [0, 1]."""
    flows = tmp_path / "flows.csv"
    flows.write_text("src,dst,size,start\n0,5,100,0\n1,5,100,0\n2,30,50,1\n3,5,10,0.5\n"
                     "7,12,40,0.2\n")
    out = tmp_path / "net.json"
    assert main(["network", "--topology", "tree:racks=2,hosts=20", "--flows", str(flows),
                 "--nic", "30", "--json", "--timeline", str(out)]) == 0
    finish = json.loads(capsys.readouterr().out)["finish"]
    trace = read_timeline(out)
    ends: dict[int, list[float]] = {}
    for e in _x(trace, "transfer"):
        ends.setdefault(e["args"]["flow"], []).append((e["ts"] + e["dur"]) / US)
    assert sorted(ends) == list(range(len(finish)))
    for f, t in ends.items():
        assert len(t) == 2 and t == pytest.approx([finish[f]] * 2, abs=1e-9)  # 0.1 ns: the file
    util = [e["args"]["utilisation"] for e in trace["traceEvents"] if e["ph"] == "C"]
    assert util and all(-1e-12 <= u <= 1 + 1e-12 for u in util)
    assert max(util) == pytest.approx(1.0)  # the shared NIC is saturated


def _down(trace: dict) -> dict[str, list[tuple[float, float]]]:
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    out: dict[str, list[tuple[float, float]]] = {}
    for e in _x(trace, "failure"):
        out.setdefault(names[e["pid"]], []).append((e["ts"] / US, (e["ts"] + e["dur"]) / US))
    return {k: sorted(v) for k, v in out.items()}


def test_down_intervals_equal_the_failure_models():
    """Failures of workers and of their shared stage domains: the timeline's down intervals
    equal an independent listener's, their total equals the failure model's own clock
    (1 - availability) and their number its transitions."""
    cfg = TrainingConfig(stages=3, replicas=2, microbatches=4, steps=20, availability=0.8,
                         mean_downtime=3.0, domain_outage=0.05, domain_downtime=4.0,
                         schedule="swarm", forward_time=1.0, max_wait=100.0)
    rec = Recorder()
    sysm = TrainingSystem(cfg, Streams(5).replication(0), recorder=rec)
    seen: dict[str, list[tuple[float, bool]]] = {w.name: [] for w in sysm.workers}
    for w in sysm.workers:  # an independent listener of the failure model's transitions
        w.on_change(lambda comp, up, now: seen[comp.name].append((now, up)))
    metrics = sysm.run()
    assert metrics == training_model(cfg, Streams(5).replication(0), figures=False)
    trace = rec.trace()
    assert validate(trace) == []
    got = _down(trace)
    wall = sysm.env.now
    total = 0
    for w in sysm.workers:
        moves = seen[w.name]
        up0 = (not moves[0][1]) if moves else w.up  # the state before the first transition
        want, since = [], (None if up0 else 0.0)
        for t, up in moves:
            if up:
                want.append((since, t))
            else:
                since = t
        if not w.up:
            want.append((since, wall))
        assert _flat(got.get(w.name, [])) == pytest.approx(_flat(want), abs=1e-9)
        down = sum(b - a for a, b in got.get(w.name, []))
        assert down == pytest.approx(wall * (1 - w.availability(wall)), abs=1e-9)
        total += len(got.get(w.name, []))
    assert total > 20  # the run saw failures (domains included: causes name them)
    causes = {e["args"]["cause"] for e in _x(trace, "failure")}
    workers = {w.name for w in sysm.workers}
    assert causes & workers and causes - workers == {"stage0", "stage1", "stage2"}


def _flat(pairs: list) -> list[float]:
    return [x for p in pairs for x in p]


def test_down_intervals_equal_a_replayed_trace(tmp_path):
    """A failure trace replayed by worker name: the down intervals are the trace's own (the one
    still open at the end closes there, marked open), with the restarts they cause."""
    csv = tmp_path / "trace.csv"
    csv.write_text("worker,start,end\ns1r0,5.5,9.0\ns2r0,30.25,31.0\ns0r0,60.0,1000.0\n")
    cfg = TrainingConfig(stages=3, microbatches=4, steps=8, failure_trace=str(csv),
                         restart_cost=1.5, checkpoint_every=2, checkpoint_cost=0.5,
                         schedule="1f1b", max_time=200.0)
    metrics, trace = _record(cfg)
    got = _down(trace)
    assert got["s1r0"] == [(5.5, 9.0)] and got["s2r0"] == [(30.25, 31.0)]
    assert got["s0r0"] == [(60.0, 200.0)] and not metrics["finished"]  # open at the stop
    restarts = [e for e in _x(trace, "restart") if e["name"] == "restart"]
    assert len(restarts) == metrics["restarts"] >= 2
    assert len(_x(trace, "checkpoint")) == metrics["checkpoints"]
    lost_at = sorted({(e["ts"] + e["dur"]) / US for e in _x(trace, "compute")
                      if e["args"]["lost"]})
    assert lost_at and set(lost_at) <= {5.5, 30.25, 60.0}  # passes cut when a worker went down


LOST_RUNS = {
    "des": ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "4",
            "--steps", "5", "--mtbf", "20", "--replace-time", "5"],
    "framework": ["train", "--stages", "4", "--schedule", "1f1b", "--p2p", "blocking", "--latency", "3",
                  "--steps", "4", "--availability", "0.99", "--mean-downtime", "5",
                  "--restart-cost", "2"],
    "pipeline-des": ["pipeline", "--stages", "3", "--replicas", "2", "--microbatches", "60",
                     "--stage-time", "1", "--latency", "0.2", "--availability", "0.9",
                     "--skip-budget", "1", "--engine", "des"],
}


@pytest.mark.parametrize("engine", list(LOST_RUNS))
def test_a_lost_pass_says_so_in_its_name(engine, tmp_path):
    """docs/timeline.md: a pass cut by a failure is named ``forward (lost)`` or ``backward
    (lost)`` (cat ``compute``, ``args.lost`` true), so the viewer shows the lost work; every
    other pass is plain ``forward``/``backward``; ``gantt`` still draws it as its kind, lost.
    (Before, a lost pass was named like a completed one: only ``args.lost`` told them apart.)"""
    out = tmp_path / "t.json"
    assert main([*LOST_RUNS[engine], "--replications", "1", "--timeline", str(out),
                 "--quiet"]) == 0
    trace = read_timeline(out)
    assert validate(trace) == []
    passes = _x(trace, "compute")
    lost = [e for e in passes if e["args"]["lost"]]
    assert lost and len(lost) < len(passes)
    for e in passes:
        base = "forward" if e["name"].startswith("forward") else "backward"
        assert e["name"] == (base + " (lost)" if e["args"]["lost"] else base), e
    bars = [b for r in gantt(trace).rows for b in r.bars]
    assert sum(b.lost for b in bars) == len(lost)
    assert {b.kind for b in bars if b.lost} <= {"forward", "backward", "recompute"}


# ----------------------------------------------------------------------------- no number changes


CLI_RUNS = [
    ["train", "--stages", "3", "--microbatches-per-step", "4", "--steps", "3", "--schedule",
     "1f1b", "--forward-time", "1,2,1.5"],
    ["train", "--stages", "3", "--replicas", "2", "--microbatches-per-step", "6", "--steps", "6",
     "--schedule", "swarm", "--availability", "0.85", "--mean-downtime", "4", "--skip-budget",
     "1", "--pass-time-distribution", "exponential", "--mtbf", "40", "--replace-time", "3"],
    pytest.param(["train", "--stages", "2", "--microbatches-per-step", "4", "--steps", "5",
                  "--schedule", "gpipe", "--availability", "0.9", "--restart-cost", "2",
                  "--checkpoint-every", "2", "--checkpoint-cost", "0.5"], marks=pytest.mark.slow),
    ["train", "--stages", "2", "--replicas", "2", "--microbatches-per-step", "4", "--steps",
     "2", "--schedule", "1f1b", "--network", "tree:racks=2,hosts=2", "--nic", "5",
     "--activation-size", "2", "--param-size", "6", "--bucket-size", "2"],
    pytest.param(["train", "--stages", "2", "--replicas", "2", "--steps", "6", "--availability",
                  "0.9", "--strategy", "checkpoint-restart:every=2,checkpoint=0.5,restart=2"],
                 marks=pytest.mark.slow),
    ["pipeline", "--stages", "3", "--replicas", "2", "--microbatches", "60", "--stage-time",
     "1", "--latency", "0.2", "--availability", "0.9", "--skip-budget", "1"],
    ["gossip", "--protocol", "async", "--nodes", "6", "--rounds", "4", "--engine", "des"],
    # on a network: the recorded run takes the events path and the Python flow engine, the
    # plain one the merged path and the compiled engine (when numba is installed)
    ["gossip", "--protocol", "async", "--nodes", "6", "--rounds", "4", "--engine", "des",
     "--nic", "2"],
    ["gossip", "--protocol", "edge", "--nodes", "6", "--rounds", "30"],
    # DiLoCo: streaming and overlapped over a geo network (link loads), and vanilla with failures
    ["train", "--stages", "2", "--replicas", "4", "--microbatches-per-step", "4", "--steps",
     "8", "--schedule", "1f1b", "--param-size", "10", "--sync",
     "diloco:every=4,fragments=2,overlap=1", "--network",
     "geo:regions=4,hosts=2,inter_region_bandwidth=5,inter_region_latency=0.1"],
    ["train", "--stages", "1", "--replicas", "3", "--microbatches-per-step", "3", "--steps",
     "12", "--param-size", "10", "--bandwidth", "5", "--availability", "0.8",
     "--mean-downtime", "4", "--sync", "diloco:every=3"],
]
#: Keys of a payload that are measured wall time, not numbers of the run.
WALL = ("wall_time", "stage_crossings_per_second", "microbatches_per_second")


def _payload(capsys, argv):
    assert main([*argv, "--replications", "2", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    return {k: v for k, v in out.items() if k not in WALL}, cap.err


@pytest.mark.parametrize("argv", CLI_RUNS, ids=[
    "train-1f1b", "train-swarm-failures-spot", "train-gpipe-restarts", "train-network",
    "train-checkpoint-restart-strategy", "pipeline-des", "gossip-async",
    "gossip-async-network", "gossip-edge", "train-diloco-streaming-network",
    "train-diloco-failures"])
def test_writing_the_timeline_changes_no_number(argv, tmp_path, capsys):
    """The JSON payload is the same, bit for bit, with and without --timeline (the recorded
    rerun of replication 0 is checked equal to the first run's record by the command too);
    the file validates; the one line about it goes to stderr."""
    plain, _ = _payload(capsys, argv)
    out = tmp_path / "t.json"
    timed, err = _payload(capsys, [*argv, "--timeline", str(out)])
    assert json.dumps(plain, sort_keys=True) == json.dumps(timed, sort_keys=True)
    assert "timeline:" in err and str(out) in err
    trace = read_timeline(out)
    assert validate(trace) == [] and _x(trace)


def _named(trace: dict) -> list[tuple]:
    """(process, name, start, end) of every complete and instant event but passes, in order."""
    procs = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    return sorted((procs[e["pid"]], e["name"], e["ts"] / US, (e["ts"] + e.get("dur", 0)) / US)
                  for e in trace["traceEvents"] if e["ph"] in "Xi" and e["cat"] != "compute")


def _two_groups_down(tmp_path, rows: str) -> TrainingConfig:
    """Two DiLoCo groups of one worker (a step of 3, H = 2, N = 6, S = 10 over B = 5; a group
    back fetches the parameters alone, ``recovery=params``), s0r1 down over the trace's
    ``rows`` (``"start,end"`` per line)."""
    trace_file = tmp_path / "down.csv"
    trace_file.write_text("worker,start,end\n" + "".join(f"s0r1,{r}\n" for r in rows.split()))
    return TrainingConfig(stages=1, replicas=2, microbatches=2, steps=6, forward_time=1.0,
                          param_size=10.0, bandwidth=5.0, sync="diloco:every=2,recovery=params",
                          failure_trace=str(trace_file))


def test_diloco_events_are_the_hand_computed_schedule(tmp_path):
    """Two groups of one worker (a step of 3, H = 2, N = 6, S = 10 over B = 5: a ring of two
    takes 2, a download 2), group 1 down over [4, 10.5) (tests/test_training_outer.py works
    the run out by hand): its step 1 is lost at 4; group 0 syncs alone (no time) at 6 and 12;
    group 1, back at 10.5 behind the latest model, downloads it over [10.5, 12.5) (its
    replica no weights of its own first: the model download brings them), then waits for the
    outer step at 18 whose ring of two ends the run at 20."""
    metrics, trace = _record(_two_groups_down(tmp_path, "4.0,10.5"))
    assert metrics["training_time"] == pytest.approx(20.0)
    got = [e for e in _named(trace) if not e[1].startswith("step ") or "lost" in e[1]]
    want = [("group 0", "outer wait", 18.0, 20.0),
            ("group 1", "group lost", 4.0, 4.0),
            ("group 1", "model download", 10.5, 12.5),
            ("group 1", "outer wait", 12.5, 20.0),
            ("group 1", "step 1 (lost)", 3.0, 4.0),
            ("outer", "outer sync 0", 6.0, 6.0),
            ("outer", "outer sync 1", 12.0, 12.0),
            ("outer", "outer sync 2", 18.0, 20.0),
            ("s0r0", "outer all-reduce", 18.0, 20.0),
            ("s0r1", "down", 4.0, 10.5),
            ("s0r1", "outer all-reduce", 18.0, 20.0)]
    assert got == [(p, n, pytest.approx(a), pytest.approx(b)) for p, n, a, b in want]
    steps = [e for e in _named(trace) if e[1].startswith("step ") and "lost" not in e[1]]
    assert [(p, a, b) for p, _n, a, b in steps] == (
        [("group 0", 3.0 * k, 3.0 * (k + 1)) for k in range(6)] + [("group 1", 0.0, 3.0)])


def test_a_stage_holding_none_of_a_fragment_takes_no_part_in_its_sync():
    """Streaming DiLoCo, two groups of one 2-stage 1F1B pipeline, 2 fragments (sequential:
    fragment 0 is stage 0's layers, fragment 1 stage 1's), H = 2, N = 4, S = 10 over B = 5,
    l = 0.1: a step is 1 + 0.1 + 1 + 2 + 0.1 + 2 = 6.2, a sync 2 (0.1 + 10 / (2 * 5)) = 2.2,
    so fragment 0 syncs over [6.2, 8.4] and [23, 25.2], fragment 1 over [14.6, 16.8] and
    [31.4, 33.6]. Each sync is on the replicas of the stage holding the fragment only: the
    other stage has nothing to send (it ran a ring of 0 bytes, 2 latency hops, before)."""
    cfg = TrainingConfig(stages=2, replicas=2, microbatches=2, steps=4, forward_time=1.0,
                         schedule="1f1b", param_size=10.0, bandwidth=5.0, latency=0.1,
                         sync="diloco:every=2,fragments=2")
    metrics, trace = _record(cfg)
    assert metrics["training_time"] == pytest.approx(33.6)
    got = [e for e in _named(trace) if e[1] in ("outer all-reduce", "outer sync 1")]
    want = sorted([(f"s{j}r{i}", "outer all-reduce", a, a + 2.2) for j, starts in
                   ((0, (6.2, 23.0)), (1, (14.6, 31.4))) for a in starts for i in (0, 1)]
                  + [("outer", "outer sync 1", 6.2, 8.4)])
    assert got == [(p, n, pytest.approx(a), pytest.approx(b)) for p, n, a, b in want]
    assert [e["args"]["bytes"] for e in _x(trace) if e["name"] == "outer all-reduce"] == [10.0] * 8


@pytest.mark.parametrize("extra, wire, span", [
    ("", 10.0, 2.0),                    # dense bf16: the ring of two, 2 (10 / (2 * 5))
    (",bits=4", 2.5, 0.5),              # 4-bit values: a quarter on the wire
    (",topk=0.1", 3.0, 0.6)])           # 10 % of the values, each with a 32-bit index:
def test_an_outer_sync_says_what_it_moves(extra, wire, span):  # (M - 1) 3 / 5, all-gathered
    """(user trial 11) An outer sync's ``bytes`` is its fragment's parameters (at
    ``value_bits``), whatever ``bits`` and ``topk`` send: a 4-bit sync of 1 GB said
    ``bytes: 1e9`` in Perfetto where 0.25 GB moved. Each outer sync and outer all-reduce
    also carries ``payload``, the bytes on the wire (``sim.analytic.diloco.payload_size``),
    which the span's length is the ring law of (two groups of one worker, S = 10, B = 5)."""
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=2, steps=2, forward_time=1.0,
                         param_size=10.0, bandwidth=5.0, sync="diloco:every=2" + extra)
    _, trace = _record(cfg)
    syncs = [e for e in _x(trace) if e["name"].startswith(("outer sync", "outer all-reduce"))]
    assert sorted(e["name"] for e in syncs) == ["outer all-reduce"] * 2 + ["outer sync 0"]
    for e in syncs:
        assert e["args"]["bytes"] == 10.0 and e["args"]["payload"] == pytest.approx(wire)
        assert e["dur"] / US == pytest.approx(span)


def test_a_diloco_download_cut_by_a_failure_is_recorded_cut(tmp_path):
    """The run above with group 1 down again over [11, 16): its model download (from 10.5)
    is cut at 11 and recorded so, the group lost twice; back at 16 it downloads the model
    again (to 18), its replica never its own weights; the file validates."""
    _, trace = _record(_two_groups_down(tmp_path, "4.0,10.5 11.0,16.0"))
    dl = [(e["ts"] / US, (e["ts"] + e["dur"]) / US, e["args"]["cut"]) for e in _x(trace)
          if e["name"] == "model download"]
    assert dl == [(pytest.approx(10.5), pytest.approx(11.0), True),
                  (pytest.approx(16.0), pytest.approx(18.0), False)]
    lost = [e["ts"] / US for e in trace["traceEvents"] if e.get("name") == "group lost"]
    assert lost == [pytest.approx(4.0), pytest.approx(11.0)]
    assert not [e for e in _x(trace) if e["name"] == "weight download"]


def test_diloco_gantt_bubble_is_the_engines():
    """Four groups of two stages, streaming and overlapped over a geo network: the Gantt's
    steps are group 0's, and its bubble (each group's steps over its own workers) equals the
    engine's bubble_fraction (counting every group's compute against one group's workers
    would give a negative one)."""
    cfg = TrainingConfig(stages=2, replicas=4, microbatches=4, steps=8, schedule="1f1b",
                         param_size=10.0, forward_time=(1.0, 1.5),
                         sync="diloco:every=4,fragments=2,overlap=1",
                         network="geo:regions=4,hosts=2,inter_region_bandwidth=5,"
                                 "inter_region_latency=0.1")
    metrics, trace = _record(cfg)
    g = gantt(trace)
    assert len(g.steps) == 8
    assert g.bubble == pytest.approx(metrics["bubble_fraction"], rel=1e-9)
    assert 0.0 < g.bubble < 1.0


def test_recorder_off_is_the_null_recorder():
    """Without a recorder every engine holds NULL: off, and every hook a no-op."""
    sysm = TrainingSystem(TrainingConfig(), Streams(0))
    assert sysm.rec is NULL and not NULL.on and NULL.pass_done(1, 2, 3, 4) is None
    assert all(r.rec is NULL for r in sysm.flow.replicas)


# ----------------------------------------------------------------------------- what the files hold


ENGINES = {
    "plan-1f1b": dict(plan=True),
    "interleaved": dict(schedule="interleaved", virtual_stages=2, stages=2, microbatches=4,
                        latency=0.1),
    "blocking-1f1b": dict(schedule="1f1b", p2p="blocking", latency=(0.1, 0.2, 0.3)),
    "1f1b-dynamic": dict(schedule="1f1b-dynamic", availability=0.9, mean_downtime=2.0,
                         param_size=1.0, bandwidth=2.0, replicas=2),
    "async": dict(schedule="async", replicas=2, pass_time_distribution="exponential"),
    "fastest-k": dict(schedule="gpipe", replicas=3, microbatches=6, sync_wait=2,
                      pass_time_distribution="exponential"),
}


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_schedule_records_valid_passes(name):
    """Every schedule's engine (the DES, the framework engine, a plan) records its passes,
    one per pass the run counts, in a file the validator accepts."""
    kw = dict(ENGINES[name])
    if kw.pop("plan", False):  # dtsim train --plan's config: its transfers and rings as flows
        from sim.profiles import load_profiles, read_runs
        from sim.profiles.build import build_plan

        run = {r.name: r for r in read_runs()}["mit-N2_D1"]
        cfg = build_plan(run.plan, load_profiles(models=("OPT-350",)), steps=1,
                         network=True).config
        assert cfg.network is not None
    else:
        cfg = TrainingConfig(**{**dict(stages=4, microbatches=6, steps=2), **kw})
    metrics, trace = _record(cfg, seed=3)
    passes = [e for e in _x(trace, "compute") if not e["args"].get("lost")]
    assert len(passes) == metrics["passes"]


def test_the_job_engine_records_steps_losses_and_holds():
    """The step-level job engine: a step on every worker of the formation, lost work and the
    restarts and checkpoints of its strategy, the same numbers as without a recorder."""
    from sim.training.strategies import make_strategy
    from sim.training.strategies.job import job_model

    cfg = TrainingConfig(stages=3, replicas=2, steps=12, availability=0.95, mean_downtime=20.0,
                         strategy=make_strategy("checkpoint-restart:every=3,checkpoint=0.5,"
                                                "restart=2"))
    rec = Recorder()
    got = job_model(cfg, Streams(1).replication(0), recorder=rec)
    want = job_model(cfg, Streams(1).replication(0))
    assert json.dumps(got, sort_keys=True, default=str) == json.dumps(want, sort_keys=True,
                                                                      default=str)
    trace = rec.trace()
    assert validate(trace) == []
    steps = [e for e in _x(trace, "step") if e["name"].startswith("step ")]
    lost = [e for e in _x(trace, "step") if e["name"] == "lost step"]
    assert len(steps) >= cfg.steps and lost  # steps lost to a rollback are done again
    on: dict[float, int] = {}
    for e in _x(trace, "compute"):  # the step on each worker of its formation (pipelines of L)
        on[e["ts"]] = on.get(e["ts"], 0) + 1
    assert sorted(on) == sorted(e["ts"] for e in steps)
    assert all(v % cfg.stages == 0 and cfg.stages <= v <= cfg.workers for v in on.values())
    holds = [e for e in _x(trace) if e["name"] == "checkpoint"]
    assert len(holds) == got["checkpoints"]


def test_window_and_cap(tmp_path, capsys):
    """A window keeps the events that intersect it; the cap keeps the first N and the file and
    the output say how many of which category were left out, and from when."""
    argv = ["train", "--stages", "3", "--microbatches-per-step", "4", "--steps", "4",
            "--schedule", "1f1b", "--replications", "1"]
    out = tmp_path / "w.json"
    assert main([*argv, "--timeline", str(out), "--timeline-window", "10:20"]) == 0
    assert "outside the window" in capsys.readouterr().out
    trace = read_timeline(out)
    assert all(e["ts"] <= 20 * US and e["ts"] + e["dur"] >= 10 * US for e in _x(trace))
    assert trace["otherData"]["outside_window"] > 0
    out2 = tmp_path / "c.json"
    assert main([*argv, "--timeline", str(out2), "--timeline-max-events", "10"]) == 0
    said = capsys.readouterr().out
    trace = read_timeline(out2)
    od = trace["otherData"]
    assert od["events"] == 10 and len([e for e in trace["traceEvents"] if e["ph"] != "M"
                                       and e.get("cat") != "timeline"]) == 10
    assert sum(od["left_out"].values()) > 0 and "left out" in said
    assert any(e.get("cat") == "timeline" for e in trace["traceEvents"])


def test_window_parsing():
    """T0:T1 with 0 <= T0 < T1; either side may be empty."""
    assert parse_window("1:2") == (1.0, 2.0)
    assert parse_window(":5") == (0.0, 5.0) and parse_window("3:") == (3.0, math.inf)
    for bad in ("2:1", "nan:3", "1:nan", "x", "1-2", "-1:2", "inf:inf", "1:1"):
        with pytest.raises(ConfigError, match="'timeline_window' must be"):
            parse_window(bad)


def _valid() -> dict:
    rec = Recorder()
    rec.declare(["a"])
    rec.span("a", "compute", "forward", "compute", 0.0, 1.0, {"stage": 0})
    rec.instant("a", "events", "skip", "skip", 0.5)
    rec.counter("network", "link", 0.25, 0.5)
    return rec.trace()


@pytest.mark.parametrize("breakage,words", [
    (lambda t: t.pop("traceEvents"), "traceEvents"),
    (lambda t: t.update(displayTimeUnit="s"), "displayTimeUnit"),
    (lambda t: _ev(t, "X").update(dur=-1.0), "dur"),
    (lambda t: _ev(t, "X").pop("dur"), "dur"),
    (lambda t: _ev(t, "X").update(ts="0"), "ts"),
    (lambda t: _ev(t, "X").update(ph="Q"), "phase"),
    (lambda t: _ev(t, "X").pop("tid"), "tid"),
    (lambda t: _ev(t, "X").update(pid=1.5), "pid"),
    (lambda t: _ev(t, "X").update(args=[1]), "args"),
    (lambda t: _ev(t, "i").update(s="x"), "s must be"),
    (lambda t: _ev(t, "C").update(args={"u": "high"}), "finite number"),
    (lambda t: t["traceEvents"].remove(_meta(t, "thread_name")), "thread_name"),
    (lambda t: t["traceEvents"].remove(_meta(t, "process_name")), "process_name"),
    (lambda t: _meta(t, "process_name")["args"].pop("name"), "args.name"),
    (lambda t: t["traceEvents"].append({**_ev(t, "X"), "ts": 0.5e6}), "overlaps"),
    (lambda t: t["traceEvents"].append({"name": "e", "ph": "E", "ts": 1, "pid": 1, "tid": 1}),
     "no B open"),
])
def test_the_validator_rejects_what_the_format_forbids(breakage, words):
    """Each rule of the validator catches its breakage (so a passing file means something)."""
    t = _valid()
    assert validate(t) == []
    breakage(t)
    errs = validate(t)
    assert errs and any(words in e for e in errs), errs


def _ev(t: dict, ph: str) -> dict:
    return next(e for e in t["traceEvents"] if e["ph"] == ph)


def _meta(t: dict, name: str) -> dict:
    return next(e for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == name)


def test_nested_events_are_valid_and_lanes_separate_overlaps():
    """Nested complete events are allowed; overlapping events of one stream go to lanes."""
    t = _valid()
    t["traceEvents"].append({**_ev(t, "X"), "ts": 0.2e6, "dur": 0.3e6})
    assert validate(t) == []
    rec = Recorder()
    rec.span("a", "receive", "x", "transfer", 0.0, 2.0)
    rec.span("a", "receive", "x", "transfer", 1.0, 3.0)
    rec.span("a", "receive", "x", "transfer", 2.0, 4.0)
    t = rec.trace()
    assert validate(t) == []
    names = sorted(e["args"]["name"] for e in t["traceEvents"] if e["name"] == "thread_name")
    assert names == ["receive", "receive 2"]


# ----------------------------------------------------------------------------- the Gantt chart


def test_gantt_of_a_4_stage_1f1b_step(tmp_path, capsys):
    """dtsim plot --timeline: a row per device's compute, each row's bars exactly its events
    (start, duration, forward/backward), the step boundaries drawn, the bubble fraction the
    engine's own."""
    from sim.plotting import plot_timeline

    tl = tmp_path / "s.json"
    assert main(["train", "--stages", "4", "--microbatches-per-step", "8", "--steps", "1",
                 "--schedule", "1f1b", "--forward-time", "1,1.5,1,2", "--replications", "1",
                 "--json", "--timeline", str(tl)]) == 0
    bubble = json.loads(capsys.readouterr().out)["bubble_fraction"]
    png = tmp_path / "s.png"
    assert main(["plot", "--timeline", str(tl), "--out", str(png)]) == 0
    assert capsys.readouterr().out.strip() == str(png) and png.stat().st_size > 10_000
    trace = read_timeline(tl)
    g = gantt(trace)
    assert [r.label for r in g.rows] == [f"s{j}r0 compute" for j in range(4)]
    assert g.bubble == pytest.approx(bubble, abs=1e-12) and len(g.steps) == 1
    assert g.steps[0].bubble == pytest.approx(bubble, abs=1e-12)
    _, drawn = plot_timeline(g, tmp_path / "again.png")
    names = {e["pid"]: n for n in (r.label.split()[0] for r in g.rows)
             for e in [next(x for x in trace["traceEvents"] if x["ph"] == "M"
                            and x["name"] == "process_name" and x["args"]["name"] == n)]}
    for y, r in enumerate(g.rows):
        want = sorted((e["ts"] / US, e["dur"] / US, e["name"]) for e in _x(trace, "compute")
                      if names.get(e["pid"]) == r.label.split()[0])
        assert len(want) == 16
        bars = []
        for kind, lost, lane, coll in drawn["bars"][y]:
            assert not lost and lane == 0
            for path in coll.get_paths():
                (x0, y0), (x1, y1) = path.vertices.min(axis=0), path.vertices.max(axis=0)
                assert y0 == pytest.approx(y - 0.4) and y1 == pytest.approx(y + 0.4)
                bars.append((x0, x1 - x0, kind))
        assert len(bars) == len(want)
        for (a, d, k), (a2, d2, k2) in zip(sorted(bars), want, strict=True):
            assert a == pytest.approx(a2, abs=1e-9) and d == pytest.approx(d2, abs=1e-9)
            assert k == k2
    xs = sorted(line.get_xdata()[0] for line in drawn["steps"])
    assert xs == pytest.approx([g.steps[0].start, g.steps[0].end])


def test_gantt_row_names_no_host_that_is_the_replicas_own_name(tmp_path):
    """A plan's replica runs on a network node named as the replica (s0r0): its rows read
    "s0r0 compute", not "s0r0 @s0r0 compute" (the host said nothing the row did not)."""
    rep = {"gpu": "GH-96", "tp": 4, "gpus_per_node": 4, "zone": "us-central1-a"}
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"model": "OPT-350", "microbatch_size": 1, "global_batch_size": 2,
                                "stages": [{"first_layer": 0, "last_layer": 12, "replicas": [rep]},
                                           {"first_layer": 13, "last_layer": 25,
                                            "replicas": [rep]}]}))
    tl = tmp_path / "t.json"
    assert main(["train", "--plan", str(plan), "--steps", "1", "--replications", "1",
                 "--quiet", "--timeline", str(tl)]) == 0
    labels = [r.label for r in gantt(read_timeline(tl)).rows]
    assert "s0r0 compute" in labels and "s1r0 compute" in labels
    assert not any("@" in x for x in labels)


def test_gantt_shows_every_pass_narrower_than_a_pixel(tmp_path, capsys):
    """Two stages, GPipe, 96 micro-batches of 5 ms forward over hops of 43.6 ms (4 MiB at
    1 Gbit/s after 10 ms) on FIFO channels: the last stage's forward passes come a hop
    apart, each about a quarter of a pixel wide in a step of 8.4 s. Each must show in its
    row in the forward colour: 95 separate runs of pixel columns (the last pass touches the
    first backward pass, drawn over it) or 96. Before, the white edge
    that parts touching bars covered each whole (0 columns anywhere near the colour)."""
    from matplotlib.image import imread

    from sim.plotting import TIMELINE_STYLE, plot_timeline

    tl = tmp_path / "t.json"
    assert main(["train", "--stages", "2", "--microbatches-per-step", "96", "--steps", "1",
                 "--schedule", "gpipe", "--forward-time", "5ms", "--backward-time", "10ms",
                 "--activation-size", "4MiB", "--bandwidth", "1Gbit/s", "--latency", "10ms",
                 "--p2p", "overlap", "--replications", "1", "--timeline", str(tl)]) == 0
    capsys.readouterr()
    g = gantt(read_timeline(tl))
    y = [r.label for r in g.rows].index("s1r0 compute")
    assert sum(b.kind == "forward" for b in g.rows[y].bars) == 96
    path, drawn = plot_timeline(g, tmp_path / "g.png")
    img = imread(str(path))[:, :, :3]
    ax = drawn["bars"][y][0][3].axes
    (x0, top), (x1, bottom) = ax.transData.transform([(0, y - 0.3), (1, y + 0.3)])
    assert (x1 - x0) * 0.005 < 0.5  # a pass is under half a pixel wide
    band = img[int(img.shape[0] - top) + 1:int(img.shape[0] - bottom)]
    face = np.array([int(TIMELINE_STYLE["forward"][0][k:k + 2], 16) for k in (1, 3, 5)]) / 255
    cols = (np.abs(band - face).sum(axis=2) < 0.25).any(axis=0)
    runs = int(cols[0]) + int(np.sum(cols[1:] & ~cols[:-1]))
    assert runs >= 95  # the last touches the first backward pass, drawn over it


def test_gantt_of_many_steps_draws_no_boundary_per_step(tmp_path):
    """A DiLoCo run of 200 inner steps (the user trial's): no dashed line per step (they hid
    the bars), the title says so; 20 steps: each boundary, unlabelled; a lost step of a long
    run keeps its red line."""
    from sim.plotting import STEP_LABELS, STEP_LINES, plot_timeline

    def draw(cfg: TrainingConfig, seed: int = 0):
        rec = Recorder()
        training_model(cfg, Streams(seed).replication(0), recorder=rec)
        g = gantt(rec.trace())
        _, drawn = plot_timeline(g, tmp_path / "g.png")
        fig = drawn["steps"][0].figure if drawn["steps"] else None
        return g, drawn, fig

    long = TrainingConfig(stages=1, replicas=3, microbatches=3, steps=200, forward_time=0.33,
                          param_size=1e9, bandwidth=1.25e8, sync="diloco:every=100,groups=3")
    g, drawn, _ = draw(long)
    assert len(g.steps) == 200 > STEP_LINES and drawn["steps"] == []
    short = TrainingConfig(stages=2, microbatches=2, steps=20, forward_time=1.0)
    g, drawn, fig = draw(short)
    assert len(g.steps) == 20 and STEP_LABELS < 20 <= STEP_LINES
    xs = sorted(line.get_xdata()[0] for line in drawn["steps"])
    assert xs == pytest.approx([s.start for s in g.steps] + [g.steps[-1].end])
    assert not any(t.get_text().startswith("step ") for t in fig.axes[0].texts)
    lossy = TrainingConfig(stages=2, microbatches=2, steps=80, forward_time=1.0, mtbf=600.0,
                           replace_time=4.0, restart_cost=3.0, checkpoint_every=1,
                           checkpoint_cost=0.5)
    g, drawn, _ = draw(lossy, seed=1)
    lost = [s.start for s in g.steps if s.lost]
    assert len(g.steps) > STEP_LINES and 0 < len(lost) <= STEP_LINES
    assert sorted(line.get_xdata()[0] for line in drawn["steps"]) == pytest.approx(sorted(lost))


def test_bubble_leaves_down_workers_out_and_says_so(tmp_path, capsys):
    """bubble_fraction is the idle share of the live workers in the steps' passes, the
    worker-time of the down ones (or ones fetching weights) taken out (docs/timeline.md):
    with 3 data-parallel replicas and spot preemptions every step's ``workers`` is 3 and its
    ``down`` the replicas' not-live time in its passes; the engine's bubble is
    1 - busy / (3 x span - down) over the steps (below the old 1 - busy / (3 x span)), the
    Gantt's equals it, a step with a replica down throughout now has a bubble below 1/3 (the
    one stage has no schedule bubble), and the Gantt title and the text report say so."""
    from sim.plotting import plot_timeline

    cfg = TrainingConfig(stages=1, replicas=3, microbatches=3, steps=60, schedule="1f1b",
                         forward_time=0.33, param_size=2e9, bandwidth=1.25e8, latency=0.025,
                         mtbf=60.0, replace_time=10.0, sync="allreduce")
    metrics, trace = _record(cfg, seed=3)
    steps = [e for e in _x(trace, "step") if not e["args"].get("lost")
             and not e["args"].get("open")]
    downs = [(e["ts"], e["ts"] + e["dur"]) for e in _x(trace, "failure")]
    assert downs and all(e["args"]["workers"] == 3 for e in steps)
    busy = sum(e["args"]["busy"] for e in steps)
    span = sum(e["args"]["compute_end"] - e["ts"] / US for e in steps)
    down = sum(e["args"].get("down", 0.0) for e in steps)
    assert down > 0
    assert metrics["bubble_fraction"] == pytest.approx(1 - busy / (3 * span - down), abs=1e-9)
    assert metrics["bubble_fraction"] < 1 - busy / (3 * span) - 0.01
    g = gantt(trace)
    assert g.bubble == pytest.approx(metrics["bubble_fraction"], abs=1e-9)
    covered = [e for e in steps if any(a <= e["ts"] and e["args"]["compute_end"] * US <= b
                                       for a, b in downs)]
    assert covered
    for e in covered:
        dt = e["args"]["compute_end"] - e["ts"] / US
        assert e["args"]["down"] >= dt - 1e-9
        assert 1 - e["args"]["busy"] / (3 * dt - e["args"]["down"]) < 1 / 3
    _, drawn = plot_timeline(g, tmp_path / "g.png")
    fig = drawn["bars"][0][0][3].figure
    assert "idle share of the live workers" in fig.axes[0].get_title()
    assert main(["train", "--stages", "2", "--steps", "1", "--replications", "1"]) == 0
    assert "bubble: the live workers' idle share in the steps' passes, down ones left out" \
        in capsys.readouterr().out


def test_a_step_lost_after_its_passes_keeps_its_compute_phase_in_the_gantt(tmp_path):
    """One stage, 2 replicas, 4 forward-only passes of 1, an optimizer step of 1, weights 2
    at 2/s (a download 1), restart cost 0.5; s0r1 down [0, 1) and [4.2, 100), s0r0 down
    [4.5, 5). Step 0: s0r0 serves the 4 passes [0, 4] while s0r1 is down then fetching
    (busy 4, down 2: bubble 1/3); s0r0 fails in its optimizer step, the stage is lost and
    the step with it; s0r0 back at 5, fetches [5, 6), restart to 6.5, then 3 steps of
    4 + 1 alone (busy 4, down 4 each: bubble 0). The engine counts step 0's compute phase:
    1 - 16 / (6 + 3 x 4) = 1/9; the lost step's event carries it and the Gantt's bubble is
    the engine's (it left the lost step out: 0)."""
    p = tmp_path / "down.csv"
    p.write_text("worker,start,end\ns0r1,0,1\ns0r1,4.2,100\ns0r0,4.5,5\n")
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=4, steps=3, forward_time=1.0,
                         backward_ratio=0.0, param_size=2.0, bandwidth=2.0, optimizer_time=1.0,
                         restart_cost=0.5, failure_trace=str(p))
    metrics, trace = _record(cfg)
    assert metrics["training_time"] == pytest.approx(21.5) and metrics["restarts"] == 1
    assert metrics["bubble_fraction"] == pytest.approx(1 / 9, abs=1e-12)
    lost = [e["args"] for e in _x(trace, "step") if e["args"].get("lost")]
    assert lost == [{"step": 0, "lost": True, "compute_end": 4.0, "busy": 4.0, "workers": 2,
                     "down": 2.0}]
    g = gantt(trace)
    assert [(s.step, s.lost, s.bubble) for s in g.steps][0] == (0, True,
                                                               pytest.approx(1 / 3, abs=1e-12))
    assert g.bubble == pytest.approx(metrics["bubble_fraction"], abs=1e-12)
    # the first step after the restart: busy 4 of 2 x 4 - 4.000000000000001, a bubble of
    # -2.2e-16, labelled 0.000 as the title prints one within rounding of 0 (not -0.000)
    assert g.steps[1].bubble < 0
    from sim.plotting import plot_timeline

    _, drawn = plot_timeline(g, tmp_path / "g.png")
    ax = drawn["bars"][0][0][3].figure.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert "step 0\nbubble 0.000" in labels and not any("-0.000" in x for x in labels)


def test_diloco_gantt_bubble_is_the_engines_with_failures():
    """Two DiLoCo groups of a 2-stage pipeline, worker availability 0.85: groups lose steps
    in their in-group all-reduce (after their passes, which the engine counts); the Gantt's
    bubble equals the engine's (seed 0: it was 0.57138 against 0.57113)."""
    cfg = TrainingConfig(stages=2, replicas=4, microbatches=4, steps=20, forward_time=1.0,
                         param_size=2.0, bandwidth=2.0, availability=0.85, mean_downtime=3.0,
                         sync="diloco:every=2,groups=2")
    metrics, trace = _record(cfg)
    assert any(e["args"].get("lost") and "compute_end" in e["args"] for e in _x(trace, "step"))
    assert gantt(trace).bubble == pytest.approx(metrics["bubble_fraction"], abs=1e-12)


def test_diloco_gantt_draws_every_groups_lost_steps(tmp_path):
    """(user trial 15) Three one-worker DiLoCo groups; s0r1 (group 1) down over [5.5, 8.5) and
    s0r0 (group 0) over [9.5, 10.5): the Gantt's steps are group 0's and the lost steps of
    every group. It kept group 0's alone, so a plot past 60 steps ("only the lost steps'
    starts drawn") left out group 1's lost step."""
    trace_file = tmp_path / "t.csv"
    trace_file.write_text("worker,start,end\ns0r1,5.5,8.5\ns0r0,9.5,10.5\n")
    cfg = TrainingConfig(stages=1, replicas=3, microbatches=3, steps=12, forward_time=1.0,
                         backward_ratio=0.0, sync="diloco:every=4", failure_trace=str(trace_file))
    _, trace = _record(cfg)
    lost = {(e["pid"], e["args"]["step"]) for e in _x(trace, "step") if e["args"].get("lost")}
    pids = {e["args"]["name"]: e["pid"] for e in trace["traceEvents"]
            if e.get("ph") == "M" and e["name"] == "process_name"}
    assert {pid for pid, _ in lost} == {pids["group 0"], pids["group 1"]}
    g = gantt(trace)
    assert sorted(s.step for s in g.steps if s.lost) == sorted(k for _, k in lost)
    g0 = [e for e in _x(trace, "step") if e["pid"] == pids["group 0"]]
    assert len(g.steps) == len(g0) + sum(1 for pid, _ in lost if pid != pids["group 0"])


def test_plot_refuses_a_file_that_is_not_a_timeline(tmp_path, capsys):
    """A file that is not Trace Event Format JSON is one line naming 'timeline'."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1,
                                                "ts": 0, "dur": -1}]}))
    assert main(["plot", "--timeline", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "'timeline' must be a Trace Event Format JSON file" in err and "dur" in err


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("argv,name", [
    (["train", "--engine", "compiled", "--schedule", "swarm"], "timeline"),
    (["pipeline", "--stages", "3"], "timeline"),  # auto runs the vector engine here
    (["pipeline", "--method", "importance"], "timeline"),
    (["gossip", "--protocol", "matching"], "timeline"),
    (["train", "--steps", "100000000"], "timeline"),  # too large
    (["train", "--timeline-window", "5:1"], "timeline_window"),
    (["train", "--timeline-max-events", "0"], "timeline_max_events"),
])
def test_refused_before_any_work(argv, name, tmp_path, capsys):
    """What cannot be recorded (an engine without events, a run too large, a bad bound) is one
    line before any work, and no file is written."""
    out = tmp_path / "t.json"
    assert main([*argv, "--timeline", str(out)]) == 2
    cap = capsys.readouterr()
    assert f"'{name}' must be" in cap.err and cap.out == "" and not out.exists()


def test_bounds_without_the_file_and_a_folder_are_refused(tmp_path, capsys):
    """--timeline-window alone is refused; --timeline DIR is refused."""
    assert main(["train", "--timeline-window", "0:1"]) == 2
    assert "'timeline_window' must be given only with --timeline" in capsys.readouterr().err
    assert main(["train", "--timeline", str(tmp_path)]) == 2
    assert "'timeline' must be a writable file" in capsys.readouterr().err


#: A data-parallel run with spot preemptions (the user trial's shape, shorter): replications
#: differ in their preemptions (seed 3: 1, 3 and 2).
SPOT = ["train", "--stages", "1", "--replicas", "3", "--microbatches-per-step", "3", "--steps",
        "60", "--schedule", "1f1b", "--forward-time", "330ms", "--param-size", "2GB",
        "--bandwidth", "1Gbps", "--latency", "25ms", "--mtbf", "1min", "--replace-time", "10s",
        "--sync", "allreduce", "--seed", "3", "--replications", "3"]


@pytest.mark.parametrize("executor", ["serial", "local"])
def test_timeline_replication_records_that_replication_and_changes_no_number(
        executor, tmp_path, capsys):
    """--timeline-replication K: the file holds replication K's run (its events are those of
    the engine run on replication K's streams), the JSON is the same, bit for bit, as without
    --timeline, and the output says how many preemptions replication K had."""
    argv = [*SPOT, "--json", "--executor", executor]
    assert main(argv) == 0
    plain = {k: v for k, v in json.loads(capsys.readouterr().out).items() if k not in WALL}
    seen = set()
    for k in range(3):
        out = tmp_path / f"t{k}.json"
        assert main([*argv, "--timeline", str(out), "--timeline-replication", str(k)]) == 0
        cap = capsys.readouterr()
        timed = {k: v for k, v in json.loads(cap.out).items() if k not in WALL}
        assert json.dumps(plain, sort_keys=True) == json.dumps(timed, sort_keys=True)
        trace = read_timeline(out)
        assert trace["otherData"]["replication"] == k
        rec = Recorder()
        cfg = TrainingConfig(stages=1, replicas=3, microbatches=3, steps=60, schedule="1f1b",
                             forward_time=0.33, param_size=2e9, bandwidth=1.25e8,
                             latency=0.025, mtbf=60.0, replace_time=10.0, sync="allreduce")
        training_model(cfg, Streams(3).replication(k), recorder=rec)
        assert trace["traceEvents"] == rec.trace()["traceEvents"]
        pre = sum(1 for e in trace["traceEvents"] if e["name"] == "preempted")
        assert pre == rec.failures["preempted"] and pre > 0
        noun = "preemption" if pre == 1 else "preemptions"
        assert f"of replication {k} written" in cap.err
        assert f"replication {k} (seed 3) had {pre} spot {noun}" in cap.err
        seen.add(pre)
    assert len(seen) > 1  # the replications differ: the option picks one


def test_timeline_replication_out_of_range_is_refused(tmp_path, capsys):
    """K outside [0, replications) or not an integer, or given without --timeline: one line,
    exit 2, no file."""
    out = tmp_path / "t.json"
    for k in ("3", "-1", "x", "1.5"):
        assert main([*SPOT, "--timeline", str(out), "--timeline-replication", k]) == 2
        cap = capsys.readouterr()
        assert cap.err.strip().endswith(
            f"'timeline_replication' must be an integer in [0, 2] (0 <= K < --replications "
            f"3): '{k}'") and cap.out == "" and not out.exists()
    assert main([*SPOT, "--timeline-replication", "1"]) == 2
    assert "'timeline_replication' must be given only with --timeline" in capsys.readouterr().err


def test_a_run_without_failures_says_so(tmp_path, capsys):
    """The line about the recorded replication says it had no failure."""
    out = tmp_path / "t.json"
    assert main(["train", "--stages", "2", "--microbatches-per-step", "2", "--steps", "1",
                 "--replications", "2", "--timeline", str(out), "--timeline-replication",
                 "1"]) == 0
    assert "timeline: replication 1 (seed 0) had no worker failure or preemption" in \
        capsys.readouterr().out


# ----------------------------------------------------------------------------- slow


@pytest.mark.slow
def test_a_trace_parser_from_pypi_reads_the_file(tmp_path):
    """chrometrace (PyPI) turns every event of a file into its typed TraceEvent and back, with
    the phases its enum knows (Perfetto's trace processor needs a binary download, which this
    machine cannot make)."""
    chrometrace = pytest.importorskip("chrometrace")
    cfg = TrainingConfig(stages=3, replicas=2, microbatches=6, steps=3, schedule="1f1b",
                         availability=0.9, mean_downtime=2.0, param_size=1.0, bandwidth=2.0)
    rec = Recorder()
    training_model(cfg, Streams(2).replication(0), recorder=rec)
    path = rec.write(tmp_path / "t.json")
    raw = json.loads(path.read_text())
    events = [chrometrace.TraceEvent.from_dict(copy.deepcopy(e)) for e in raw["traceEvents"]]
    assert len(events) == len(raw["traceEvents"])
    for e, d in zip(events, raw["traceEvents"], strict=True):
        kind = chrometrace.TraceEventType(e.event_type.upper() if e.event_type == "i"
                                          else e.event_type)
        assert kind.value in "XIMC"
        back = e.to_dict()
        assert {k: back[k] for k in d} == d


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_random_configs_change_no_number_and_validate(seed):
    """Random training configs (failures, skips, waits, restarts, the all-reduce overlapped with
    backward, networks with FIFO channels): the metrics with a recorder are the ones without,
    and the file validates."""
    rng = np.random.default_rng(900 + seed)
    L = int(rng.integers(2, 5))
    kw = dict(stages=L, replicas=int(rng.integers(1, 3)), microbatches=int(rng.integers(2, 7)),
              steps=int(rng.integers(2, 6)),
              schedule=str(rng.choice(["gpipe", "1f1b", "1f1b-dynamic", "swarm", "async"])),
              availability=float(rng.uniform(0.8, 1.0)), mean_downtime=2.0,
              pass_time_distribution="exponential", skip_budget=int(rng.integers(0, 2)),
              max_wait=float(rng.choice([0.0, 3.0])), param_size=0.5, bandwidth=2.0)
    if kw["schedule"] in ("gpipe", "1f1b") and rng.random() < 0.5:
        kw.update(restart_cost=1.0, checkpoint_every=2, checkpoint_cost=0.2, skip_budget=0,
                  max_wait=0.0)
    if kw["schedule"] in ("gpipe", "1f1b") and kw["replicas"] > 1:  # buckets in backward
        kw.update(sync="allreduce:overlap=backward,bucket_size=0.2", routing="round-robin",
                  availability=1.0)  # (replica servers that fail over cannot overlap it)
    if seed % 2:  # transfers on FIFO channels, all-reduce chunks, link counters
        del kw["bandwidth"]
        kw.update(network="tree:racks=1,hosts=8", activation_size=0.5)
    cfg = TrainingConfig(**kw)
    rec = Recorder()
    got = training_model(cfg, Streams(seed).replication(0), recorder=rec)
    want = training_model(cfg, Streams(seed).replication(0))
    assert repr(got) == repr(want)
    assert validate(rec.trace()) == []


def test_a_rerun_that_differs_is_an_error(tmp_path):
    """Without a recording in the run (a process pool), replication 0 runs again with the
    recorder; a number that differs from the first run's is an error and writes nothing."""
    from sim.commands._timeline import finish_timeline
    from sim.errors import SimulationError
    from sim.timeline import timeline_request

    req = timeline_request(str(tmp_path / "t.json"))
    rec = Recorder()
    rec.span("a", "compute", "x", "compute", 0.0, 1.0)
    with pytest.raises(SimulationError, match="gave another throughput"):
        finish_timeline(req, None, lambda: (rec, {"throughput": 1.0, "passes": 3.0}),
                        record={"throughput": 1.5, "passes": 3.0}, command="train", seed=0,
                        json_mode=True)
    assert not (tmp_path / "t.json").exists()
    finish_timeline(req, None, lambda: (rec, {"throughput": math.nan, "passes": 3.0}),
                    record={"throughput": math.nan, "passes": 3.0}, command="train", seed=0,
                    json_mode=True)
    assert validate(read_timeline(tmp_path / "t.json")) == []


@pytest.mark.slow
def test_a_process_pool_gives_the_same_timeline(tmp_path, capsys):
    """--executor local: replication 0 runs again here with the recorder (checked equal to
    the pool's), and the file is the serial run's, byte for byte."""
    argv = ["train", "--stages", "3", "--replicas", "2", "--microbatches-per-step", "4",
            "--steps", "3", "--schedule", "swarm", "--availability", "0.9",
            "--replications", "3", "--json"]
    a, b = tmp_path / "serial.json", tmp_path / "pool.json"
    assert main([*argv, "--timeline", str(a)]) == 0
    serial = json.loads(capsys.readouterr().out)
    assert main([*argv, "--executor", "local", "--workers", "2", "--timeline", str(b)]) == 0
    pool = json.loads(capsys.readouterr().out)
    assert serial == pool
    assert a.read_text() == b.read_text()


def test_gossip_on_a_graph_file_names_its_hosts(tmp_path, capsys):
    """Gossip on a graph file of named hosts: the timeline's processes, exchanges and link
    counters carry the file's names (node eu-a, eu-a->us-a), not the engine's positions
    (node 0, 0->1, as before); a family's integer graph keeps node 0, node 1, ..."""
    import networkx as nx

    G = nx.Graph()
    G.add_edge("eu-a", "eu-b", bandwidth="1Gbit/s", latency="5ms")
    G.add_edge("eu-b", "us-a", bandwidth="100Mbps", latency="40ms")
    G.add_edge("us-a", "eu-a", bandwidth="100Mbps", latency="40ms")
    path = tmp_path / "named.graphml"
    nx.write_graphml(G, path)
    out = tmp_path / "g.json"
    assert main(["gossip", "--topology", str(path), "--protocol", "async", "--rounds", "3",
                 "--engine", "des", "--size", "1MB", "--replications", "1",
                 "--timeline", str(out)]) == 0
    capsys.readouterr()
    ev = json.loads(out.read_text())["traceEvents"]
    procs = {e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert procs == {"node eu-a", "node eu-b", "node us-a", "network"}
    links = {e["name"] for e in ev if e["ph"] == "C"}
    assert links and links <= {f"{a}->{b}" for a in G for b in G if a != b}
    ends = {e["args"]["source"] for e in ev if e["name"] == "exchange"}
    assert ends and ends <= procs
    assert main(["gossip", "--protocol", "async", "--nodes", "4", "--rounds", "2", "--engine",
                 "des", "--replications", "1", "--timeline", str(out)]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    assert {e["args"]["name"] for e in ev if e["name"] == "process_name"} == \
        {f"node {i}" for i in range(4)}


def test_diloco_passes_and_downloads_name_the_systems_replica(tmp_path):
    """(user trial 3) A DiLoCo group indexes its replicas inside the group: the events on
    ``s0r2`` said ``"replica": 0`` (its index in group 2). Every pass, lost pass and weight
    download now carries the replica of its process's name, as without DiLoCo."""
    p = tmp_path / "down.csv"
    p.write_text("worker,start,end\ns0r2,4.5,10.5\n")  # in its backward pass [4, 6]
    cfg = TrainingConfig(stages=2, replicas=4, microbatches=4, steps=4, forward_time=1.0,
                         param_size=10.0, bandwidth=5.0, sync="diloco:every=2",
                         failure_trace=str(p))
    rec = Recorder()
    training_model(cfg, Streams(0).replication(0), recorder=rec)
    trace = rec.trace()
    assert validate(trace) == []
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    seen = set()
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and "replica" in e.get("args", {}):
            name = names[e["pid"]]
            assert name == f"s{e['args']['stage']}r{e['args']['replica']}", (name, e)
            seen.add((name, e["name"]))
    assert ("s0r2", "weight download") in seen
    assert any(n == "s0r2" and x.endswith("(lost)") for n, x in seen), seen
    assert ("s1r3", "forward") in seen


def test_gantt_title_prints_a_bubble_within_rounding_of_zero_as_zero(tmp_path, monkeypatch):
    """(user trial 4) A DiLoCo timeline's Gantt chart was titled 'bubble fraction -0.0000':
    the engine's bubble was -5.7e-12, float residue of busy / capacity, printed with its sign
    (dtsim train's summary line prints it as 0 already). The title prints 0.0000; a real
    bubble keeps its digits."""
    from sim.plotting import Figure, plot_timeline

    tl = tmp_path / "s.json"
    assert main(["train", "--stages", "2", "--microbatches-per-step", "2", "--steps", "1",
                 "--schedule", "1f1b", "--replications", "1", "--quiet", "--timeline",
                 str(tl)]) == 0
    g = gantt(read_timeline(tl))
    titles = []
    save = Figure.savefig

    def spy(fig, *a, **k):
        titles.append(fig.axes[0].get_title())
        return save(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", spy)
    for b in (-5.7e-12, 0.25):
        g.bubble = b
        plot_timeline(g, tmp_path / "g.png")
    assert "bubble fraction 0.0000 (" in titles[0]
    assert "bubble fraction 0.2500 (" in titles[1]


def test_deepspeed_0313_all_gathers_are_compute_spans_drawn_as_collectives(tmp_path):
    """DeepSpeed 0.3.13's all-gather before each gradient receive (recv_gather_times) is a span
    ``all-gather`` on its device's compute thread: in the hand-worked 2-stage, 3-micro-batch
    step of tests/test_profiles_frameworks.py (stage 0's G 1) at [5, 6], [10, 11] and
    [12.5, 13.5], shifted by 6.5 when s0r0 is down over [5.5, 6.5) (restart cost 0): the cut
    one ``all-gather (lost)`` over [5, 5.5]. The Gantt chart counts it busy as the engine
    does (bubble 7 / 16) and draws it as a collective, not as a job engine's step."""
    from dataclasses import replace

    trace_file = tmp_path / "down.csv"
    trace_file.write_text("worker,start,end\ns0r0,5.5,6.5\n")
    base = TrainingConfig(stages=2, replicas=1, microbatches=3, steps=1, schedule="1f1b",
                          p2p="blocking", replica_times=(((1.0, 1.0),), ((1.0, 2.0),)),
                          transfer_times=(((0.5, 0.5),),), recv_gather_times=((1.0,), (0.0,)),
                          sync="none")
    for cfg, shift, lost in ((base, 0.0, []),
                             (replace(base, failure_trace=str(trace_file), restart_cost=0.0),
                              6.5, [(5.0, 5.5, 0)])):
        metrics, trace = _record(cfg)
        names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
        spans = [(names[e["pid"]], e["name"], e["ts"] / US, (e["ts"] + e["dur"]) / US,
                  e["args"]["microbatch"]) for e in _x(trace, "compute")
                 if e["name"].startswith("all-gather")]
        want = [("s0r0", "all-gather (lost)", a, b, i) for a, b, i in lost] + [
            ("s0r0", "all-gather", a + shift, b + shift, i)
            for a, b, i in ((5.0, 6.0, 0), (10.0, 11.0, 1), (12.5, 13.5, 2))]
        spans, want = sorted(spans), sorted(want)
        assert [(d, n, i) for d, n, _, _, i in spans] == [(d, n, i) for d, n, _, _, i in want]
        assert [t for x in spans for t in x[2:4]] == pytest.approx(
            [t for x in want for t in x[2:4]], abs=1e-12)
        assert metrics["bubble_fraction"] == pytest.approx(7 / 16, abs=1e-12)
        g = gantt(trace)
        assert g.bubble == pytest.approx(metrics["bubble_fraction"], abs=1e-12)
        kinds = {(b.kind, b.lost) for r in g.rows for b in r.bars
                 if b.name.startswith("all-gather")}
        assert kinds == {("collective", False)} | ({("collective", True)} if lost else set())


def test_replicas_on_named_hosts_are_labelled_with_them(tmp_path, capsys):
    """(user trial 5) On a graph file with named hosts (``us-east-gpu0``) the file and the
    Gantt chart named each replica ``s0r0`` only, so where it ran could not be read. Each
    replica's process carries its node as ``process_labels`` (valid Trace Event Format), and
    the chart's rows say ``s0r0 @us-east-gpu0``; a family's integer hosts are not shown."""
    net = tmp_path / "zones.edgelist"
    net.write_text("us-east-gpu0 us-east-sw 1ms 1GB/s\nus-east-sw eu-west-sw 20ms 100MB/s\n"
                   "eu-west-gpu0 eu-west-sw 1ms 1GB/s\nus-east-gpu1 us-east-sw 1ms 1GB/s\n")
    path = tmp_path / "t.json"
    assert main(["train", "--stages", "1", "--replicas", "2", "--microbatches-per-step", "2",
                 "--steps", "4", "--param-size", "1MB", "--network", str(net), "--network-nodes",
                 "us-east-gpu0,eu-west-gpu0", "--sync", "diloco:every=2", "--replications", "1",
                 "--timeline", str(path), "--quiet"]) == 0
    capsys.readouterr()
    obj = read_timeline(path)
    assert validate(obj) == []
    names = {e["pid"]: e["args"]["name"] for e in obj["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    labels = {names[e["pid"]]: e["args"]["labels"] for e in obj["traceEvents"]
              if e["ph"] == "M" and e["name"] == "process_labels"}
    assert labels == {"s0r0": "us-east-gpu0", "s0r1": "eu-west-gpu0"}
    rows = [r.label for r in gantt(obj).rows]
    assert "s0r0 @us-east-gpu0 compute" in rows and "s0r1 @eu-west-gpu0 compute" in rows
    plain = tmp_path / "p.json"
    assert main(["train", "--stages", "1", "--replicas", "2", "--microbatches-per-step", "2",
                 "--steps", "2", "--network", "tree:racks=1,hosts=2", "--replications", "1",
                 "--timeline", str(plain), "--quiet"]) == 0
    capsys.readouterr()
    assert "s0r0 compute" in [r.label for r in gantt(read_timeline(plain)).rows]


def test_streaming_with_failures_records_who_syncs_each_fragment(tmp_path):
    """Streaming DiLoCo with a failure (two groups of one worker, T = 3, H = 2, P = 2, S = 10
    over B = 5; worker 1 down over [4.5, 10.5)): each outer sync on the timeline names its
    fragment and its ring, group 0 alone at steps 2 and 3 while group 1 is down and
    downloading, both from step 4 (tests/test_training_outer.py works the times out)."""
    p = tmp_path / "down.csv"
    p.write_text("worker,start,end\ns0r1,4.5,10.5\n")
    cfg = TrainingConfig(stages=1, replicas=2, microbatches=2, steps=6, forward_time=1.0,
                         param_size=10.0, bandwidth=5.0,
                         sync="diloco:every=2,fragments=2,recovery=params",
                         failure_trace=str(p))
    metrics, trace = _record(cfg)
    assert metrics["training_time"] == pytest.approx(22.0)
    syncs = sorted((e["args"]["key"], e["args"]["fragment"], e["args"]["groups"],
                    e["ts"] / 1e6) for e in trace["traceEvents"]
                   if e.get("name", "").startswith("outer sync"))
    assert syncs == [(1, 0, [0, 1], 3.0), (2, 1, [0], 7.0), (3, 0, [0], 10.0),
                     (4, 1, [0, 1], 13.0), (5, 0, [0, 1], 17.0), (6, 1, [0, 1], 21.0)]


def test_a_job_engines_lost_step_names_its_step(tmp_path):
    """The job engine's ``lost step`` had no ``step`` argument, so the Gantt chart labelled
    every such loss ``step -1 (lost)``. On a scripted trace (checkpoints every 5 steps of 6 s
    at 3 s each; a node removed at 100 s, during step 15 that began at 99 s) the loss is
    step 15, from 99 to 100, and the chart labels it so."""
    from sim.traces import TraceReplay
    from sim.training.strategies import StepTimes
    from sim.training.strategies.job import job_model

    p = tmp_path / "events.csv"  # Oobleck event format, milliseconds
    p.write_text("0,add,n1\n0,add,n2\n0,add,n3\n0,add,n4\n100000,remove,n2\n2000000,remove,n1\n")
    cfg = TrainingConfig(stages=2, replicas=2, microbatches=4, steps=10**6, max_time=150.0,
                         step_times=StepTimes("pipelines", (1, 2), (10.0, 6.0)),
                         strategy="checkpoint-restart:every=5,checkpoint=3,restart=20,boot=0",
                         failure_trace=TraceReplay(str(p)), stall_limit=math.inf)
    rec = Recorder()
    job_model(cfg, Streams(0).replication(0), recorder=rec)
    trace = rec.trace()
    assert validate(trace) == []
    (lost,) = [e for e in _x(trace, "step") if e["name"] == "lost step"]
    assert (lost["ts"], lost["dur"], lost["args"]["step"]) == (99e6, 1e6, 15)
    labels = [s for s in gantt(trace).steps if s.lost]
    assert [s.step for s in labels] == [15]


def test_an_aborted_outer_all_reduce_is_drawn_aborted(tmp_path):
    """The same two groups, s0r1 down from 7 (in outer step 0's ring [6, 8)) to 1000: the
    ring is aborted at 7 (``outer sync 0 aborted`` on ``outer`` and on both replicas, 6 to
    7, ``aborted`` true); group 0 notices at 17 (the 10 s heartbeat timeout) and syncs
    alone (a ring of one, no time), then at 23 and 29, the run's end; it waited 6 to 17,
    group 1 until it went down. Before, the ring ran to 8 through the dead group."""
    metrics, trace = _record(_two_groups_down(tmp_path, "7.0,1000"))
    assert metrics["training_time"] == pytest.approx(29.0)
    got = [e for e in _named(trace) if "outer" in e[1]]
    want = [("group 0", "outer wait", 6.0, 17.0),
            ("group 1", "outer wait", 6.0, 7.0),
            ("outer", "outer sync 0", 17.0, 17.0),
            ("outer", "outer sync 0 aborted", 6.0, 7.0),
            ("outer", "outer sync 1", 23.0, 23.0),
            ("outer", "outer sync 2", 29.0, 29.0),
            ("s0r0", "outer all-reduce aborted", 6.0, 7.0),
            ("s0r1", "outer all-reduce aborted", 6.0, 7.0)]
    assert got == [(p, n, pytest.approx(a), pytest.approx(b)) for p, n, a, b in want]
    assert all(e["args"]["aborted"] for e in _x(trace) if "aborted" in e["name"])
