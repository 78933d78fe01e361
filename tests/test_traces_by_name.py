"""A failure trace named as the run's workers or nodes is replayed by name in every command
that replays one (dtsim pipeline, failures, gossip; dtsim design refuses it), as dtsim train
and plan replay it: a user's log listing her hosts in another order than the run's must not
fail the wrong node. Partly named is refused in one line; named as none, slot by slot as before.

Each case has a trace whose rows list the instances in another order than the run's workers,
so that slot-by-slot and by-name replay give different numbers, and checks the by-name result
against the value computed by hand from who is down when.
"""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.failures import ClusterConfig, failures_model
from sim.gossip import GossipConfig
from sim.gossip.asynchronous import AsyncGossip
from sim.pipeline import PipelineConfig
from sim.rng import Streams
from sim.traces import TraceReplay

SPEC = "events:worker=host,time=t,event=e"


def _log(tmp_path, name: str, rows: str, rename: dict[str, str] | None = None) -> str:
    """An event log ``host,t,e`` (its rows as given; instances renamed by ``rename``)."""
    for old, new in (rename or {}).items():
        rows = rows.replace(f"{old},", f"{new},")
    path = tmp_path / name
    path.write_text("host,t,e\n" + rows)
    return str(path)


def _json(capsys, *args: str) -> dict:
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _refused(capsys, *args: str) -> str:
    """The one line a refused command prints (exit 2)."""
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


_PARTLY = r"'failure_trace' must be a trace whose instances are all named as workers or hosts " \
          r"of the run \(replayed by name\) or none of them \(replayed slot by slot\): "

# ----------------------------------------------------------------------------- dtsim pipeline

#: Stage 0 has s0r0 (down 10.5-20.5) and s0r1 (down 15.5-30.5), stage 1 s1r0 (down 40.5-45.5);
#: the rows bring s1r0 up first, so slot by slot s0r0 replays s1r0's outage. s1r0's dip at 100
#: ends the trace.
_PIPE = ("s1r0,0,up\ns0r0,0,up\ns0r1,0,up\ns0r0,10.5,down\ns0r0,20.5,up\ns0r1,15.5,down\n"
         "s0r1,30.5,up\ns1r0,40.5,down\ns1r0,45.5,up\ns1r0,100,down\ns1r0,100,up\n")
_PIPE_ARGS = ("--stages", "2", "--replicas", "2,1", "--trace-format", SPEC, "--time-unit", "s",
              "--microbatches", "99", "--replications", "1")


def test_pipeline_replays_a_trace_named_as_its_workers_by_name(tmp_path, capsys):
    """Microbatches arrive at t = 1..99 and pass at once (skip budget 0): one is dropped when
    both replicas of stage 0 or the replica of stage 1 are down. By name, stage 0 is out at
    16..20 and stage 1 at 41..45: 10 drops. Slot by slot (the instances renamed, named as no
    worker), s0r0 replays s1r0's outage, s0r1 s0r0's and s1r0 s0r1's: stage 0 is never out
    and stage 1 is at 16..30: 15 drops."""
    named = _json(capsys, "pipeline", "--failure-trace", _log(tmp_path, "named.csv", _PIPE),
                  *_PIPE_ARGS)
    assert named["drop_rate"] == 10 / 99
    assert named["trace_instances"] == {"s0r0": "s0r0", "s0r1": "s0r1", "s1r0": "s1r0"}
    slot = _json(capsys, "pipeline", "--failure-trace", _log(
        tmp_path, "slot.csv", _PIPE, {"s0r0": "i-a", "s0r1": "i-b", "s1r0": "i-c"}), *_PIPE_ARGS)
    assert slot["drop_rate"] == 15 / 99
    assert "trace_instances" not in slot


def test_pipeline_by_name_lets_workers_the_trace_does_not_name_stay_up(tmp_path):
    """By name, a worker the trace does not name is up throughout, so a pipeline may have more
    workers than the trace has slots (slot by slot it is refused without +tile)."""
    f = _log(tmp_path, "named.csv", _PIPE)
    cfg = PipelineConfig(stages=2, replicas=(3, 1), microbatches=10,
                         failure_trace=TraceReplay(f, format=SPEC, time_unit="s"))
    assert cfg.trace_names == ("s0r0", "s0r1", None, "s1r0")
    renamed = _log(tmp_path, "slot.csv", _PIPE, {"s0r0": "i-a", "s0r1": "i-b", "s1r0": "i-c"})
    with pytest.raises(ConfigError, match=r"^'workers' must be at most the trace's 3 worker"):
        PipelineConfig(stages=2, replicas=(3, 1), microbatches=10,
                       failure_trace=TraceReplay(renamed, format=SPEC, time_unit="s"))


