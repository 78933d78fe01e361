"""Step-level strategies on a user's own options and traces: names, conventions, stops."""

from __future__ import annotations

import json
import time

import pytest

from sim.cli import main
from sim.engines import select
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig
from sim.training.strategies import StepTimes

TABLE = StepTimes("pipelines", (1, 2), (20.0, 10.0))


def _trace(tmp_path, rows: str) -> str:
    p = tmp_path / "trace.csv"
    p.write_text("worker,start,end\n" + rows)
    return str(p)


def _run(cfg):
    sel = select("training", cfg)
    return sel.engine.run(cfg, Streams(0).replication(0))


def test_pipeline_i_holds_the_workers_named_ri(tmp_path):
    """Redundancy, 2 stages x 2 replicas: losing s0r0 then s1r0 (both of pipeline 0, by their
    names) before the rebalance is fatal; losing s0r0 then s1r1 is not. With the stage-major
    order of before, pipeline 0 was (s0r0, s0r1) and the first pair was not fatal."""
    def fatal(second: str) -> float:
        cfg = TrainingConfig(stages=2, replicas=2, steps=4, step_times=TABLE,
                             failure_trace=_trace(tmp_path, f"s0r0,5,1e9\n{second},6,1e9\n"),
                             strategy="redundancy:every=0,rebalance=20,restart=3,boot=0")
        return _run(cfg)["fatal_failures"]

    assert fatal("s1r0") == 1.0
    assert fatal("s1r1") == 0.0


def test_des_and_checkpoint_restart_checkpoint_after_the_last_step_alike():
    """Failure-free, 4 steps checkpointed every 2 at cost 5: the training DES and the
    checkpoint-restart strategy both end with a checkpoint (4 T + 2 C; the strategy gave
    4 T + C before)."""
    base = dict(stages=2, replicas=1, steps=4, microbatches=4)
    des = _run(TrainingConfig(**base, checkpoint_every=2, checkpoint_cost=5.0, restart_cost=1.0))
    job = _run(TrainingConfig(**base, strategy="checkpoint-restart:every=2,checkpoint=5,boot=0"))
    T = des["step_time_mean"]
    assert des["training_time"] == pytest.approx(4 * T + 2 * 5.0, rel=1e-12)
    assert job["training_time"] == pytest.approx(des["training_time"], rel=1e-12)
    assert job["checkpoints"] == des["checkpoints"] == 2.0


def test_a_worker_ready_before_a_restart_ends_joins_it(tmp_path):
    """s0r1 leaves at 15 and is back (ready, boot 0) at 25, during the restart 15-45: the
    restart forms 2 pipelines (6 steps of 10 to 105, the last checkpoint to 106); it formed
    1 pipeline of 20 s steps before (166)."""
    cfg = TrainingConfig(stages=2, replicas=2, steps=6, step_times=TABLE,
                         failure_trace=_trace(tmp_path, "s0r1,15,25\n"),
                         strategy="checkpoint-restart:every=100,checkpoint=1,restart=30,boot=0,"
                                  "settle=0")
    m = _run(cfg)
    assert m["training_time"] == 106.0 and m["restarts"] == 1.0


