"""Bamboo's two recovery modes (``--strategy redundancy:mode=lazy|eager``): lazy (Bamboo's
default) runs no redundant forwards a step and recomputes the lost stage's forwards at a
takeover; eager runs them every step and holds the covered stage's copy and those forwards'
activations on the GPU (sim.profiles.build.eager_copy_memory). Hand timelines and hand bytes."""

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


def _plan(tmp_path, gbs):
    """OPT-350 in 3 stages (layers 0-8, 9-17, 18-25) x 2 replicas of one GH-96 GPU (TP 1),
    micro-batches of 1: ``gbs / 2`` micro-batches a pipeline."""
    rep = [{"gpu": "GH-96", "tp": 1, "gpus_per_node": 1, "zone": "us-central1-a", "count": 2}]
    data = {"microbatch_size": 1, "global_batch_size": gbs,
            "stages": [{"first_layer": a, "last_layer": b, "replicas": rep}
                       for a, b in ((0, 8), (9, 17), (18, 25))],
            "framework": {"name": "sailor-deepspeed", "version": "0.16.5"}}
    p = tmp_path / f"p3-{gbs}.json"
    p.write_text(json.dumps(data))
    return str(p)


def test_default_mode_is_bamboos_lazy_with_no_redundant_forwards():
    """Bamboo's PipelineEngine and deepspeed.initialize default to eager_recovery=False and its
    launch script passes no --eager: lazy, whose LazyRecoverySchedule adds no forward. The
    job of test_redundancy_copies_each_stage_on_its_predecessor_as_bamboo: 4 s eager, 0 lazy."""
    job = SimpleNamespace(config=SimpleNamespace(
        stages=3, microbatches=8, forward_time=(1.0, 2.0, 4.0), backward_time=(2.0, 4.0, 8.0),
        step_times=None))
    f = SimpleNamespace(pipelines=((0, 1, 2),), step_time=100.0)
    assert Redundancy().mode == "lazy" and make_strategy("redundancy").mode == "lazy"
    assert Redundancy().rc_overhead(job, f) == 0.0
    assert make_strategy("redundancy:mode=eager").rc_overhead(job, f) == 4.0
    # a takeover of stage 2 recomputes its 8 forwards (4 s each) pro rata; none eager
    assert Redundancy().redo_time(job.config, 1, 2) == 32.0
    assert Redundancy(mode="eager").redo_time(job.config, 1, 2) == 0.0


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
    assert main([*base, "--strategy", "redundancy"]) == 0
    capsys.readouterr()
    assert main([*base, "--strategy", "redundancy:mode=eager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    extra = 16 * 9 * DEC + 128 * (9 * ACT + SENT)
    assert extra == 418_444_558_336
    g = build_plan(read_plan(path), load_profiles(models=("OPT-350",)), model="OPT-350",
                   network=True).memory[0]
    assert g.total <= g.capacity < g.total + extra
    assert err == ["dtsim train: error: 'plan' must be a plan that fits in GPU memory with "
                   "Bamboo's eager redundant copy (redundancy:mode=eager; mode=lazy keeps it in "
                   f"CPU memory): 'stage 0 on GH-96 (replica 0, TP 1) needs "
                   f"{format_bytes(g.total + extra)} ({format_bytes(extra)} for the copy of "
                   f"stage 1 and the activations of its forwards) of "
                   f"{format_bytes(g.capacity)}'"]


def test_eager_refuses_tensor_parallelism(capsys):
    """Bamboo's engine forms pipe x data topologies only: no eager copy for a TP group."""
    argv = ["train", "--plan", "sim/profiles/data/runs/clariden-OPT-350-N4_D2.json", "--model",
            "OPT-350", "--steps", "1", "--replications", "1"]
    assert main([*argv, "--strategy", "redundancy:mode=eager"]) == 2
    assert "'strategy' must be mode=lazy for redundancy with a plan of tensor parallelism" \
        in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["redundancy:mode=fast", "redundancy:mode="])
def test_mode_is_lazy_or_eager(bad):
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="'mode' must be one of"):
        make_strategy(bad)


def test_eager_forms_nothing_its_copy_does_not_fit(tmp_path, capsys):
    """40 samples a step: two pipelines of 20 micro-batches fit eager (stage 0's GPU holds
    16 x 9 x 12,596,224 + 20 x (9 x 360,726,528 + 8,388,608) = 66,912,403,456 B more); one
    pipeline of 40 does not (132,010,950,656 B for the copy alone, beyond the GPU's 95.6 GiB).
    s1r0 lost at 1 s: lazy rebalances onto one pipeline and finishes; eager takes the stage
    over, then can form nothing, and says so (the diagnosis blamed the failure rate)."""
    assert 16 * 9 * DEC + 20 * (9 * ACT + SENT) == 66_912_403_456
    assert 16 * 9 * DEC + 40 * (9 * ACT + SENT) == 132_010_950_656 > 95.6 * 2**30
    trace = tmp_path / "rm.csv"
    trace.write_text(f"worker,start,end\ns1r0,1.0,{BIG}\n")
    argv = ["--plan", _plan(tmp_path, 40), "--model", "OPT-350", "--steps", "5",
            "--replications", "1", "--failure-trace", str(trace), "--stall-limit", "1000"]
    lazy = _json(capsys, [*argv, "--strategy", "redundancy:every=0,boot=0"])
    assert (lazy["finished"], lazy["steps_done"]) == (1.0, 5.0)
    eager = _json(capsys, [*argv, "--strategy", "redundancy:mode=eager,every=0,boot=0"])
    assert (eager["finished"], eager["steps_done"]) == (0.0, 2.0)
    assert eager["stall_reason"] == (
        "no step can finish: redundancy can form nothing of the 5 ready workers that fits in "
        "GPU memory (the plan re-planned for them, with Bamboo's eager copy)")


def _json(capsys, argv):
    assert main(["train", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)