def test_pipeline_on_a_network_replays_the_hosts_instances(tmp_path):
    """With --queueing --network a worker is also named as its host: s0r0 on h1, s0r1 on h0,
    s1r0 on h2 replay h1's outage (15.5-30.5), h0's (10.5-20.5) and h2's (40.5-45.5): who is
    down when, as each worker's own up-fraction over the trace's 100 s (slot by slot, the rows
    bringing h2 up first, s0r0 replayed h2's)."""
    import simpy

    from sim.pipeline.des import build_pipeline_failures

    net = tmp_path / "three.edges"
    net.write_text("h0 sw 1ms 1Gbit/s\nh1 sw 1ms 1Gbit/s\nh2 sw 1ms 1Gbit/s\n")
    f = _log(tmp_path, "hosts.csv", _PIPE, {"s0r0": "h0", "s0r1": "h1", "s1r0": "h2"})
    cfg = PipelineConfig(stages=2, replicas=(2, 1), microbatches=10, queueing=True,
                         routing="least-loaded", network=str(net),
                         network_nodes=(("h1", "h0"), ("h2",)),
                         failure_trace=TraceReplay(f, format=SPEC, time_unit="s"))
    assert cfg.trace_names == ("h1", "h0", "h2")
    env = simpy.Environment()
    fm, workers, _ = build_pipeline_failures(cfg, env, Streams(0).replication(0))
    fm.start()
    env.run(until=100.0)
    assert [w.own_availability(100.0) for w in workers] == pytest.approx([0.85, 0.9, 0.95],
                                                                         abs=1e-12)


# ----------------------------------------------------------------------------- dtsim failures

#: worker0 down 10-20, worker2 down 15-30, worker1 down 40-41; the rows bring worker1 up first.
_FAIL = ("worker1,0,up\nworker0,0,up\nworker2,0,up\nworker0,10,down\nworker0,20,up\n"
         "worker2,15,down\nworker2,30,up\nworker1,40,down\nworker1,41,up\nworker1,100,down\n"
         "worker1,100,up\n")
_FAIL_ARGS = ("--cluster-workers", "3", "--domains", "2", "--domain-outage", "0",
              "--trace-format", SPEC, "--time-unit", "s", "--replications", "2")


def test_failures_replays_a_trace_named_as_its_workers_by_name(tmp_path, capsys):
    """Domain 0 holds worker0 and worker2, domain 1 worker1; the horizon is the trace's 100 s.
    By name, domain 0 is all down at 15-20 and domain 1 at 40-41: joint outage (5 + 1) / 2 /
    100. Slot by slot, worker0 replays worker1's outage (40-41), worker1 worker0's (10-20) and
    worker2 its own: (0 + 10) / 2 / 100. The mean availability is the same either way."""
    named = _json(capsys, "failures", "--failure-trace", _log(tmp_path, "named.csv", _FAIL),
                  *_FAIL_ARGS)
    assert named["joint_outage"] == pytest.approx(0.03, abs=1e-12)
    assert named["worker_availability"] == pytest.approx(1 - 26 / 300, abs=1e-12)
    assert named["target_availability"] == pytest.approx(1 - 26 / 300, abs=1e-12)
    assert named["trace_instances"] == {f"worker{i}": f"worker{i}" for i in range(3)}
    slot = _json(capsys, "failures", "--failure-trace", _log(
        tmp_path, "slot.csv", _FAIL, {f"worker{i}": f"i-{i}" for i in range(3)}), *_FAIL_ARGS)
    assert slot["joint_outage"] == pytest.approx(0.05, abs=1e-12)
    assert "trace_instances" not in slot


def test_failures_by_name_keeps_unnamed_workers_up(tmp_path):
    """Four workers, a trace naming three: worker3 is up throughout (slot by slot, four
    workers on three slots is refused)."""
    f = _log(tmp_path, "named.csv", _FAIL)
    cfg = ClusterConfig(workers=4, domains=1, domain_outage=0.0, horizon=100.0,
                        failure_trace=TraceReplay(f, format=SPEC, time_unit="s"))
    assert cfg.trace_names == ("worker0", "worker1", "worker2", None)
    m = failures_model(cfg, Streams(0).replication(0))
    assert m["worker_availability"] == pytest.approx(1 - 26 / 400, abs=1e-12)
    assert m["joint_outage"] == 0.0


