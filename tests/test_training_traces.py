"""Trace replay in the training system: availability, exact lost time, CLI flags and refusals."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.rng import Streams
from sim.traces import TraceEnded, TraceReplay, load_trace, slot_patterns, trace_slots, trace_stats
from sim.training import TrainingConfig, TrainingSystem, training_model

#: Shipped trace -> a (stages, replicas) layout with exactly its slots.
LAYOUT = {"aws-p2-3day": (4, 4), "aws-g4dn-24h": (4, 3), "aws-p2-19h": (2, 5),
          "gcp-a100": (8, 8), "aws-p3": (4, 8), "synthetic-10m": (5, 6), "synthetic-6h": (5, 6)}
SPAN = 200.0  # simulated time units one whole trace is squeezed into


def _whole_trace(name: str, policy: str, *, copies: int = 1, loops: int = 1) -> TrainingConfig:
    L, r = LAYOUT[name]
    P = load_trace(name).end
    replay = TraceReplay(name, policy=policy, speedup=P / SPAN, loop=loops > 1)
    return TrainingConfig(stages=L, replicas=r * copies, microbatches=1, steps=10**6,
                          schedule="swarm", routing="least-loaded", backward_ratio=0.0,
                          failure_trace=replay, max_wait=math.inf, max_time=SPAN * loops)


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_replayed_availability_is_the_traces_for_every_shipped_trace(name):
    """Every slot replayed over the whole trace: the workers' up-fraction is the trace's exactly."""
    assert math.prod(LAYOUT[name]) == trace_slots(load_trace(name))
    cfg = _whole_trace(name, "random")
    m = training_model(cfg, Streams(1).replication(0))
    assert m["finished"] == 0 and m["steps_done"] > 0  # it trained, and ran the whole span
    want = trace_stats(load_trace(name))["availability"]
    assert m["worker_availability"] == pytest.approx(want, abs=1e-12)
    assert cfg.failure_trace.exact_availability(cfg.workers, SPAN) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("policy", ["recent", "domain", "random+tile"])
def test_replayed_availability_under_each_policy_tiling_and_looping(policy):
    """The policies only choose which slot goes; tiling two copies over two loops keeps the law."""
    tile = policy.endswith("+tile")
    cfg = _whole_trace("aws-p3", policy, copies=2 if tile else 1, loops=2 if tile else 1)
    m = training_model(cfg, Streams(2).replication(0))
    want = trace_stats(load_trace("aws-p3"))["availability"]
    assert m["worker_availability"] == pytest.approx(want, abs=1e-12)


def test_fewer_workers_replay_the_first_slots_in_stage_major_order():
    """8 of aws-p3's 32 slots under recent: worker k's up-fraction is slot k's, from slot_patterns."""
    tr = load_trace("aws-p3")
    P = tr.end
    cfg = TrainingConfig(stages=2, replicas=4, microbatches=1, steps=10**6, schedule="swarm",
                         routing="least-loaded", backward_ratio=0.0, max_time=SPAN,
                         max_wait=math.inf, failure_trace=TraceReplay("aws-p3", speedup=P / SPAN))
    s = TrainingSystem(cfg, Streams(0).replication(0))
    s.run()
    pats = slot_patterns(tr, policy="recent")
    for k, w in enumerate(s.workers):
        want = 1 - sum(e - b for b, e in pats[k]) / P
        assert w.own_availability(SPAN) == pytest.approx(want, abs=1e-12), k
    assert len({round(w.own_availability(SPAN), 9) for w in s.workers}) > 1  # slots differ


def _window_trace(tmp_path) -> str:
    """A one-instance SkyPilot trace (1 s samples): down from 41 s to 57 s, up until 399 s."""
    p = tmp_path / "window.json"
    data = [1] * 41 + [0] * 16 + [1] * 343
    p.write_text(json.dumps({"metadata": {"gap_seconds": 1}, "data": data}))
    return str(p)


def _window_config(path: str, **kw) -> TrainingConfig:
    # speed-up 4: the outage is [10.25, 14.25) in simulated time, a quarter into step 10's pass
    base = dict(stages=1, replicas=1, microbatches=1, steps=20, schedule="gpipe",
                routing="round-robin", forward_time=1.0, backward_ratio=0.0, param_size=1.0,
                bandwidth=2.0, max_wait=math.inf,
                failure_trace=TraceReplay(path, speedup=4.0))
    base.update(kw)
    return TrainingConfig(**base)