def test_a_run_that_redoes_rolled_back_steps_forever_stops_with_its_reason(capsys):
    """checkpoint-restart at a worker MTBF of 100 s (8 workers, 33 s steps, 10 steps between
    checkpoints): steps complete but are always rolled back; the stall watchdog counts only
    new steps and checkpoints, so the run stops with its reason (it ran > 10 min before).
    Without growing: Varuna's morph checkpoints at a poll when replaced workers are ready,
    and that progress lets the default finish its 20 steps (39781 restarts, 10 checkpoints)."""
    t0 = time.process_time()
    assert main(["train", "--strategy", "checkpoint-restart:grow=false", "--mtbf", "100", "--steps", "20",
                 "--stages", "4", "--replicas", "2", "--replications", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert time.process_time() - t0 < 60
    assert out["stalled"] == 1 and "a worker is lost every" in out["stall_reason"]


@pytest.mark.parametrize("spec", ["checkpoint-restart:every=1e18,grow=false",
                                  "redundancy:slowdown=1e300"])
def test_never_ending_strategy_parameters_stop_with_a_reason(capsys, spec):
    """every=1e18 (read as the integer 10^18) and a 1e300 slowdown: the run stops with its
    reason (both ran forever; checkpoint-restart without growing, whose morph checkpoints
    would let it progress)."""
    assert main(["train", "--strategy", spec, "--mtbf", "100", "--steps", "20", "--stages", "4",
                 "--replicas", "2", "--replications", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stalled"] == 1


def test_infinite_slowdown_and_unreachable_step_table_are_refused(tmp_path):
    """slowdown=inf (a node that never finishes) and a step table whose smallest count the job
    cannot reach (10^12 workers): refused before the run (an endless run and a SimPy
    'No scheduled events left' before)."""
    with pytest.raises(ConfigError, match="'slowdown' must be a finite number >= 1"):
        TrainingConfig(stages=2, replicas=2, strategy="redundancy:slowdown=inf")
    f = tmp_path / "st.csv"
    f.write_text("workers,step_time\n1000000000000,5\n")
    with pytest.raises(ConfigError, match="'step_times' must be a table with a count the job"):
        TrainingConfig(stages=2, replicas=2, strategy="checkpoint-restart", step_times=str(f))


@pytest.mark.parametrize("spec, name", [("redundancy:rebalance=1e10", "rebalance"),
                                        ("checkpoint-restart:restart=1e10", "restart"),
                                        ("reconfiguration:reconfigure=1e10", "reconfigure")])
def test_a_formation_cost_failures_always_interrupt_is_refused_before_any_work(spec, name):
    """(audit 7) With a worker failing every 100 s on average (8 of them: one every 12.5 s),
    a 1e10 s formation cost never completes, and the stall watchdog waits 1000 x it: 1.6e12
    expected up/down transitions before it stops the run (it ran for hours). Refused naming
    the cost; max_time or stall_limit bound it, so either makes the same config run."""
    base = dict(stages=4, replicas=2, steps=20, mtbf=100.0, strategy=spec)
    with pytest.raises(ConfigError) as e:
        TrainingConfig(**base)
    assert e.value.name == name and e.value.value == 1e10
    assert "1.6e+12 here" in str(e.value)
    for bound in (dict(max_time=1e5), dict(stall_limit=1000.0)):
        TrainingConfig(**base, **bound)  # 2 x 0.08 x 1e5 = 1.6e4 transitions at most
    TrainingConfig(**{**base, "strategy": spec.replace("1e10", "1e4")})  # 1.6e6 transitions


# (audit 8) a checkpoint-restart parameter given where it does nothing, even at its default,
# was taken and ignored; a poll so short the run would be its polls hung or ran for minutes
@pytest.mark.parametrize("spec, line", [
    ("checkpoint-restart:grow=false,poll=300", "'poll' must be unset unless grow is true: 300.0"),
    ("checkpoint-restart:copy=0", "'copy' must be unset unless snapshot is overlapped: 0.0"),
    ("checkpoint-restart:overhead_bound=0.05",
     "'overhead_bound' must be unset unless interval is overhead: 0.05"),
    ("checkpoint-restart:poll=1e-300",
     "'poll' must be long enough for at most 1e+08 polls over the run (max_time, else 1000 x "
     "its 20 steps of 21 failure-free): 4.2e+305 here with poll: 1e-300"),
    ("checkpoint-restart:poll=1e-3",
     "'poll' must be long enough for at most 1e+08 polls over the run (max_time, else 1000 x "
     "its 20 steps of 21 failure-free): 4.2e+08 here with poll: 0.001"),
    ("checkpoint-restart:grow=false,settle=120",
     "'settle' must be unset unless grow is true: 120.0"),
    # a sleep longer than the watchdog's horizon: the job never relaunched after its first
    # failure, and the stall's reason blamed the workers
    ("checkpoint-restart:settle=1e300",
     "'settle' must be small enough that a job its failures keep interrupting stops in bounded "
     "time (the stall watchdog waits 1000 x the strategy's checkpoint, restart, settle, "
     "reconfigure and rebalance times, or stall_limit; max_time bounds it): at most 1e+08 "
     "expected up/down transitions in that window, 1.6e+302 here: 1e+300"),
])
def test_checkpoint_restart_refuses_what_it_would_ignore_or_run_away_on(capsys, spec, line):
    t0 = time.process_time()
    assert main(["train", "--replications", "1", "--mtbf", "100", "--steps", "20", "--stages",
                 "4", "--replicas", "2", "--strategy", spec]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == ["dtsim train: error: " + line]
    assert time.process_time() - t0 < 5.0


@pytest.mark.parametrize("spec", [
    "checkpoint-restart:poll=60", "checkpoint-restart:snapshot=overlapped,copy=0",
    "checkpoint-restart:interval=overhead,overhead_bound=0.05",
])
def test_checkpoint_restart_takes_them_where_they_apply(spec):
    cfg = TrainingConfig(stages=4, replicas=2, steps=20, mtbf=100.0, strategy=spec)
    assert cfg.strategy.name == "checkpoint-restart"


# (smallfix7) what a notice does, with no notice to do it with: taken and ignored
@pytest.mark.parametrize("spec, use", [("checkpoint-restart:notice=ignore", "ignore"),
                                       ("checkpoint-restart:notice=checkpoint", "checkpoint"),
                                       ("reconfiguration:notice=drain", "drain")])
def test_a_notice_use_without_a_notice_is_refused(capsys, spec, use):
    assert main(["train", "--replications", "1", "--mtbf", "100", "--steps", "20", "--stages",
                 "4", "--replicas", "2", "--strategy", spec]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.strip().splitlines() == [
        "dtsim train: error: 'notice' must be unset without a preemption notice "
        f"(--preemption-notice: what the job does with one): '{use}'"]


def test_a_notice_use_is_taken_with_a_notice():
    """(smallfix7) ``notice=`` with ``--preemption-notice`` runs (the only source of a notice:
    a trace's rows carry none); through the library a non-default use without one is refused
    too, the default (unset) is not."""
    from sim.training.strategies import CheckpointRestart

    for spec in ("checkpoint-restart:notice=ignore", "reconfiguration:notice=ignore"):
        cfg = TrainingConfig(stages=4, replicas=2, steps=20, mtbf=100.0, strategy=spec,
                             notice=30.0)
        assert cfg.strategy.notice == "ignore"
    with pytest.raises(ConfigError, match="^'notice' must be unset without a preemption"):
        TrainingConfig(stages=4, replicas=2, steps=20, mtbf=100.0,
                       strategy=CheckpointRestart(notice="ignore"))
    TrainingConfig(stages=4, replicas=2, steps=20, mtbf=100.0, strategy=CheckpointRestart())


def test_checkpoint_restart_overhead_bound_through_the_library():
    from sim.training.strategies import CheckpointRestart

    with pytest.raises(ConfigError, match="'overhead_bound' must be unset unless interval is"):
        CheckpointRestart(overhead_bound=0.05)
    assert CheckpointRestart(interval="overhead", overhead_bound=0.05).overhead_bound == 0.05


def test_an_option_given_where_it_does_nothing_is_one_rule_for_any_strategy():
    """(smallfix8) One table (``Strategy.only_when``) says which option acts under which
    condition, checked in one place for a strategy made from a spec text (given at its default
    too) or in Python (off its default): a user's strategy declares it like the built-in ones,
    and checkpoint-restart's refusals read as before."""
    from dataclasses import dataclass

    from sim.training.strategies import STRATEGIES, CheckpointRestart, make_strategy
    from sim.training.strategies.base import Strategy, register_strategy

    @dataclass(frozen=True)
    class Toy(Strategy):
        name = "toy-only-when"
        engine = "des"
        mode: str = "a"
        knob: float = 1.0
        only_when = {"knob": ("mode", "b")}

    register_strategy(Toy)
    try:
        for make in (lambda: make_strategy("toy-only-when:knob=1"), lambda: Toy(knob=2.0)):
            with pytest.raises(ConfigError, match=r"^'knob' must be unset unless mode is b: "):
                make()
        assert make_strategy("toy-only-when:mode=b,knob=1").knob == 1.0
        assert Toy(knob=1.0).knob == 1.0  # at its default, not given: nothing to refuse
    finally:
        del STRATEGIES["toy-only-when"]
    # checkpoint-restart's six, by the same table, text and Python alike (Varuna's lead acts
    # only when grow is true and notice is checkpoint: a condition of two fields)
    assert set(CheckpointRestart.only_when) == {"copy", "poll", "settle", "overhead_bound",
                                                "lead", "window"}
    for kw, line in ((dict(grow=False, poll=60.0), "'poll' must be unset unless grow is true: 60.0"),
                     (dict(copy=1.0), "'copy' must be 0 unless snapshot is overlapped: 1.0"),
                     (dict(notice="ignore", lead=30.0),
                      "'lead' must be unset unless grow is true and notice is checkpoint: 30.0"),
                     (dict(grow=False, window=60.0),
                      "'window' must be unset unless grow is true: 60.0")):
        with pytest.raises(ConfigError) as e:
            CheckpointRestart(**kw)
        assert str(e.value) == line
    with pytest.raises(ConfigError, match=r"^'poll' must be > 0: 0"):  # its range first
        make_strategy("checkpoint-restart:grow=false,poll=0")