# ----------------------------------------------------------------------------- dtsim gossip

#: A 4-cycle a-b-c-d with the chord a-c: nodes a, b, c, d are positions 0..3.
_EDGES = "a b\nb c\nc d\nd a\na c\n"
#: a down 10-30, c down 50-60, b and d never (d's dip at 100 ends the trace); the rows bring d
#: up first, then a, c, b: slot by slot node a replays d, b replays a, c replays c, d replays b.
_GOSSIP = ("d,0,up\na,0,up\nc,0,up\nb,0,up\na,10,down\na,30,up\nc,50,down\nc,60,up\n"
           "d,100,down\nd,100,up\n")


def _gossip_args(tmp_path, log: str, *more: str) -> tuple[str, ...]:
    net = tmp_path / "named.edges"
    net.write_text(_EDGES)
    return ("gossip", "--protocol", "async", "--topology", str(net), "--rounds", "100",
            "--replications", "2", "--failure-trace", log, "--trace-format", SPEC,
            "--time-unit", "s", *more)


def test_gossip_replays_a_trace_named_as_the_graphs_nodes_by_name(tmp_path):
    """Who is down when: each node's own up-fraction over the 100 s replayed, on the event
    engine. By name a is down 20 s and c 10 s; slot by slot (the same log renamed) node a
    replays d (up), b replays a and c replays c."""
    def availabilities(log: str) -> list[float]:
        net = tmp_path / "named.edges"
        net.write_text(_EDGES)
        cfg = GossipConfig(topology=str(net), protocol="async", rounds=100, engine="des",
                           failure_trace=TraceReplay(log, format=SPEC, time_unit="s"))
        g = AsyncGossip(cfg, Streams(0).replication(0))
        g.run()
        return [w.own_availability(100.0) for w in g._workers]

    named = _log(tmp_path, "named.csv", _GOSSIP)
    assert availabilities(named) == pytest.approx([0.8, 1.0, 0.9, 1.0], abs=1e-12)
    slot = _log(tmp_path, "slot.csv", _GOSSIP, {v: f"n-{v}" for v in "abcd"})
    assert availabilities(slot) == pytest.approx([1.0, 0.8, 0.9, 1.0], abs=1e-12)


def test_gossip_by_name_equals_the_log_in_node_order_on_every_engine(tmp_path, capsys):
    """The compiled engine (auto's) and the event engine: by name, the numbers are those of
    the log whose rows list the nodes in position order replayed slot by slot (slot k is then
    node k's own instance), and differ from the out-of-order log replayed slot by slot."""
    in_order = ("a,0,up\nb,0,up\nc,0,up\nd,0,up\na,10,down\na,30,up\nc,50,down\nc,60,up\n"
                "d,100,down\nd,100,up\n")
    ref = _log(tmp_path, "ref.csv", in_order, {v: f"n-{v}" for v in "abcd"})
    slot = _log(tmp_path, "slot.csv", _GOSSIP, {v: f"n-{v}" for v in "abcd"})
    named = _log(tmp_path, "named.csv", _GOSSIP)
    for engine in ("compiled", "des"):
        got = _json(capsys, *_gossip_args(tmp_path, named, "--engine", engine))
        want = _json(capsys, *_gossip_args(tmp_path, ref, "--engine", engine))
        other = _json(capsys, *_gossip_args(tmp_path, slot, "--engine", engine))
        assert got["trace_instances"] == {v: v for v in "abcd"}
        assert "trace_instances" not in want
        for key in ("disagreement", "honest_mean"):
            assert got[key] == want[key], (engine, key)
        assert got["disagreement"] != other["disagreement"], engine


def test_gossip_family_integers_never_match(tmp_path):
    """A family's nodes are integers: a trace's instance names (text) never match them, so a
    log of instances '0'..'3' is replayed slot by slot, as before."""
    f = _log(tmp_path, "digits.csv", _GOSSIP, {"a": "0", "b": "1", "c": "2", "d": "3"})
    cfg = GossipConfig(topology="ring:n=4", protocol="async", rounds=100,
                       failure_trace=TraceReplay(f, format=SPEC, time_unit="s"))
    assert cfg.trace_names is None


