"""Bamboo's two recovery modes (``--strategy redundancy:mode=eager|lazy``): eager (the default,
Bamboo as published) runs the successor's forwards every step and holds the covered stage's
copy and those forwards' activations on the GPU (sim.profiles.build.eager_copy_memory; with
TP, a shard a TP rank: dtsim's extension); lazy (Bamboo's code's parameter default) runs no
redundant forwards a step and recomputes the lost stage's forwards at a takeover. Hand
timelines and hand bytes."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from sim.cli import main
from sim.engines import predictions, select
from sim.errors import format_bytes
from sim.profiles import load_profiles, read_plan
from sim.profiles.build import build_plan
from sim.rng import Streams
from sim.training import TrainingConfig
from sim.training.strategies import Redundancy, make_strategy

BIG = 1e9
#: OPT-350's layer sizes (sim/profiles/data/profiles.json, TP 1): layer 0 (embeddings)
#: 53,608,448 parameters, layers 1-24 12,596,224 each, layer 25 (head) 51,513,344; a sample's
#: activations held for backward 8,388,608 B (layer 0), 360,726,528 B (1-24), 834,694,144 B
#: (25); the activation a layer sends 8,388,608 B (0-24).
DEC, EMB, HEAD = 12_596_224, 53_608_448, 51_513_344
ACT, ACT0, ACT25, SENT = 360_726_528, 8_388_608, 834_694_144, 8_388_608


def _plan(tmp_path, gbs, tp=1):
    """OPT-350 in 3 stages (layers 0-8, 9-17, 18-25) x 2 replicas of a GH-96 node of ``tp``
    GPUs (a TP group), micro-batches of 1: ``gbs / 2`` micro-batches a pipeline."""
    rep = [{"gpu": "GH-96", "tp": tp, "gpus_per_node": tp, "zone": "us-central1-a",
            "count": 2}]
    data = {"microbatch_size": 1, "global_batch_size": gbs,
            "stages": [{"first_layer": a, "last_layer": b, "replicas": rep}
                       for a, b in ((0, 8), (9, 17), (18, 25))],
            "framework": {"name": "sailor-deepspeed", "version": "0.16.5"}}
    p = tmp_path / f"p3-{gbs}-tp{tp}.json"
    p.write_text(json.dumps(data))
    return str(p)


def test_default_mode_is_bamboos_published_eager():
    """Bamboo as its paper and README describe it fills redundant computation into the bubbles:
    eager, the default. Lazy (its code's eager_recovery=False, what its examples run without
    --eager) adds no forward. The job of
    test_redundancy_copies_each_stage_on_its_predecessor_as_bamboo: 4 s eager, 0 lazy."""
    job = SimpleNamespace(config=SimpleNamespace(
        stages=3, microbatches=8, forward_time=(1.0, 2.0, 4.0), backward_time=(2.0, 4.0, 8.0),
        step_times=None))
    f = SimpleNamespace(pipelines=((0, 1, 2),), step_time=100.0)
    assert Redundancy().mode == "eager" and make_strategy("redundancy").mode == "eager"
    assert Redundancy().rc_overhead(job, f) == 4.0
    assert make_strategy("redundancy:mode=lazy").rc_overhead(job, f) == 0.0
    # a lazy takeover of stage 2 recomputes its 8 forwards (4 s each) pro rata; none eager
    assert Redundancy(mode="lazy").redo_time(job.config, 1, 2) == 32.0
    assert Redundancy().redo_time(job.config, 1, 2) == 0.0


def test_lazy_and_eager_on_a_scripted_failure_by_hand(tmp_path):
    """2 rings of 3 (forward 1 s, backward 2 s, GPipe, 16 micro-batches: 8 a ring, a step
    (3 + 8 - 1) 3 = 30 s; one ring: 16 a step, 54 s), s1r0 lost at 15 s, rebalance 4, N = 2.
    Eager: the node runs its successor's 8 forwards in a 30 - 24 = 6 s bubble, 2 s over: 32 s
    steps (one ring: 16 - (54 - 48) = 10 over, 64 s). At 15, 15/32 of step 1 is done; the rest
    at 1.5x: 17/32 x 48 = 25.5, to 40.5; rebalance to 44.5 (2/5 overloaded), one ring: 108.5.
    Lazy: 30 s steps; at 15 half the step is done: its node recomputes half of stage 1's 8
    forwards (4 s), then the rest at 1.5x (22.5 s): 41.5; rebalance to 45.5; 54 s: 99.5.
    The replay (sim.analytic) gives the same."""
    p = tmp_path / "r.csv"
    p.write_text(f"worker,start,end\ns1r0,15.0,{BIG}\n")
    want = {"eager": (108.5, 25.5), "lazy": (99.5, 26.5)}
    for mode, (wall, degraded) in want.items():
        cfg = TrainingConfig(stages=3, replicas=2, microbatches=16, forward_time=1.0,
                             backward_ratio=2.0, schedule="gpipe", sync="none", steps=2,
                             failure_trace=str(p), strategy="redundancy:every=0,rebalance=4,"
                             f"restart=6,boot=0,mode={mode}")
        sel = select("training", cfg)
        m = sel.engine.run(cfg, Streams(0).replication(0))
        assert sel.name == "job"
        assert (m["training_time"], m["degraded_time"], m["rebalances"]) == (wall, degraded, 1.0)
        assert predictions("training", cfg)["training_time"]["value"] == wall


def test_lazy_takeovers_in_two_rings_recompute_at_once(tmp_path):
    """The job of test_lazy_and_eager_on_a_scripted_failure_by_hand, s2r1 lost at 9 s and s0r0
    at 10 s. At 9, 9/30 = 0.3 of the step is done: s1r1 recomputes 0.3 of stage 2's 8
    forwards (2.4 s, to 11.4). At 10 s2r0 takes stage 0 over and recomputes 0.3 of its 8
    forwards on its own GPU (2.4 s, to 12.4), while s1r1 finishes: the step goes on at 12.4
    (not after the two one after the other, 13.8), its rest at 1.5x (0.7 x 45 = 31.5) to
    43.9; rebalance to 47.9, one ring of the 4 left: 54 s, 101.9 (was 103.3). One loss (s2r1
    at 9): 9 + 2.4 + 31.5 + 4 + 54 = 100.9. The replay (sim.analytic) gives the same."""
    p = tmp_path / "r.csv"
    for rows, wall in (((("s2r1", 9.0),), 100.9), ((("s2r1", 9.0), ("s0r0", 10.0)), 101.9)):
        p.write_text("worker,start,end\n" + "".join(f"{w},{t},{BIG}\n" for w, t in rows))
        cfg = TrainingConfig(stages=3, replicas=2, microbatches=16, forward_time=1.0,
                             backward_ratio=2.0, schedule="gpipe", sync="none", steps=2,
                             failure_trace=str(p), strategy="redundancy:every=0,rebalance=4,"
                             "restart=6,boot=0,mode=lazy")
        sel = select("training", cfg)
        m = sel.engine.run(cfg, Streams(0).replication(0))
        assert sel.name == "job" and m["rebalances"] == 1.0
        assert m["training_time"] == pytest.approx(wall, rel=1e-12)
        assert predictions("training", cfg)["training_time"]["value"] == pytest.approx(
            wall, rel=1e-12)


def test_eager_copy_memory_of_a_three_stage_plan_by_hand(tmp_path):
    """The 3-stage plan, 8 micro-batches a pipeline. Stage 0 holds stage 1 (9 x 12,596,224
    parameters): 16 B a parameter (4 fp32 tensors) = 1,813,856,256 B, its 8 forwards' held
    activations 8 x 9 x 360,726,528 and 8 received inputs of 8,388,608: 27,853,275,136 B.
    Stage 1 holds stage 2 (7 x 12,596,224 + 51,513,344 = 139,686,912): 2,234,990,592 B, the
    last stage's forward keeps one micro-batch's (7 x 360,726,528 + 834,694,144), 8 inputs:
    5,661,879,296 B. Stage 2 holds stage 0 (53,608,448 + 8 x 12,596,224 = 154,378,240):
    2,470,051,840 B, 8 x (8,388,608 + 8 x 360,726,528), no input (the data): 25,623,658,496."""
    from sim.profiles.build import eager_copy_memory

    model = load_profiles(models=("OPT-350",)).model("OPT-350")
    sizes = model.layer_sizes(1)
    assert [sizes[x].params for x in (0, 1, 24, 25)] == [EMB, DEC, DEC, HEAD]
    assert [sizes[x].activation_memory_bytes for x in (0, 1, 25)] == [ACT0, ACT, ACT25]
    assert sizes[8].activation_bytes == sizes[17].activation_bytes == SENT
    assert (16 * 9 * DEC, 16 * (7 * DEC + HEAD), 16 * (EMB + 8 * DEC)) == (
        1_813_856_256, 2_234_990_592, 2_470_051_840)
    got = eager_copy_memory(read_plan(_plan(tmp_path, 16)), model.layer_sizes)
    assert got == (27_853_275_136,) * 2 + (5_661_879_296,) * 2 + (25_623_658_496,) * 2
    assert 27_853_275_136 == 16 * 9 * DEC + 8 * 9 * ACT + 8 * SENT
    assert 5_661_879_296 == 16 * (7 * DEC + HEAD) + 7 * ACT + ACT25 + 8 * SENT
    assert 25_623_658_496 == 16 * (EMB + 8 * DEC) + 8 * (ACT0 + 8 * ACT)


def test_eager_refuses_a_plan_its_copy_does_not_fit(tmp_path, capsys):
    """At 128 micro-batches a pipeline the plan fits (1F1B holds at most 3 at once) and runs
    lazy; eager holds stage 1's copy and all 128 of its forwards on stage 0's GPU: 16 x 9 x
    12,596,224 + 128 x (9 x 360,726,528 + 8,388,608) = 418,444,558,336 B more, refused in one
    line naming the GPU, its need and its capacity."""
    path = _plan(tmp_path, 256)
    base = ["train", "--plan", path, "--model", "OPT-350", "--steps", "1", "--replications", "1"]
    assert main([*base, "--strategy", "redundancy:mode=lazy"]) == 0
    capsys.readouterr()
    assert main([*base, "--strategy", "redundancy"]) == 2  # the default, eager
    err = capsys.readouterr().err.strip().splitlines()
    extra = 16 * 9 * DEC + 128 * (9 * ACT + SENT)
    assert extra == 418_444_558_336
    g = build_plan(read_plan(path), load_profiles(models=("OPT-350",)), model="OPT-350",
                   network=True).memory[0]
    assert g.total <= g.capacity < g.total + extra
    assert err == ["dtsim train: error: 'plan' must be a plan that fits in GPU memory with "
                   "Bamboo's eager redundant copy (redundancy, mode=eager; mode=lazy keeps it in "
                   f"CPU memory): 'stage 0 on GH-96 (replica 0, TP 1) needs "
                   f"{format_bytes(g.total + extra)} ({format_bytes(extra)} for the copy of "
                   f"stage 1 and the activations of its forwards) of "
                   f"{format_bytes(g.capacity)}'"]


#: OPT-350's sizes on one GPU of a TP-2 group (the profile's, as plan_memory splits the plan's
#: own stages): 27,918,336 parameters (layer 0), 6,301,184 (1-24, not half of TP 1's
#: 12,596,224: the biases and layer norms are whole on each rank), 25,823,232 (25); held
#: activations 8,407,040 B, 192,954,368 B, 423,652,352 B; the sent activation whole, 8,388,608.
EMB2, DEC2, HEAD2 = 27_918_336, 6_301_184, 25_823_232
ACT0_2, ACT2, ACT25_2 = 8_407_040, 192_954_368, 423_652_352


def test_eager_copy_at_tp2_is_each_ranks_shard_by_hand(tmp_path):
    """dtsim's extension (Bamboo has no TP path): the 3-stage plan of 8 micro-batches a
    pipeline on TP-2 nodes. Stage 0's rank holds its shard of stage 1's copy, 16 x 9 x
    6,301,184 = 907,370,496 B (TP 1: 1,813,856,256; the ratio the profile's split gives,
    6,301,184 / 12,596,224, not one half), 8 x 9 x 192,954,368 of activations and 8 whole
    inputs: 14,867,193,856 B. Stage 1's: 16 x (7 x 6,301,184 + 25,823,232) = 1,118,904,320,
    7 x 192,954,368 + 423,652,352, 8 inputs: 2,960,346,112. Stage 2's: 16 x (27,918,336 + 8 x
    6,301,184) = 1,253,244,928, 8 x (8,407,040 + 8 x 192,954,368): 13,669,580,800. The
    copy's parameters are 16 / 4 (OPT-350's 4-byte values) times the weights plan_memory
    counts for the covered stage at TP 2."""
    from sim.profiles.build import eager_copy_memory

    pr = load_profiles(models=("OPT-350",))
    model = pr.model("OPT-350")
    s2 = model.layer_sizes(2)
    assert [s2[x].params for x in (0, 1, 24, 25)] == [EMB2, DEC2, DEC2, HEAD2]
    assert [s2[x].activation_memory_bytes for x in (0, 1, 25)] == [ACT0_2, ACT2, ACT25_2]
    assert s2[8].activation_bytes == s2[17].activation_bytes == SENT
    assert (16 * 9 * DEC2, 16 * (7 * DEC2 + HEAD2), 16 * (EMB2 + 8 * DEC2)) == (
        907_370_496, 1_118_904_320, 1_253_244_928)
    one = eager_copy_memory(read_plan(_plan(tmp_path, 16, tp=1)), model.layer_sizes)
    two = eager_copy_memory(read_plan(_plan(tmp_path, 16, tp=2)), model.layer_sizes)
    assert one == (27_853_275_136,) * 2 + (5_661_879_296,) * 2 + (25_623_658_496,) * 2
    assert two == (14_867_193_856,) * 2 + (2_960_346_112,) * 2 + (13_669_580_800,) * 2
    assert 14_867_193_856 == 907_370_496 + 8 * 9 * ACT2 + 8 * SENT
    assert 2_960_346_112 == 1_118_904_320 + 7 * ACT2 + ACT25_2 + 8 * SENT
    assert 13_669_580_800 == 1_253_244_928 + 8 * (ACT0_2 + 8 * ACT2)
    # the copy's parameters: the split the plan's own memory uses (weights at 4 B a value)
    mem = build_plan(read_plan(_plan(tmp_path, 16, tp=2)), pr, model="OPT-350",
                     check_memory=False).memory
    assert [g.tp for g in mem] == [2] * 6
    assert [4 * g.weights for g in mem[2::2]] + [4 * mem[0].weights] == [
        907_370_496, 1_118_904_320, 1_253_244_928]
    # and dtsim train runs it eager (its copy fits), where it refused TP > 1 before
    assert main(["train", "--plan", _plan(tmp_path, 16, tp=2), "--model", "OPT-350", "--steps",
                 "1", "--replications", "1", "--strategy", "redundancy:mode=eager"]) == 0


#: OPT-350 on one GPU of a TP-4 group (the profile's): 3,153,664 parameters a decoder layer
#: (3-24), 109,068,288 B held a sample.
DEC4, ACT4 = 3_153_664, 109_068_288


def test_readme_plan_under_the_default_eager_copy_at_tp4(capsys):
    """The README's clariden-OPT-350-N8_D2 (4 stages of 5, 7, 7, 7 layers, 2 replicas of a TP-4
    GH-96 node, 32 micro-batches of 8 samples): under the default eager mode stage 0's rank
    holds its shard of stage 1's copy, 16 x 7 x 3,153,664 = 353,210,368 B, and the activations
    of its 32 kept forwards, 32 x 8 x 7 x 109,068,288 = 195,450,372,096 B, with 32 inputs of
    8 x 8,388,608: 197,951,066,112 B more, beyond the 95.6 GiB: refused in one line (lazy runs
    it). clariden-OPT-350-N4_D2 (2 stages, TP 4, 32 micro-batches of 1) fits and runs eager:
    per-step forwards that lazy has not."""
    argv = ["train", "--model", "OPT-350", "--steps", "1", "--replications", "1"]
    n8 = ["--plan", "sim/profiles/data/runs/clariden-OPT-350-N8_D2.json"]
    extra = 16 * 7 * DEC4 + 32 * 8 * 7 * ACT4 + 32 * 8 * SENT
    assert extra == 197_951_066_112
    g = build_plan(read_plan(n8[1]), load_profiles(models=("OPT-350",)), model="OPT-350",
                   network=True).memory[0]
    assert (g.stage, g.tp) == (0, 4) and g.total <= g.capacity < g.total + extra
    assert main([*argv, *n8, "--strategy", "redundancy"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "dtsim train: error: 'plan' must be a plan that fits in GPU memory with Bamboo's eager "
        "redundant copy (redundancy, mode=eager; mode=lazy keeps it in CPU memory): 'stage 0 "
        f"on GH-96 (replica 0, TP 4) needs {format_bytes(g.total + extra)} "
        f"({format_bytes(extra)} for the copy of stage 1 and the activations of its forwards) "
        f"of {format_bytes(g.capacity)}'"]
    assert main([*argv, *n8, "--strategy", "redundancy:mode=lazy"]) == 0
    capsys.readouterr()
    n4 = ["--plan", "sim/profiles/data/runs/clariden-OPT-350-N4_D2.json", "--json"]
    got = {}
    for s in ("redundancy", "redundancy:mode=eager", "redundancy:mode=lazy"):
        assert main([*argv, *n4, "--strategy", s]) == 0
        got[s] = json.loads(capsys.readouterr().out)["wall_time_mean"]
    assert got["redundancy"] == got["redundancy:mode=eager"] > got["redundancy:mode=lazy"]


@pytest.mark.parametrize("bad", ["redundancy:mode=fast", "redundancy:mode="])
def test_mode_is_eager_or_lazy(bad):
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="'mode' must be one of"):
        make_strategy(bad)


def test_eager_forms_nothing_its_copy_does_not_fit(tmp_path, capsys):
    """40 samples a step: two pipelines of 20 micro-batches fit eager (stage 0's GPU holds
    16 x 9 x 12,596,224 + 20 x (9 x 360,726,528 + 8,388,608) = 66,912,403,456 B more); one
    pipeline of 40 does not (132,010,950,656 B for the copy alone, beyond the GPU's 95.6 GiB).
    s1r0 lost at 1 s: lazy rebalances onto one pipeline and finishes. Eager's s0r0 takes the
    stage over; Bamboo's rule asks for a rebalance (1 overloaded of 5 active, 2/5 > 0.05) but
    the 5 ready workers form nothing, so it runs on degraded: steps of ``T`` (the failure-free
    run's) until 1 s, the rest of step 2 and steps 3-5 at 1.5 T, ``1 + 1.5 (2 T - 1) + 4.5 T``
    (it stopped after 2 steps, waiting for a worker: the rebalance tore the rings down first).
    s0r0 lost too at 2 s is fatal: the restart forms nothing of the 4 left, and says so."""
    assert 16 * 9 * DEC + 20 * (9 * ACT + SENT) == 66_912_403_456
    assert 16 * 9 * DEC + 40 * (9 * ACT + SENT) == 132_010_950_656 > 95.6 * 2**30
    trace = tmp_path / "rm.csv"
    trace.write_text(f"worker,start,end\ns1r0,1.0,{BIG}\n")
    plan = ["--plan", _plan(tmp_path, 40), "--model", "OPT-350", "--steps", "5",
            "--replications", "1"]
    argv = [*plan, "--failure-trace", str(trace), "--stall-limit", "1000"]
    lazy = _json(capsys, [*argv, "--strategy", "redundancy:mode=lazy,every=0,boot=0"])
    assert (lazy["finished"], lazy["steps_done"]) == (1.0, 5.0)
    T = _json(capsys, [*plan, "--strategy", "redundancy:every=0,boot=0"])["wall_time_mean"] / 5
    eager = _json(capsys, [*argv, "--strategy", "redundancy:every=0,boot=0"])  # default
    assert (eager["finished"], eager["steps_done"]) == (1.0, 5.0)
    assert eager["wall_time_mean"] == pytest.approx(1 + 1.5 * (2 * T - 1) + 4.5 * T, rel=1e-12)
    counts = eager["strategy_counts"]
    assert (counts["rebalances"], counts["wait_time"], counts["takeover_windows"]) == (0, 0, 1)
    assert counts["degraded_time"] == pytest.approx(eager["wall_time_mean"] - 1, rel=1e-12)
    trace.write_text(f"worker,start,end\ns1r0,1.0,{BIG}\ns0r0,2.0,{BIG}\n")
    fatal = _json(capsys, [*argv, "--strategy", "redundancy:every=0,boot=0"])
    assert (fatal["finished"], fatal["steps_done"]) == (0.0, 0.0)
    assert fatal["stall_reason"] == (
        "no step can finish: redundancy can form nothing of the 4 ready workers that fits in "
        "GPU memory (the plan re-planned for them, with Bamboo's eager copy)")


def _json(capsys, argv):
    assert main(["train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)
