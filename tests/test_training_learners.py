"""The learners engine (sim.training.learners): exact failure-free, the DES's statistics with
failures, 10^6 chips, bad inputs."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from sim.analytic import diloco as AD
from sim.errors import ConfigError
from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.learners import SCALE_POINT, LearnersConfig, learners_model


def test_failure_free_is_diloco_closed_form():
    """No failures: N T + (N / H) T_sync(M), utilisation and goodput H T / (H T + T_sync)."""
    c = LearnersConfig(learners=5, chips=7, step_time=2.0, every=10, steps=40, size=100.0,
                       bandwidth=50.0, latency=0.2, bits=8)
    out = learners_model(c, Streams(0).replication(0))
    ts = AD.outer_sync_time(5, 100.0, 50.0, 0.2, bits=8)
    ref = AD.diloco_times(40, 2.0, 10, [ts])
    assert out["training_time"] == pytest.approx(ref.wall_time)
    assert out["goodput_fraction"] == pytest.approx(AD.diloco_utilisation(10, 2.0, ts))
    assert out["compute_utilisation"] == pytest.approx(ref.compute_utilisation)
    assert out["failures"] == 0 and out["outer_syncs"] == 4


def _des(L, M, mtbf, sync, reps, seed, law="deterministic", ratio=2.0, steps=40, replace=5.0):
    cfg = TrainingConfig(stages=L, replicas=M, microbatches=M, steps=steps, forward_time=1.0,
                         backward_ratio=ratio, param_size=10.0, bandwidth=5.0, sync=sync,
                         mtbf=mtbf, replace_time=replace, pass_time_distribution=law)
    return [training_model(cfg, Streams(seed).replication(k)) for k in range(reps)]


def _eng(L, M, mtbf, q, reps, seed, law="deterministic", ratio=2.0, every=4, steps=40,
         replace=5.0):
    cfg = LearnersConfig(learners=M, chips=L, step_time=L * (1 + ratio), every=every,
                         steps=steps, size=10.0, bandwidth=5.0, mtbf=mtbf, replace_time=replace,
                         chip_download=2.0, step_time_distribution=law, **q)
    return [learners_model(cfg, Streams(seed).replication(k)) for k in range(reps)]


def _agree(a, b, key):
    x = np.array([r[key] for r in a])
    y = np.array([r[key] for r in b])
    se = math.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
    return abs(x.mean() - y.mean()), se


def test_engine_matches_the_des_with_per_chip_failures():
    """4 learners of 3 chips (stages), chip MTBF 300, replacement 5, fetch 2: the engine's
    goodput, utilisation and wall time agree with the DES's within 4 standard errors (40 DES
    replications, 400 of the engine); an engine with half the failure rate is rejected."""
    des = _des(3, 4, 300.0, "diloco:every=4", 40, 7)
    eng = _eng(3, 4, 300.0, {}, 400, 8)
    wrong = _eng(3, 4, 600.0, {}, 400, 9)
    for key in ("goodput_fraction", "compute_utilisation", "training_time"):
        d, se = _agree(des, eng, key)
        assert d <= 4 * se, (key, d, se)
    d, se = _agree(des, wrong, "goodput_fraction")
    assert d > 4 * se


#: A point where rounds often lose their last member while a group waits to join: 3 groups
#: of one chip, H = 8 steps of 3 (a round of 24), MTBF 12 and replacement 12.
EMPTY = dict(L=1, M=3, mtbf=12.0, steps=80, replace=12.0)


def _empty_des(reps, seed, monkeypatch=None):
    """DES replications at :data:`EMPTY`, and how many rounds restarted without a member."""
    from sim.training.outer import OuterLoop

    n = [0]
    restart = OuterLoop._restart_round

    def counted(self):
        n[0] += 1
        restart(self)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(OuterLoop, "_restart_round", counted)
        out = _des(EMPTY["L"], EMPTY["M"], EMPTY["mtbf"], "diloco:every=8", reps, seed,
                   steps=EMPTY["steps"], replace=EMPTY["replace"])
    return out, n[0]


def _empty_eng(reps, seed):
    return _eng(EMPTY["L"], EMPTY["M"], EMPTY["mtbf"], {}, reps, seed, every=8,
                steps=EMPTY["steps"], replace=EMPTY["replace"])


def test_engine_matches_the_des_when_rounds_lose_every_member(monkeypatch):
    """At :data:`EMPTY` both engines restart a round whose last member failed with the groups
    waiting to join (the DES about 24 times a replication): goodput, utilisation, wall time and
    downloads agree within 4 standard errors (60 DES replications, 400 of the engine). An
    engine whose joiners wait for a failed group to come back (the rule before the fix) is
    rejected: its compute utilisation is about 0.20 against 0.26."""
    from sim.training.learners import _Engine

    des, restarts = _empty_des(60, 27)
    assert restarts > 10 * 60
    eng = _empty_eng(400, 28)
    for key in ("goodput_fraction", "compute_utilisation", "training_time", "outer_downloads"):
        d, se = _agree(des, eng, key)
        assert d <= 4 * se, (key, d, se)
    monkeypatch.setattr(_Engine, "_restart_round", lambda self: None)
    wrong = _empty_eng(400, 29)
    d, se = _agree(des, wrong, "compute_utilisation")
    assert d > 4 * se, (d, se)


def _scripted(fails, **kw):
    """The engine with its chip failures at given times (``fails[g]``: learner ``g``'s, one
    chip each): 2 learners, T = 3, H = 2, N = 8, S = 10 over B = 5 (a model download 2, a
    ring of two 2: the download the parameters alone, ``recovery="params"``)."""
    from sim.training import learners as LM

    c = LearnersConfig(**{**dict(learners=2, chips=1, step_time=3.0, every=2, steps=8,
                                 size=10.0, bandwidth=5.0, recovery="params"), **kw})
    e = LM._Engine(c, Streams(0).replication(0))
    left = {g: list(ts) for g, ts in fails.items()}

    def draw(x):
        e.cancel(x.fail_ev)
        x.fail_ev = None
        if left.get(x.g) and c.chips - len(x.repl) > 0:
            x.fail_ev = e.push(left[x.g].pop(0), LM._FAIL, x.g)
    e._draw_failure = draw
    return e.run()


def _scripted_des(tmp_path, rows, **kw):
    """The DES at :func:`_scripted`'s point (2 groups of one worker, T = 1 + 2), its workers
    down over ``rows`` (a failure trace)."""
    p = tmp_path / "down.csv"
    p.write_text("worker,start,end\n" + "".join(f"{w},{a},{b}\n" for w, a, b in rows))
    cfg = TrainingConfig(**{**dict(stages=1, replicas=2, microbatches=2, steps=8,
                                   forward_time=1.0, param_size=10.0, bandwidth=5.0,
                                   sync="diloco:every=2,recovery=params",
                                   failure_trace=str(p)), **kw})
    return training_model(cfg, Streams(0).replication(0))


@pytest.mark.parametrize("recovery, wall, merged", [
    ("prime", 32.0, 30),  # 8 S = 80 over 5: [10.5, 26.5), joins the outer step at 30
    ("torchft", 34.0, 36),  # 6 S = 60: [10.5, 22.5), joins at 24, steps 9-10 merged
    ("params", 36.0, 42),  # S: [10.5, 12.5), joins at 18, steps 7-10 merged
])
def test_a_learner_fetches_what_its_framework_recovery_sends_in_both_engines(
        tmp_path, recovery, wall, merged):
    """Learner 1's chip fails at 4, replaced at 10.5 behind the model (N = 10): its download
    is what the framework's recovery sends (:func:`sim.analytic.diloco.recovery_size`), the
    same in both engines (the DES's group download, ``tests/test_training_outer.py``). The
    default is prime's; both engines fetched the parameters alone (36)."""
    assert LearnersConfig(size=10.0, bandwidth=5.0).download_time == 16.0  # prime's, 8 S
    eng = _scripted({1: [4.0]}, replace_time=6.5, chip_download=2.0, steps=10,
                    recovery=recovery)
    des = _scripted_des(tmp_path, [("s0r1", 4.0, 10.5)], steps=10,
                        sync="diloco:every=2" + ("" if recovery == "prime" else
                                                 f",recovery={recovery}"))
    assert eng["training_time"] == pytest.approx(wall, rel=1e-12)
    assert eng["goodput_fraction"] == pytest.approx(merged / (2 * wall), rel=1e-12)
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs",
                "outer_steps", "compute_utilisation"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key


@pytest.mark.parametrize("case", ["behind", "cut"])
def test_a_learner_back_behind_the_latest_model_downloads_it_once(tmp_path, case):
    """Learner 1's chip fails at 4. ``behind``: replaced at 15, after learner 0's outer steps
    alone at 6 and 12: the model download (2, until 17) is its only download; it joins the
    outer step at 18 (ring to 20) and both take the last round (26, ring to 28). ``cut``
    (S = 20: a download 4, a ring 4): replaced at 5 with the latest model, its chip fetches
    its weights (4), but learner 0's outer step fires at 6: the fetch is cut, the learner
    downloads the model after it (until 10) and joins the outer step at 12 (ring to 16), then
    26, 36. Its chip used to fetch its weights first (2, 4): the run ended at 26 (32). The DES
    (the worker down over [4, 15) or [4, 5)) gives the same times, goodput and downloads."""
    if case == "behind":
        eng = _scripted({1: [4.0]}, replace_time=11.0, chip_download=2.0)
        des = _scripted_des(tmp_path, [("s0r1", 4.0, 15.0)])
        wall, merged = 28.0, 24 + 6
    else:
        eng = _scripted({1: [4.0]}, replace_time=1.0, chip_download=4.0, size=20.0)
        des = _scripted_des(tmp_path, [("s0r1", 4.0, 5.0)], param_size=20.0)
        wall, merged = 36.0, 24 + 12
    assert eng["training_time"] == pytest.approx(wall)
    assert eng["goodput_fraction"] == pytest.approx(merged / (2 * wall))
    assert eng["outer_downloads"] == 1 and eng["failures"] == 1
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps",
                "compute_utilisation"):
        assert des[key] == pytest.approx(eng[key]), key