# ----------------------------------------------------------------------------- partly named

@pytest.mark.parametrize("command", ["pipeline", "failures", "gossip"])
def test_a_trace_named_partly_as_the_runs_workers_is_refused(tmp_path, capsys, command):
    """Some instances named as the run's workers or nodes and some not: refused in one line
    naming --failure-trace, with how many matched, one that did and the first that did not
    (dtsim train's rule and words)."""
    if command == "pipeline":
        f = _log(tmp_path, "partly.csv", _PIPE, {"s1r0": "i-c"})
        argv, tail = ("pipeline", "--failure-trace", f, *_PIPE_ARGS), "2 of 3, e.g. s0r0; not i-c"
    elif command == "failures":
        f = _log(tmp_path, "partly.csv", _FAIL, {"worker2": "i-2"})
        argv, tail = ("failures", "--failure-trace", f, *_FAIL_ARGS), "2 of 3, e.g. worker1; not i-2"
    else:
        f = _log(tmp_path, "partly.csv", _GOSSIP, {"c": "x9"})
        argv, tail = _gossip_args(tmp_path, f), "3 of 4, e.g. d; not x9"
    err = _refused(capsys, *argv)
    assert err.startswith(f"dtsim {command}: error: " + _PARTLY.replace("\\", ""))
    assert err.endswith("(" + tail.replace(",", " instances named so,", 1) + ")'")


# ----------------------------------------------------------------------------- dtsim design

def test_design_refuses_a_trace_named_as_pipeline_workers(tmp_path, capsys):
    """dtsim design answers under the random policy (any worker on any slot): a trace named as
    the workers s{j}r{i} of its stages, wholly or partly, is refused rather than answered as
    if unnamed; named as none of them (or as workers of stages it lacks), answered as before."""
    f = _log(tmp_path, "named.csv", _PIPE)
    err = _refused(capsys, "design", "--stages", "2", "--failure-trace", f,
                   "--trace-format", SPEC, "--time-unit", "s")
    assert err.startswith("dtsim design: error: 'failure_trace' must be a trace whose "
                          "instances are named as none of the pipeline's workers ")
    assert err.endswith("(3 of 3 instances named so, e.g. s1r0)'")
    partly = _log(tmp_path, "partly.csv", _PIPE, {"s0r0": "i-a", "s0r1": "i-b"})
    assert "(1 of 3 instances named so, e.g. s1r0)'" in _refused(
        capsys, "design", "--stages", "2", "--failure-trace", partly, "--trace-format", SPEC,
        "--time-unit", "s")
    # stage 1 is not a stage of a 1-stage design, and s0r00 is not a worker's name
    other = _log(tmp_path, "other.csv", _PIPE, {"s0r0": "i-a", "s0r1": "s0r00"})
    out = _json(capsys, "design", "--stages", "1", "--failure-trace", other,
                "--trace-format", SPEC, "--time-unit", "s", "--target-drop", "0.5")
    assert out["slots"] == 3


@pytest.mark.parametrize("command", ["pipeline", "failures", "gossip"])
@pytest.mark.parametrize("policy", ["random", "domain"])
def test_a_mapping_policy_with_a_trace_replayed_by_name_is_refused(tmp_path, capsys, command,
                                                                    policy):
    """Replayed by name, a worker replays its own instance: no policy maps slots to workers,
    so --trace-policy random or domain would be taken and ignored; refused in one line (the
    default, recent, named explicitly is the replay itself and runs)."""
    if command == "pipeline":
        argv = ("pipeline", "--failure-trace", _log(tmp_path, "named.csv", _PIPE), *_PIPE_ARGS)
    elif command == "failures":
        argv = ("failures", "--failure-trace", _log(tmp_path, "named.csv", _FAIL), *_FAIL_ARGS)
    else:
        argv = _gossip_args(tmp_path, _log(tmp_path, "named.csv", _GOSSIP))
    err = _refused(capsys, *argv, "--trace-policy", policy)
    assert err == (f"dtsim {command}: error: 'trace_policy' must be recent (the default) when "
                   "the trace's instances are named as the run's workers or hosts (replayed by "
                   "name: a worker replays its own instance, no policy maps slots to workers): "
                   f"'{policy}'")
    assert main([*argv, "--trace-policy", "recent"]) == 0