def test_one_worker_down_for_a_known_window_stalls_exactly_that_window_plus_download(tmp_path):
    """Only worker down for [10.25, 14.25): pass lost 0.25, stall 4 + download 0.5, 20 steps in 24.75."""
    s = TrainingSystem(_window_config(_window_trace(tmp_path)), Streams(0).replication(0))
    m = s.run()
    assert m["lost_passes"] == 1 and m["drop_rate"] == 0
    assert m["lost_lost_pass"] == pytest.approx(0.25, abs=1e-12)
    assert m["lost_download"] == pytest.approx(0.5, abs=1e-12)
    assert m["lost_stall"] == pytest.approx(4.0 + 0.5, abs=1e-12)
    assert m["training_time"] == pytest.approx(20 + 0.25 + 4.0 + 0.5, abs=1e-12)
    assert m["throughput"] == pytest.approx(20 / 24.75, abs=1e-12)
    assert m["worker_availability"] == pytest.approx(1 - 4.0 / 24.75, abs=1e-12)


@pytest.mark.parametrize("bound", [99.75, math.inf])
def test_a_run_that_ends_at_the_traces_last_instant_finishes(tmp_path, bound):
    """The window trace ends at 399 / 4 = 99.75; 95 steps end there (24.75 for the first 20,
    then 75 of 1). The trace covers its last instant: the run finishes at 99.75, bounded
    there or not (it used to stop at the bound unfinished or, unbounded, end with
    TraceEnded at 99.75). One more step runs past the trace: TraceEnded, as before."""
    path = _window_trace(tmp_path)
    m = TrainingSystem(_window_config(path, steps=95, max_time=bound),
                       Streams(0).replication(0)).run()
    assert m["finished"] == 1.0 and m["steps_done"] == 95
    assert m["training_time"] == 99.75
    with pytest.raises(TraceEnded, match="ended at simulated time 99.75"):
        TrainingSystem(_window_config(path, steps=96), Streams(0).replication(0)).run()


def test_trace_start_moves_the_window(tmp_path):
    """Starting 40 trace seconds in, the outage is [0.25, 4.25): the same loss, at step 0."""
    cfg = _window_config(_window_trace(tmp_path),
                         failure_trace=TraceReplay(_window_trace(tmp_path), speedup=4.0, start=40.0))
    m = training_model(cfg, Streams(0).replication(0))
    assert m["lost_lost_pass"] == pytest.approx(0.25, abs=1e-12)
    assert m["lost_stall"] == pytest.approx(4.5, abs=1e-12)
    assert m["training_time"] == pytest.approx(24.75, abs=1e-12)