@pytest.mark.parametrize("fail, replace", [(6.5, 0.5), (7.2, 0.5), (14.6, 1.3)])
def test_a_learner_down_during_its_outer_step_and_back_before_it_ends_rejoins(tmp_path, fail,
                                                                             replace):
    """Learner 1's chip fails while the outer step it reported to is in flight (rings [6, 8)
    and [14, 16)) and is replaced before the step ends: the ring is aborted, learner 0 notices
    10 later and takes its outer step alone; learner 1 waits for it, downloads the model (2)
    and joins the next outer step; the run ends at f + 34 (f + 26 in the second ring; merged
    36, as in tests/test_training_outer.py; 32 and 42 when the ring ran through the dead
    learner), as in the DES (its worker down over the same interval).
    Both engines used to give it the step's model and a member's place while it waited to
    join: the round waited for it for ever (stopped at the stall limit, unfinished)."""
    eng = _scripted({1: [fail]}, replace_time=replace, chip_download=2.0)
    des = _scripted_des(tmp_path, [("s0r1", fail, fail + replace)])
    wall = fail + (34 if fail < 8 else 26)  # the ring aborted, noticed 10 later (the DES's)
    assert eng["training_time"] == pytest.approx(wall, rel=1e-12)
    assert eng["goodput_fraction"] == pytest.approx(36 / (2 * wall), rel=1e-12)
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps",
                "compute_utilisation", "lost_outer_work", "outer_aborts", "outer_aborted"):
        assert des[key] == pytest.approx(eng[key]), key


@pytest.mark.parametrize("grace, wall", [(2.5, 30.0), (2.6, 30.0), (2.4, 20.3)])
def test_a_report_at_the_end_of_the_grace_window_counts_in_both_engines(tmp_path, grace,
                                                                      wall):
    """Quorum 1. Learner 1's chip fails at 1, is back at 1.5 with the latest model, fetches
    its weights (2) and joins round 0 on its own clock at 3.5; learner 0, the round's one
    member up, fires alone at 6 (a ring of one: no time). Learner 1 reports at 9.5 into round
    1: the grace window ends at 9.5 + W. With W = 2.5 learner 0 reports at 12, the window's
    very end: it counts (the window is closed), the ring of two ends at 14 and both take the
    last two rounds together (20 -> 22, 28 -> 30): 30, goodput (24 + 18) / 60, as with W =
    2.6. The engines used to differ there: the DES fired first (20.5), the engine counted
    it. With W = 2.4 the step at 11.9 goes with learner 1 alone."""
    eng = _scripted({1: [1.0]}, replace_time=0.5, chip_download=2.0, quorum=1, grace=grace)
    des = _scripted_des(tmp_path, [("s0r1", 1.0, 1.5)],
                        sync=f"diloco:every=2,quorum=1,grace={grace},recovery=params")
    assert eng["training_time"] == pytest.approx(wall, rel=1e-12)
    if grace == 2.5:
        assert eng["goodput_fraction"] == pytest.approx(42 / 60)
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps",
                "late_merges", "compute_utilisation"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key


@pytest.mark.parametrize("bound, syncs, goodput, busy", [(6.0, 1, 1.0, 1.0),
                                                         (5.999, 0, 0.0, 3 / 5.999)])
def test_a_run_bounded_at_an_outer_step_counts_it_in_both_engines(bound, syncs, goodput, busy):
    """``max_time`` is inclusive in both engines. Two groups of one worker, T = 3 (1 + 2),
    H = 2, no payload (a free outer step), bounded at 6: both groups report at 6 and the
    outer step there happens: 1 sync, goodput 1 (12 of 12 chip time merged), utilisation 1.
    The DES used to stop before it (0 syncs, goodput 0, utilisation 0.5: the second steps'
    ends not counted), the learners engine counted it. Bounded at 5.999 neither does (the
    first steps' 3 of 5.999 counted: a step cut by the end is not)."""
    eng = learners_model(LearnersConfig(learners=2, chips=1, step_time=3.0, every=2, steps=4,
                                        max_time=bound), Streams(0).replication(0))
    des = training_model(TrainingConfig(stages=1, replicas=2, microbatches=2, steps=4,
                                        forward_time=1.0, sync="diloco:every=2",
                                        max_time=bound), Streams(0).replication(0))
    for out in (eng, des):
        assert out["outer_syncs"] == syncs
        assert out["goodput_fraction"] == pytest.approx(goodput, rel=1e-12)
        assert out["compute_utilisation"] == pytest.approx(busy, rel=1e-12)
        assert out["finished"] == 0.0