def test_cli_replays_a_trace_file_with_the_same_flags_as_pipeline(tmp_path, capsys):
    """dtsim train --failure-trace FILE --trace-speedup: the hand-computed timeline, end to end."""
    path = _window_trace(tmp_path)
    rc = main(["train", "--stages", "1", "--replicas", "1", "--microbatches-per-step", "1",
               "--steps", "20", "--backward-ratio", "0", "--param-size", "1", "--bandwidth", "2",
               "--max-wait", "inf", "--failure-trace", path, "--trace-speedup", "4",
               "--replications", "2", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["wall_time_mean"] == pytest.approx(24.75, abs=1e-12)
    assert out["lost_time"]["stall"] == pytest.approx(4.5, abs=1e-12)
    assert out["failure_trace"] == path and out["trace_policy"] == "recent"


def test_cli_named_csv_is_replayed_by_name_as_before(tmp_path, capsys):
    """A dtsim CSV of workers s{j}r{i} keeps its by-name meaning (the checkpoint timeline)."""
    p = tmp_path / "named.csv"
    p.write_text("worker,start,end\ns0r0,8.0,9.0\n")
    rc = main(["train", "--stages", "1", "--microbatches-per-step", "1", "--steps", "4",
               "--failure-trace", str(p), "--checkpoint-every", "2", "--checkpoint-cost", "1",
               "--restart-cost", "2", "--replications", "2", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["wall_time_mean"] == pytest.approx(18.0)
    assert out["trace_policy"] is None


def test_cli_shipped_trace_availability_is_reported(capsys):
    """--failure-trace NAME: the JSON's worker availability is the trace's (all slots, whole span)."""
    P = load_trace("aws-g4dn-24h").end
    rc = main(["train", "--stages", "4", "--replicas", "3", "--microbatches-per-step", "1",
               "--steps", "1000000", "--schedule", "swarm", "--routing", "least-loaded",
               "--backward-ratio", "0", "--failure-trace", "aws-g4dn-24h",
               "--trace-speedup", repr(P / SPAN), "--max-time", repr(SPAN),
               "--trace-policy", "domain", "--max-wait", "inf", "--replications", "2", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    want = trace_stats(load_trace("aws-g4dn-24h"))["availability"]
    assert out["worker_availability"] == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("engine", [(), ("--strategy", "checkpoint-restart"),
                                    ("--sync", "diloco:every=4")], ids=["des", "job", "diloco"])
def test_trace_removals_are_not_the_spot_preemptions(capsys, engine):
    """The JSON's preemptions are the spot model's (--mtbf) in every engine: 0 under a trace
    alone whose workers are lost, which the text output says under its failure-trace line."""
    args = ["train", "--stages", "1", "--replicas", "4", "--microbatches-per-step", "4",
            "--steps", "20", "--replications", "2", "--failure-trace", "aws-p3",
            "--trace-policy", "random", "--trace-speedup", "20", *engine]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["preemptions"] == 0.0 and out["worker_availability"] < 0.9
    if engine and engine[0] == "--strategy":
        assert out["strategy_counts"]["losses"] > 0
    assert main(args) == 0
    text = capsys.readouterr().out
    counted = "losses (strategy_counts.losses), " if "strategy_counts" in out else ""
    assert (f"  the trace's removals are worker failures: {counted}lost time and availability, "
            "not the JSON's preemptions (the spot model's, --mtbf)\n") in text


BAD = [
    (["--stages", "5", "--replicas", "8", "--failure-trace", "aws-p3"],
     "'workers' must be at most the trace's 32 worker slots (or a +tile policy): 40"),
    (["--failure-trace", "aws-p3", "--availability", "0.9"],
     "'availability' must be given only without --failure-trace (the trace sets the workers' "
     "up and down times): 0.9"),
    (["--failure-trace", "aws-p3", "--failure-distribution", "weibull"],
     "'failure_distribution' must be given only without --failure-trace (the trace sets the "
     "workers' up and down times): 'weibull'"),
    (["--trace-policy", "random"], "'trace_policy' must be unset without --failure-trace: 'random'"),
    (["--failure-trace", "aws-p3", "--trace-policy", "oldest"],
     "'trace_policy' must be one of recent, random, domain: 'oldest'"),
    (["--failure-trace", "no-such-trace"],
     "'failure_trace' must be a readable file or a shipped trace name: "
     "'no-such-trace (No such file or directory)'"),
    (["--failure-trace", "aws-p3", "--max-time", "50000"],
     "'max_time' must be at most the trace's 40920 simulated time units (or --trace-loop): 50000.0"),
    (["--failure-trace", "aws-p3", "--trace-resample", "offset"],
     "'trace_loop' must be set with resample offset (offsets wrap around): False"),
    (["--failure-trace", "{named}", "--trace-speedup", "2"],
     "'trace_speedup' must be given only with a trace replayed through slots (a dtsim CSV of "
     "workers s{stage}r{replica} is replayed by name, in its own times): 2.0"),
]


@pytest.mark.parametrize("argv,message", BAD)
def test_bad_trace_options_are_one_line_exit_2(tmp_path, capsys, argv, message):
    """Each bad trace option: exit 2, one line naming the option, before any run."""
    named = tmp_path / "named.csv"
    named.write_text("worker,start,end\ns0r0,1,2\n")
    argv = [a.replace("{named}", str(named)) for a in argv]
    assert main(["train", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"dtsim train: error: {message}"


def test_a_run_past_a_non_looping_trace_stops_with_one_line(tmp_path, capsys):
    """Training longer than the trace (no --trace-loop, no --max-time): one line, exit 1."""
    rc = main(["train", "--stages", "1", "--steps", "1000", "--failure-trace",
               _window_trace(tmp_path), "--trace-speedup", "4", "--max-wait", "inf",
               "--replications", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert "ended at simulated time 99.75" in err[0] and "--trace-loop" in err[0]


def test_config_refuses_availability_and_too_many_workers_with_a_replay():
    """The library refuses what the CLI refuses (a replayed trace sets every worker)."""
    with pytest.raises(ConfigError, match="'availability' must be 1 with a replayed failure trace"):
        TrainingConfig(stages=2, failure_trace=TraceReplay("aws-p3"), availability=0.9)
    with pytest.raises(ConfigError, match="'workers' must be at most the trace's 10 worker slots"):
        TrainingConfig(stages=11, failure_trace=TraceReplay("aws-p2-19h"))
    TrainingConfig(stages=11, failure_trace=TraceReplay("aws-p2-19h", policy="recent+tile"))


def test_drop_rate_without_drops_prints_below_a_bound(capsys):
    """No drop seen where one can happen: 'below X', not '0 [0, 0]'; where none can: '0 (exact)'."""
    assert main(["train", "--stages", "2", "--replicas", "2", "--replications", "5",
                 "--availability", "0.999", "--mean-downtime", "0.1"]) == 0
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if ln.startswith("drop rate"))
    assert "below 0.45" in line and "[0, 0]" not in line
    assert main(["train", "--stages", "2", "--replicas", "2", "--replications", "5"]) == 0
    text = capsys.readouterr().out  # no failures: a drop cannot happen (issue 24)
    line = next(ln for ln in text.splitlines() if ln.startswith("drop rate"))
    assert "0 (exact)" in line and "below" not in line
    # a run with drops still gives an interval inside [0, 1]
    assert main(["train", "--stages", "2", "--replicas", "2", "--availability", "0.9",
                 "--replications", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    lo, hi = out["drop_rate_ci"]
    assert 0 <= lo <= out["drop_rate"] <= hi <= 1


_NET = """# three hosts on a switch; h0's link is the slow one
h0 sw 1ms 1Gbit/s
h1 sw 1ms 100Gbit/s
h2 sw 1ms 100Gbit/s
"""
_EVENTS = {"h0": "h0,0,up\nh0,30,down\nh0,90,up\n", "h1": "h1,0,up\nh1,50,down\nh1,52,up\n",
           "h2": "h2,0,up\nh2,70,down\nh2,71,up\n"}
_SPEC = "events:worker=host,time=t,event=e"


def _named(tmp_path, order, **kw):
    """A 1-stage, 3-replica all-reduce run on hosts h0..h2 replaying an event log whose boot
    rows list the hosts in ``order``."""
    net = tmp_path / "three.edges"
    net.write_text(_NET)
    log = tmp_path / f"log_{''.join(order)}.csv"
    log.write_text("host,t,e\n" + "".join(_EVENTS[h] for h in order))
    return TrainingConfig(stages=1, replicas=3, microbatches=3, steps=100, forward_time=0.1,
                          param_size=1e8, network=str(net), network_nodes=(("h0", "h1", "h2"),),
                          failure_trace=TraceReplay(str(log), format=_SPEC, loop=True), **kw)


def test_a_trace_named_as_the_hosts_is_replayed_by_name(tmp_path):
    """(user trial 15) A trace's instances took worker slots in the order they first came up,
    so a log listing the regions in another order than the network's hosts had the wrong
    worker fail, silently. Named as the run's hosts, each worker now replays its own host's
    instance: the log's row order no longer matters, and the run equals the one whose rows
    are in host order (the slot order then agrees)."""
    a = _named(tmp_path, ("h0", "h1", "h2"))
    b = _named(tmp_path, ("h2", "h1", "h0"))
    ra = training_model(a, Streams(0).replication(0))
    rb = training_model(b, Streams(0).replication(0))
    assert ra == rb
    assert a.trace_names == b.trace_names == ("h0", "h1", "h2")
    # slot by slot, the reversed log has s0r0 (on h0, the slow link) replay h2's outages (its
    # instances renamed n0..n2, named as no host): the numbers differ, so the test sees a mapping
    other = tmp_path / "other.csv"
    other.write_text("host,t,e\n" + "".join(_EVENTS[h] for h in ("h2", "h1", "h0")).replace(
        "h", "n"))
    slot = replace(b, failure_trace=TraceReplay(str(other), format=_SPEC, loop=True))
    assert slot.trace_names is None
    rs = training_model(slot, Streams(0).replication(0))
    assert rs["throughput"] < 0.95 * ra["throughput"]


def test_a_trace_named_partly_as_the_hosts_is_refused(tmp_path):
    """Some instances named as hosts and some not: refused in one line rather than guessed;
    none named so: slot k on worker k, as before (trace_names None)."""
    cfg = _named(tmp_path, ("h0", "h1", "h2"))
    log = tmp_path / "partly.csv"
    log.write_text("host,t,e\n" + _EVENTS["h0"] + _EVENTS["h1"] + _EVENTS["h2"].replace("h2", "x9"))
    with pytest.raises(ConfigError, match=r"^'failure_trace' must be a trace whose instances are "
                                          r"all named as workers or hosts of the run .*"
                                          r"\(2 of 3 instances named so, e\.g\. h0; not x9\)'$"):
        replace(cfg, failure_trace=TraceReplay(str(log), format=_SPEC))
    other = tmp_path / "other.csv"
    other.write_text("host,t,e\n" + "".join(_EVENTS[h] for h in ("h0", "h1", "h2")).replace(
        "h", "n"))
    assert replace(cfg, failure_trace=TraceReplay(str(other), format=_SPEC)).trace_names is None
    with pytest.raises(ConfigError, match=r"^'trace_model' must be trace when"):
        replace(cfg, failure_trace=TraceReplay(str(tmp_path / "log_h0h1h2.csv"), format=_SPEC,
                                               model="fitted"))


def test_a_trace_replayed_by_name_refuses_a_tiling_policy(tmp_path):
    """(lead, after smallfix6) Replayed by name, each worker replays its own instance: a
    ``+tile`` policy (copies of the trace for workers beyond its slots) was taken and ignored."""
    from sim.errors import ConfigError

    a = _named(tmp_path, ("h0", "h1", "h2"))
    tiled = replace(a.failure_trace, policy=a.failure_trace.policy_parts[0] + "+tile")
    with pytest.raises(ConfigError, match=r"'trace_policy' must be without \+tile when the "):
        replace(a, failure_trace=tiled)