@pytest.mark.parametrize("bound, syncs, goodput", [(12.0, 2, 18 / 24), (6.0, 1, 6 / 12)])
def test_a_grace_window_ending_at_max_time_fires_before_the_run_ends(tmp_path, bound, syncs,
                                                                     goodput):
    """The grace window case above (W = 2.5: it ends at 12 with learner 0's report) bounded at
    12, its very end: the outer step fires with both (2 syncs, 18 of 24 chip time merged:
    learner 0's 4 steps, learner 1's 2 of 3, its first lost to the failure), then the run
    ends; bounded at 6, learner 0's lone outer step at 6 counts (1 sync, 6 of 12). The DES
    used to stop first (12: 1 sync, goodput 0.25; 6: 0 syncs), the engine counted both."""
    eng = _scripted({1: [1.0]}, replace_time=0.5, chip_download=2.0, quorum=1, grace=2.5,
                    max_time=bound)
    des = _scripted_des(tmp_path, [("s0r1", 1.0, 1.5)],
                        sync="diloco:every=2,quorum=1,grace=2.5,recovery=params", max_time=bound)
    for out in (eng, des):
        assert out["outer_syncs"] == syncs
        assert out["goodput_fraction"] == pytest.approx(goodput, rel=1e-12)
    for key in ("goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps", "late_merges",
                "compute_utilisation", "finished"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key


@pytest.mark.slow
@pytest.mark.parametrize("q, sync, law, L, ratio", [
    ({}, "diloco:every=4", "deterministic", 3, 2.0),
    ({"quorum": 2, "grace": 1.0}, "diloco:every=4,quorum=2,grace=1.0", "deterministic", 3, 2.0),
    ({"quorum": 3, "grace": 0.5}, "diloco:every=4,quorum=3,grace=0.5", "exponential", 1, 0.0),
    ({}, "diloco:every=4", "exponential", 1, 0.0),
])
def test_engine_matches_the_des_slow(q, sync, law, L, ratio):
    """400 replications each, synchronous and quorum, deterministic and exponential steps
    (one pass a step): goodput, utilisation, wall time, downloads and late merges agree within
    4 standard errors."""
    des = _des(L, 4, 150.0 * L, sync, 400, 17, law=law, ratio=ratio)
    eng = _eng(L, 4, 150.0 * L, q, 400, 18, law=law, ratio=ratio)
    for key in ("goodput_fraction", "compute_utilisation", "training_time", "outer_downloads",
                "late_merges"):
        d, se = _agree(des, eng, key)
        assert d <= 4 * se + 1e-12, (key, d, se)


@pytest.mark.slow
def test_engine_matches_the_des_when_rounds_lose_every_member_slow():
    """:data:`EMPTY` at 400 DES replications and 2000 of the engine: goodput, utilisation, wall
    time, downloads and work lost agree within 4 standard errors."""
    des, _ = _empty_des(400, 37)
    eng = _empty_eng(2000, 38)
    for key in ("goodput_fraction", "compute_utilisation", "training_time", "outer_downloads",
                "lost_outer_work"):
        d, se = _agree(des, eng, key)
        assert d <= 4 * se, (key, d, se)


def test_a_million_chips_in_a_fraction_of_a_simulated_hour():
    """The scale point (40 learners x 25,000 chips) runs 3 outer steps with chip failures at
    Llama 3's per-GPU rate, with events counted per learner, not per chip."""
    c = LearnersConfig(steps=300, **SCALE_POINT)
    out = learners_model(c, Streams(0).replication(0))
    assert out["chips"] == 1e6 and out["finished"] == 1.0
    assert out["events"] < 2000
    assert SCALE_POINT["mtbf"] == pytest.approx(1.82e8, rel=0.01)


@pytest.mark.parametrize("kw, msg", [
    (dict(steps=10, every=3), "'steps' must be a multiple of every (3): 10"),
    (dict(quorum=5), "'quorum' must be an integer in [1, 4]: 5"),
    (dict(grace=1.0), "'grace' must be 0 without quorum: 1.0"),
    (dict(chips=0), "'chips' must be an integer >= 1: 0"),
    (dict(step_time_distribution="pareto"), "'step_time_distribution' must be one of "
     "deterministic, exponential, lognormal: 'pareto'"),
    (dict(bits=5), "'bits' must be one of 32, 16, 8, 4: 5"),
    (dict(mtbf=0.0), "'mtbf' must be > 0: 0.0"),
])
def test_bad_learner_configs(kw, msg):
    """One line each."""
    with pytest.raises(ConfigError) as e:
        LearnersConfig(**kw)
    assert str(e.value) == msg


def test_learners_that_never_reach_an_outer_step_stop_at_the_stall_limit():
    """Chips that fail every nanosecond (each replaced a time unit later) keep every learner
    from its 10 steps of 1: the engine used to run for ever. It stops after 1000
    failure-free rounds without an outer step, 1000 (10 * 1 + the sync 2 (4 - 1)(0.5 +
    8 / 4 / 4) = 6), unfinished and marked stalled; a run that progresses is not."""
    kw = dict(learners=4, chips=8, every=10, steps=100, size=8.0, bandwidth=4.0, latency=0.5,
              mtbf=1e-9, replace_time=1.0)
    cfg = LearnersConfig(**kw)
    assert cfg.stall_limit() == pytest.approx(1000 * (10 + 6.0))
    from sim.training.learners import _Engine

    eng = _Engine(cfg, Streams(0).replication(0))
    out = eng.run()
    assert out["stalled"] == 1 and out["finished"] == 0 and out["outer_syncs"] == 0
    assert eng.now == pytest.approx(16000.0)
    fine = learners_model(LearnersConfig(**{**kw, "mtbf": 1e7}), Streams(0).replication(0))
    assert fine["finished"] == 1 and fine["stalled"] == 0


@pytest.mark.parametrize("argv,message", [
    (["--step-time-shape", "0.9"],
     "'step_time_shape' must be given only with --step-time-distribution lognormal: 0.9"),
    (["--replace-time", "5"], "'replace_time' must be given only with a finite --mtbf: 5.0"),
    (["--chip-download", "5"], "'chip_download' must be given only with a finite --mtbf: 5.0"),
    # (review15) what a learner back downloads, with no learner ever down: it ran, ignored
    (["--recovery", "torchft"], "'recovery' must be given only with a finite --mtbf: "
     "'torchft'"),
    (["--workers", "2"], "'workers' must be given only with --executor local: 2"),
    # (user trial 3) the payload options without --size: an outer step moved nothing, and
    # "--bandwidth 1Gbit/s" printed utilisation 1 as if the link had been enough
    (["--bandwidth", "1Gbit/s"], "'bandwidth' must be given only with --size > 0 (the model "
     "an outer step all-reduces; default 0: nothing moves): '1Gbit/s'"),
    (["--bits", "4"], "'bits' must be given only with --size > 0 (the model an outer step "
     "all-reduces; default 0: nothing moves): 4"),
    (["--topk", "0.01"], "'topk' must be given only with --size > 0 (the model an outer step "
     "all-reduces; default 0: nothing moves): 0.01"),
    (["--value-bits", "32"], "'value_bits' must be given only with --size > 0 (the model an "
     "outer step all-reduces; default 0: nothing moves): 32"),
    # (review15) a download of no model is its latency whatever the recovery: it was ignored
    (["--mtbf", "1e5", "--recovery", "torchft"], "'recovery' must be given only with --size "
     "> 0 (the model an outer step all-reduces; default 0: nothing moves): 'torchft'"),
])
def test_options_without_effect_are_refused(capsys, argv, message):
    """An option the run would ignore (the lognormal's sigma with deterministic steps, a
    repair without failures, processes without a pool) is refused in one line, exit 2; it
    used to run and print figures as if it had been applied."""
    from sim.cli import main

    assert main(["learners", "--replications", "1", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.strip().splitlines() == ["dtsim learners: error: " + message]


def test_time_to_train_no_replication_reached_is_not_measured(capsys):
    """--max-time before the last outer step: the time to train is said to be not measured,
    with the replications stopped there (it printed 'nan (no interval, n = 0)')."""
    from sim.cli import main

    assert main(["learners", "--max-time", "5", "--replications", "2"]) == 0
    out = capsys.readouterr().out
    assert "nan" not in out, out
    assert [ln.split()[-2:] for ln in out.splitlines() if ln.startswith("time to train")] == \
        [["not", "measured"]]
    assert "2 of 2 replications stopped at --max-time 5 before 1000 inner steps; time to " \
        "train is not measured" in out


def test_time_options_take_units_as_the_other_commands_do(capsys):
    """``dtsim learners``' times (--step-time, --grace, --mtbf, --replace-time,
    --chip-download, --max-time) take a unit as --latency does ("100ms", "2h"; a bare
    number is seconds): the same figures as the numbers in seconds; a size is refused in
    one line, exit 2. (They were ``type=float``: "2h" was refused as not a number.)"""
    import json

    from sim.cli import main

    base = ["learners", "--learners", "6", "--chips", "50", "--steps", "40", "--every", "10",
            "--quorum", "4", "--replications", "2", "--json"]

    def run(*argv: str) -> dict:
        assert main([*base, *argv]) == 0
        out = json.loads(capsys.readouterr().out)
        return {k: v for k, v in out.items() if not k.startswith("run_") and k != "units"}

    plain = run("--step-time", "10", "--grace", "0.5", "--mtbf", "7200", "--replace-time",
                "300", "--chip-download", "2", "--max-time", "36000")
    typed = run("--step-time", "10000ms", "--grace", "500ms", "--mtbf", "2h", "--replace-time",
                "5min", "--chip-download", "2s", "--max-time", "10h")
    assert plain["failures"] > 0 and typed == plain
    for opt in ("--step-time", "--grace", "--mtbf", "--replace-time", "--chip-download",
                "--max-time"):
        with pytest.raises(SystemExit) as exc:
            main(["learners", "--replications", "1", opt, "2GB"])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        dest = opt[2:].replace("-", "_")
        assert err == [f"dtsim learners: error: argument {opt}: '{dest}' must be a time, not a "
                       "size (seconds, or a number and a time unit: 10ms, 250us, 2h): '2GB'"]


def test_the_downloads_row_names_what_it_counts(capsys):
    """(user trial 3) ``outer_downloads`` counts a learner's fetches of the model and of the
    outer steps it missed (a late learner's); the row said "model downloads"."""
    from sim.cli import main

    assert main(["learners", "--learners", "4", "--steps", "200", "--mtbf", "2000",
                 "--replace-time", "10", "--replications", "1"]) == 0
    rows = [r.split("  ")[0] for r in capsys.readouterr().out.splitlines()]
    assert "downloads (model, missed outer steps)" in rows and "model downloads" not in rows


def test_cpu_time_counts_the_pools_processes(capsys, monkeypatch):
    """(user trial 3) With ``--executor local`` the replications run in a process pool: the
    reported CPU was the parent's alone (0.0128 s for 12.5 s of work in two processes); it
    now adds the pool's (reaped when it shuts down). The mechanism is checked exactly (the
    children's CPU over the run is added), the real pool loosely: far above the parent's
    ~0.02 s (a ratio to the serial run's CPU is noise here: JIT compilation lands in one)."""
    import json

    from sim.cli import main
    from sim.commands import learners

    argv = ["learners", "--learners", "40", "--chips", "25000", "--every", "10", "--steps",
            "8000", "--size", "2e11", "--bandwidth", "1.25e9", "--mtbf", "4.4e8",
            "--replace-time", "1800", "--replications", "2", "--json"]
    ticks = iter((10.0, 17.5))  # the children's CPU before and after the run
    with monkeypatch.context() as m:
        m.setattr(learners, "_children_cpu", lambda: next(ticks))
        assert main([*argv, "--executor", "serial"]) == 0
    assert json.loads(capsys.readouterr().out)["run_cpu_seconds"] >= 7.5
    assert main([*argv, "--executor", "local", "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["run_cpu_seconds"] > 0.1


@pytest.mark.parametrize("kw, name", [
    (dict(learners=10**12), "learners"),  # a list of 10^12 learners: it hung, then ran out
    (dict(learners=10**7, steps=100), "learners"),  # 4e7 learner rounds: over 10 minutes
    (dict(steps=10**11, every=1), "steps"),
    (dict(chips=10**12, mtbf=1e6, replace_time=1.0), "chips"),  # 8e11 chip failures
    (dict(mtbf=1e-3), "mtbf"),  # 4 chips failing 1000 times a second until the stall limit
])
def test_a_runaway_is_refused_before_any_work(kw, name):
    """A replication whose rounds (learners x (outer steps + 3)) or chip failures (the expected
    transitions of the pipeline DES's rule) would run for hours is refused naming the factor;
    the shipped scale point at 8 times its failure rate (and over 30 days), 10^5 learners (a
    round was hours when a report checked every member; now seconds) and the defaults stay
    valid."""
    with pytest.raises(ConfigError) as exc:
        LearnersConfig(**kw)
    assert exc.value.name == name
    LearnersConfig()
    sp = dict(SCALE_POINT, mtbf=SCALE_POINT["mtbf"] / 8)
    LearnersConfig(steps=864 * 100, **sp)
    LearnersConfig(steps=30 * 864 * 100, **SCALE_POINT)
    LearnersConfig(learners=10**5, steps=100)


def test_a_run_that_ends_is_not_refused_one_that_stalls_counts_the_limit():
    """The chips' failure budget counted the whole stall limit (1000 failure-free rounds) as
    the run's length: 50,000 learners of 100 chips (mtbf 1e4, replace 10; a learner loses a
    chip at 0.01 a unit, a round is 100) expected 1.0e8 transitions and were refused, where a
    run ends at 1,000 with 5.0e5 chip failures (seed 0, 59 s). The length is now the run's
    expected length under its failures (sim.analytic.diloco.failure_run_length): 1,899 (9.5e5
    failures expected). A run whose learners stall (8 chips of mtbf 10, 50 steps a round)
    still counts the whole stall limit, and with mtbf 1e-3 is refused (above)."""
    c = LearnersConfig(learners=50_000, chips=100, every=100, steps=1000, mtbf=1e4,
                       replace_time=10.0)
    length = c.run_length()[0]
    assert 1000.0 < length < 2000.0
    c = LearnersConfig(learners=2, chips=8, every=50, steps=100, mtbf=10.0, replace_time=1.0)
    assert c.run_length()[0] == pytest.approx(c.stall_limit())


def _traced_lines(**kw):
    """Lines of :mod:`sim.training.learners` one replication executes (a count of its work,
    no clock)."""
    import sys

    from sim.training import learners as LM

    n = [0]
    here = LM.__file__

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != here:
            return None

        def lines(frame, event, arg):
            n[0] += event == "line"
            return lines
        return lines
    c = LearnersConfig(**kw)
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        learners_model(c, Streams(5).replication(0))
    finally:
        sys.settrace(old)
    return n[0]


@pytest.mark.parametrize("kw", [
    dict(steps=300, every=100),  # synchronous, failure-free
    dict(steps=300, every=100, chips=4, mtbf=2e4, replace_time=50.0, quorum=300, grace=2.0),
    dict(steps=300, every=100, chips=4, mtbf=2e4, replace_time=50.0, chip_download=10.0,
         step_time_distribution="exponential", size=1e6, bandwidth=1e6),
])
def test_a_round_costs_work_linear_in_learners(kw):
    """Doubling the learners at most about doubles the engine's work (the lines it executes, a
    count, not a clock): a report is checked in O(1) from counts kept as learners go down,
    come back and report, and the outer step looks its parts up in sets, not lists (here 2.0
    times the lines; the engine before, quadratic: 3.6 times, failing this)."""
    small = _traced_lines(learners=400, **kw)
    big = _traced_lines(learners=800, **kw)
    assert big <= 2.3 * small, (small, big, big / small)


def test_a_quorums_unmerged_steps_at_the_end_are_lost_work():
    """Four learners, quorum 2, no grace, exponential steps, no failures: the last outer step
    fires without the slowest learners, whose steps since their last merge reach no outer
    step. They are lost (the DES's rule), so compute minus goodput is the lost work, chip for
    chip, in every replication; lost_outer_work was 0 there."""
    c = LearnersConfig(learners=4, chips=3, step_time=1.0, every=5, steps=20, quorum=2,
                       step_time_distribution="exponential")
    lost = []
    for k in range(5):
        out = learners_model(c, Streams(2).replication(k))
        gap = (out["compute_utilisation"] - out["goodput_fraction"]) * 4 * 3 * out["training_time"]
        assert gap == pytest.approx(out["lost_outer_work"], rel=1e-9, abs=1e-9), k
        lost.append(out["lost_outer_work"])
    assert min(lost) > 0


def test_a_failure_free_deterministic_run_is_exact(capsys):
    """Deterministic steps and no chip failure: every replication gives the same figures, so
    they are exact with no interval, as dtsim train prints them (it printed each as '0.869565
    [0.869565, 0.869565]'). 4 learners, H = 10, N = 100, steps of 1, sync of 2 (3 hops of
    0.25 MB at 1 MB/s, twice, over 4): wall 10 x (10 + 1.5) = 115, utilisation 100 / 115.
    With chip failures only their count's absence is fixed: none here."""
    from sim.cli import main

    assert main(["learners", "--learners", "4", "--steps", "100", "--every", "10",
                 "--step-time", "1", "--size", "1e6", "--bandwidth", "1e6"]) == 0
    cells = [re.split(r"\s{2,}", ln.strip()) for ln in capsys.readouterr().out.splitlines()]
    rows = {c[0]: c[-1] for c in cells if len(c) == 2}
    assert rows["time to train (s)"] == "115 (exact)"
    assert rows["compute utilisation (fraction of wall time)"] == f"{100 / 115:.6g} (exact)"
    cfg = LearnersConfig(learners=4, steps=100, every=10, mtbf=200.0)
    assert set(cfg.fixed_metrics()) == set()
    cfg = LearnersConfig(learners=4, steps=100, every=10, step_time_distribution="exponential")
    assert set(cfg.fixed_metrics()) == {"failures"}


@pytest.mark.parametrize("replace, wall, merged", [(0.5, 40.0, 36), (3.0, 40.0, 36)])
def test_a_failure_as_a_block_ends_comes_after_it_in_both_engines(tmp_path, replace, wall,
                                                                   merged):
    """Learner 1's chip fails at 6, exactly when its first block (H = 2 steps of 3) ends. The
    block is done first (:data:`sim.failures.LATE`): both learners report at 6, the outer
    step fires with both (ring [6, 8)), learner 1 is down during it: the ring is aborted,
    learner 0 notices at 16 and steps alone; learner 1 downloads the model and joins the
    outer step at 22 (as the failure at 6.5 above): the run ends at 40, merged 24 + 12 of 80
    (32, 42 of 64 when the ring ran through the dead learner). Both engines used to take the failure first (its event scheduled earlier):
    learner 1's block lost, learner 0's outer step alone at 6."""
    eng = _scripted({1: [6.0]}, replace_time=replace, chip_download=2.0)
    des = _scripted_des(tmp_path, [("s0r1", 6.0, 6.0 + replace)])
    assert eng["training_time"] == pytest.approx(wall, rel=1e-12)
    assert eng["goodput_fraction"] == pytest.approx(merged / (2 * wall), rel=1e-12)
    assert eng["outer_syncs"] == 5 and eng["outer_aborts"] == 1
    assert eng["outer_steps"] == 4  # 0 at 16 alone, 22, 28, 34: the aborted try is none
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps",
                "late_merges", "compute_utilisation"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key


def test_an_outer_step_at_the_stall_limit_is_progress_in_both_engines(tmp_path):
    """Both learners' chips fail at 0.5 and are back at 5994 (no fetch): they take their
    block again over [5994, 6000) and the outer step fires at 6000, the stall limit's very
    end (1000 failure-free rounds of 2 x 3, no payload: 6000 after the start). The stall
    check looks after the rest of its instant (as ``max_time`` does): the run finishes at
    6000 with 1 outer step in both engines. The DES used to stop there first (its timer
    scheduled at 0): unfinished, 0 outer steps; the learners engine finished."""
    eng = _scripted({0: [0.5], 1: [0.5]}, replace_time=5993.5, chip_download=0.0, steps=2,
                    size=0.0)
    des = _scripted_des(tmp_path, [("s0r0", 0.5, 5994.0), ("s0r1", 0.5, 5994.0)],
                        steps=2, param_size=0.0, sync="diloco:every=2")  # no payload: no recovery=
    assert eng["training_time"] == 6000.0 and eng["outer_syncs"] == 1
    for key in ("training_time", "finished", "goodput_fraction", "outer_syncs", "outer_steps",
                "compute_utilisation"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key


def test_a_failure_as_a_report_closes_the_grace_window_comes_after_it_in_both_engines(
        tmp_path):
    """The grace window case above (quorum 1, W = 2.5) with learner 0's chip failing at 12,
    when its block [6, 12) ends at the window's very end (back at 12.5). The block is done
    first: learner 0 reports, every member has, the outer step fires with both (ring [12,
    14)) and learner 0 goes down in it (the rest below). Both engines used to take the
    failure first (23.0) and disagreed on the compute (the learners engine counted the
    block's two steps, the DES its lost passes)."""
    eng = _scripted({1: [1.0], 0: [12.0]}, replace_time=0.5, chip_download=2.0, quorum=1,
                    grace=2.5)
    des = _scripted_des(tmp_path, [("s0r1", 1.0, 1.5), ("s0r0", 12.0, 12.5)],
                        sync="diloco:every=2,quorum=1,grace=2.5,recovery=params")
    # The ring [12, 14) is aborted by learner 0's failure (a ring cannot finish through it):
    # learner 1 notices at 22 and steps alone (V = 2; learner 0's block [6, 12) lost).
    # Learner 0, back at 12.5, waits for it, downloads (to 24) and takes [24, 30); learner 1
    # takes [22, 28) and, the round's one member, fires alone at 28 (V = 3), then [28, 34).
    # Learner 0 reports at 30; its window closes at 32.5, alone: the 4th outer step. Merged
    # 6 + 6 + 6 + 6 of 2 x 32.5, compute 18 + 15; 5 all-reduces (one aborted). It ended at
    # 24.5 (merged 30) when the ring ran through the dead learner.
    assert eng["training_time"] == 32.5 and eng["outer_aborts"] == 1
    assert eng["outer_syncs"] == 5 and eng["outer_steps"] == 4
    assert eng["goodput_fraction"] == pytest.approx(24 / 65, rel=1e-12)
    assert eng["compute_utilisation"] == pytest.approx(33 / 65, rel=1e-12)
    for key in ("training_time", "goodput_fraction", "outer_downloads", "outer_syncs", "outer_steps",
                "late_merges", "compute_utilisation", "lost_outer_work", "outer_aborted"):
        assert des[key] == pytest.approx(eng[key], rel=1e-12), key
    # W = 2.4: learner 1's window closes at 11.9, when its chip fails again: the failure is
    # inside the window (its report dropped), as at 11.8999, in both engines (the engine's
    # timer steps behind the failure, at rank 2, rather than in front of it for ever)
    for t in (11.9, 11.8999):
        eng = _scripted({1: [1.0, t]}, replace_time=0.5, chip_download=2.0, quorum=1,
                        grace=2.4)
        des = _scripted_des(tmp_path, [("s0r1", 1.0, 1.5), ("s0r1", t, t + 0.5)],
                            sync="diloco:every=2,quorum=1,grace=2.4,recovery=params")
        assert eng["training_time"] == 18.0 and eng["goodput_fraction"] == 0.5
        for key in ("training_time", "goodput_fraction", "outer_syncs", "outer_steps", "compute_utilisation"):
            assert des[key] == pytest.approx(eng[key], rel=1e-12), key


def test_a_grace_window_with_every_learner_or_group_in_the_quorum_is_refused():
    """(audit 7) An outer step fires once K have reported and every member still up has, or
    W after the K-th report: with K the learners (the groups) the K-th report is the last, so
    W changed nothing (both engines gave bit-identical results with and without it, under
    failures) and was accepted. Refused in one line; K below M keeps its window."""
    with pytest.raises(ConfigError) as e:
        LearnersConfig(learners=4, quorum=4, grace=5.0)
    assert e.value.name == "grace" and e.value.value == 5.0
    LearnersConfig(learners=4, quorum=4)
    LearnersConfig(learners=4, quorum=3, grace=5.0)
    base = dict(stages=2, replicas=4, microbatches=4, steps=8)
    with pytest.raises(ConfigError) as e:
        TrainingConfig(**base, sync="diloco:every=4,groups=2,quorum=2,grace=3")
    assert e.value.name == "sync" and "quorum equal to groups (2" in str(e.value)
    TrainingConfig(**base, sync="diloco:every=4,groups=2,quorum=1,grace=3")
    TrainingConfig(**base, sync="diloco:every=4,groups=2,quorum=2")


def test_the_time_overflow_bound_counts_the_recovery_download():
    """(smallfix7) 2 x 4 learners x 1000 steps = 8000 repetitions of a ring (size / B =
    5e295: 4e299) and, with failures, a download of what the recovery sends: prime's 8 x the
    16-bit parameters make 3.6e300, past 1e300 (accepted before: the bound took the
    parameters alone); the parameters alone (recovery=params) 8e299; failure-free, no
    download."""
    from sim.errors import ConfigError

    kw = dict(learners=4, every=100, steps=1000, size=5e295, bandwidth=1.0, max_time=1e3)
    with pytest.raises(ConfigError, match=r"^'size' must be small enough that the run's "
                       r"time stays finite .*: 5e\+295$"):
        LearnersConfig(mtbf=1e5, **kw)
    LearnersConfig(mtbf=1e5, recovery="params", **kw)
    LearnersConfig(**kw)
