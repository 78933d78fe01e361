"""DeepSpeed's partition metadata: with TP > 1 a stage sends each partitioned activation and
gradient as two blocking messages, ``PartitionedTensor.to_meta()`` (7 + t int64 values from
each TP rank) and then its part (v0.16.5 ``runtime/pipe/engine.py:759, 1041, 1094-1095``;
``runtime/utils.py:690-705``), every micro-batch; 0.3.13 with the activation only (its
gradient is whole, ``engine.py:107``); the Sailor artifact's engine with every activation and
gradient at any TP degree (``deepspeed/pipe_engine.py:772-788, 1101-1102``).

Worked by hand on the shipped OPT-350 profiles with every link of ``B`` = 1 Gbit/s and
latency ``l`` = 10 ms, where ``k`` flows of ``S`` bytes each take ``l + k S / B``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_step_collectives import one_link_profiles

from sim.engines import predictions
from sim.profiles import Plan, ReplicaSpec, StageSpec
from sim.profiles.build import build_plan
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model

Z = "us-central1-a"
B, LAT = 1e9 / 8, 10e-3  # 1 Gbit/s, 10 ms
ACT = 2 * 2048 * 1024 * 4  # OPT-350's hidden states at micro-batch 2, fp32: 16 MiB


def slow_link_profiles():
    """The shipped OPT-350 profiles with every link ``B`` and latency ``LAT``."""
    return one_link_profiles(B, LAT)


@pytest.fixture(scope="module")
def prof():
    return slow_link_profiles()


def _plan(tp, fw, m=4, L=2):
    cuts = [round(26 * k / L) for k in range(L + 1)]
    return Plan(tuple(StageSpec(tuple(range(cuts[j], cuts[j + 1])), (
        ReplicaSpec("A100-40", tp, gpus_per_node=tp, zone=Z),)) for j in range(L)), 2, 2 * m,
        model="OPT-350", framework=fw)  # micro-batch 2, m of them


def _msg(k, size):
    """``k`` flows of ``size`` bytes each over one link."""
    return LAT + k * size / B


def _step(cfg):
    return predictions("training", cfg)["step_time_mean"]["value"]


def two_stage_1f1b(f0, b0, f1, b1, a, g):
    """DeepSpeed's 1F1B step of 2 stages and 4 micro-batches by hand, every hop a blocking
    paired transfer: the activation ``a`` and the gradient ``g``, passes ``f``/``b`` a stage."""
    P = g + a + max(b0 + f0, f1 + b1)
    X3 = f0 + a + max(f0, f1 + b1) + 2 * P
    return X3 + g + a + max(b0, f1 + b1) + g + b0


def _des(plan, prof):
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    return net, training_model(net.config, Streams(0).replication(0))["step_time_mean"]


def test_two_stages_at_tp_2_by_hand(prof):
    """DeepSpeed 0.16.5, fp32, 2 stages of TP 2, one pipeline, 4 micro-batches, 1F1B with its
    blocking paired sends in TrainSchedule order. Each hop is the two TP ranks' metadata
    (``8 (7 + 2)`` = 72 bytes each), then their halves of the 16 MiB activation:
    ``a = (l + 2 x 72 / B) + (l + 2 x 8 MiB / B)``, the gradient back the same. With stage 0's
    passes ``f0, b0`` and stage 1's ``f1, b1`` (the build's, all-gathers included) the
    program (``deepspeed_program``) ends at
    ``X3 + g + a + max(b0, f1 + b1) + g + b0``, ``X3 = f0 + a + max(f0, f1 + b1) + 2 P``,
    ``P = g + a + max(b0 + f0, f1 + b1)`` (stage 0 waits for each gradient, then sends the
    next activation): ``4 a + 4 g`` plus passes, every transfer on the critical path. The
    step adds the same tail with or without the metadata, so it is ``8 (l + 144 / B)`` =
    80.009 ms longer, 1.8100 s against the 1.7300 s of the part alone (+4.6%). The DES over
    the plan's network (each rank's metadata a flow before its part) gives the closed form's
    step."""
    plan = _plan(2, FrameworkSpec("deepspeed", "0.16.5", "fp32"))
    b = build_plan(plan, prof, steps=1, check_memory=False)
    meta, part = _msg(2, 72.0), _msg(2, ACT / 2)
    (a, g), = b.transfer_times[0]
    assert a == pytest.approx(meta + part, rel=1e-12)
    assert g == pytest.approx(meta + part, rel=1e-12)
    from sim.profiles.build import partition_meta_bytes

    assert partition_meta_bytes(b.behaviour, 2) == partition_meta_bytes(
        b.behaviour, 2, gradient=True) == 8 * (7 + 2)
    (f0, b0), (f1, b1) = (row[0] for row in b.config.replica_times)

    def program(a, g):
        return two_stage_1f1b(f0, b0, f1, b1, a, g)

    from sim.analytic.training import program_makespan
    from sim.training.schedules import deepspeed_program

    progs = [deepspeed_program(2, 4, j) for j in (0, 1)]
    for x in (a, part):  # with the metadata, and as dtsim had it (the part alone)
        assert program_makespan(progs, [f0, f1], [b0, b1], [x], [x], blocking=True) == \
            pytest.approx(program(x, x), rel=1e-12)
    step = _step(b.config)
    without = _step(replace(b.config, transfer_times=(((part, part),),)))
    assert step - without == pytest.approx(program(a, a) - program(part, part), rel=1e-9)
    assert step - without == pytest.approx(8 * meta, rel=1e-9)
    net, des = _des(plan, prof)
    assert net.config.meta_sizes == (72.0,) and net.config.gradient_meta_sizes is None
    assert des == pytest.approx(step, rel=1e-9)


@pytest.mark.parametrize("fw, tp, act, grad", [
    # upstream DeepSpeed: only what it partitions, only with TP > 1
    (FrameworkSpec("deepspeed", "0.16.5"), 1, 0, 0),
    (FrameworkSpec("deepspeed", "0.16.5"), 4, 88, 88),
    (FrameworkSpec("deepspeed", "0.14.4"), 4, 88, 88),
    (FrameworkSpec("deepspeed", "0.9.0"), 2, 72, 72),
    (FrameworkSpec("deepspeed", "0.16.5", options=(("grad_partitioned", False),
                                                   ("pipe_partitioned", False))), 2, 0, 0),
    # 0.3.13: the activation only (its gradient goes whole)
    (FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", 16),)), 2, 72, 0),
    # the Sailor artifact's engine partitions every hop's tensor, even over one rank
    (FrameworkSpec("sailor-deepspeed"), 1, 64, 64),
    (FrameworkSpec("sailor-deepspeed"), 2, 72, 72),
    (FrameworkSpec("megatron"), 2, 0, 0),  # one tensor a hop (p2p_communication.py:494-514)
])
def test_which_hops_carry_the_metadata(prof, fw, tp, act, grad):
    """Per framework, release and TP degree, the bytes of each rank's metadata message before
    an activation and a gradient (0: none), and the hop's time by hand: ``t`` flows of the
    metadata, then ``t`` flows of the part (whole from each rank where not partitioned:
    Megatron-LM, 0.3.13's gradient, ``pipe_partitioned`` off), then 0.3.13's ``t`` masks, a
    message of their own (tests/test_mask_message.py). The DES over the plan's network
    equals the closed form (1e-9)."""
    plan = _plan(tp, fw, m=2)
    b = build_plan(plan, prof, steps=1, check_memory=False)
    fb = b.behaviour
    mask = 2 * 16 * 16 if fw.version == "0.3.13" else 0  # its GPT2ModelPipe mask, fp16
    each = ACT / tp if fb.partitioned or tp == 1 else ACT
    back = ACT / tp if fb.gradient_partitioned or tp == 1 else ACT
    (a, g), = b.transfer_times[0]
    assert a == pytest.approx((_msg(tp, act) if act else 0.0) + _msg(tp, each)
                              + (_msg(tp, mask) if mask else 0.0), rel=1e-12)
    assert g == pytest.approx((_msg(tp, grad) if grad else 0.0) + _msg(tp, back), rel=1e-12)
    _, des = _des(plan, prof)
    assert des == pytest.approx(_step(b.config), rel=1e-9)
    from sim.profiles.build import partition_meta_bytes

    assert (partition_meta_bytes(fb, tp), partition_meta_bytes(fb, tp, gradient=True)) == \
        (act, grad)


def test_overlapped_and_grouped_hops_queue_the_metadata_first(prof):
    """The metadata is a message of its own on the channel of its rank: with ``p2p`` overlap
    (FIFO channels) the part queues behind it, and in the Sailor artifact's pipeline groups
    (stages of TP 1, 2, 1: the TP-1 ranks send and receive their two groups' messages in
    turn, each its metadata then its part) a hop is ``n`` such pairs one after the other; in
    both the DES over the plan's network gives the closed form's step (1e-9)."""
    over = _plan(2, FrameworkSpec("deepspeed", "0.16.5"))
    b = build_plan(over, prof, steps=1, check_memory=False, p2p="overlap")
    net = build_plan(over, prof, steps=1, check_memory=False, p2p="overlap", network=True)
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(_step(b.config), rel=1e-9)
    assert b.transfer_times[0][0][0] == pytest.approx(_msg(2, 72.0) + _msg(2, ACT / 2),
                                                      rel=1e-12)
    mixed = Plan(tuple(StageSpec(tuple(range(9 * j, min(9 * j + 9, 26))), (
        ReplicaSpec("A100-40", t, gpus_per_node=t, zone=Z),)) for j, t in enumerate((1, 2, 1))),
        2, 4, model="OPT-350", framework=FrameworkSpec("sailor-deepspeed"))
    g = build_plan(mixed, prof, steps=1, check_memory=False)
    # hop 0's activation: the TP-1 rank sends its 2 groups (64-byte metadata, then the whole
    # tensor) in turn; its gradient: the TP-1 rank receives its 2 groups' in turn, each a
    # TP-2 rank's 72-byte metadata, then its half
    assert g.transfer_times[0][0][0] == pytest.approx(2 * (_msg(1, 64.0) + _msg(1, ACT)),
                                                      rel=1e-12)
    assert g.transfer_times[0][0][1] == pytest.approx(2 * (_msg(1, 72.0) + _msg(1, ACT / 2)),
                                                      rel=1e-12)
    _, des = _des(mixed, prof)
    assert des == pytest.approx(_step(g.config), rel=1e-9)


def _timeline_hops(plan, prof):
    """(name, stage, bytes, tensor, metadata, mask) of every hop span of a step over the plan's
    network."""
    import json

    from sim.timeline import Recorder

    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    rec = Recorder()
    training_model(net.config, Streams(0).replication(0), recorder=rec)
    rec.close(1e9)
    return {(e["name"], e["args"]["stage"], e["args"]["bytes"], e["args"].get("tensor"),
             e["args"].get("metadata"), e["args"].get("mask"))
            for e in json.loads(rec.to_json())["traceEvents"]
            if e.get("name") in ("activation", "gradient") and e.get("ph") == "X"}


def test_timeline_hop_bytes_count_the_metadata(prof):
    """A hop's span on the timeline says every byte it moves: the tensor, and the partition
    metadata each message carries before its part, named apart (the span showed the tensor
    alone). 2 stages of TP 2 on 0.16.5: each way ``ACT`` and 2 ranks x ``8 (7 + 2)`` = 144
    bytes. The Sailor artifact's groups (TP 1, 2, 1): hop 0's activation is its 2 groups'
    messages from the TP-1 rank, each 64 bytes of metadata and the whole tensor (2 ACT +
    128); its gradient the 2 TP-2 ranks' 72 and halves (ACT + 144). At TP 1 upstream
    DeepSpeed sends no metadata: the span has no parts."""
    fw = FrameworkSpec("deepspeed", "0.16.5", "fp32")
    assert _timeline_hops(_plan(2, fw), prof) == {
        ("activation", 1, float(ACT + 144), float(ACT), 144.0, 0.0),
        ("gradient", 0, float(ACT + 144), float(ACT), 144.0, 0.0)}
    assert _timeline_hops(_plan(1, fw), prof) == {
        ("activation", 1, float(ACT), None, None, None),
        ("gradient", 0, float(ACT), None, None, None)}
    mixed = Plan(tuple(StageSpec(tuple(range(9 * j, min(9 * j + 9, 26))), (
        ReplicaSpec("A100-40", t, gpus_per_node=t, zone=Z),)) for j, t in enumerate((1, 2, 1))),
        2, 4, model="OPT-350", framework=FrameworkSpec("sailor-deepspeed"))
    hops = _timeline_hops(mixed, prof)
    assert ("activation", 1, float(2 * ACT + 128), float(2 * ACT), 128.0, 0.0) in hops
    assert ("gradient", 0, float(ACT + 144), float(ACT), 144.0, 0.0) in hops
    assert all(x[2] == x[3] + x[4] + x[5] for x in hops) and len(hops) == 4


def test_pipe_and_grad_partitioned_are_two_keys(prof):
    """DeepSpeed 0.12.3 on reads two pipeline keys, ``pipe_partitioned`` and
    ``grad_partitioned`` (v0.16.5 ``runtime/config.py:467-468``, both default true), and
    computes ``is_pipe_partitioned`` and ``is_grad_partitioned`` apart, each with TP > 1
    (``runtime/pipe/engine.py:144-145``). dtsim had ``pipe_partitioned = false`` turn off
    both: at TP > 1 that config leaves the gradient partitioned, sent as metadata and a 1/t
    part (1062-1075, 1094-1095) where the previous stage, its output whole, receives one
    whole-size tensor (1173-1175, 1204): no assert, the messages do not match, it does not
    train. Now refused at TP > 1 naming ``grad_partitioned``, and so is the gradient whole
    under a partitioned activation (its output's all-gather in ``_exec_recv_grads``, 1167,
    before each gradient receive: not modelled in 0.16.5's step order); both off times what
    dtsim timed before, bit for bit. By hand, 2 stages of TP 2 (fp32, 16 MiB activation) at
    1 Gbit/s and 10 ms: default ``(l + 2 x 72 / B) + (l + 2 x 8 MiB / B)`` = 0.15422 s a hop
    each way; both off ``l + 2 x 16 MiB / B`` = 0.27844 s (dtsim's before for
    ``pipe_partitioned = false`` alone, now refused). At TP 1 the keys do nothing."""
    from sim.errors import ConfigError
    from sim.profiles.frameworks import RELEASES, resolve

    def hop(tp, *opts):
        fw = FrameworkSpec("deepspeed", "0.16.5", "fp32", options=opts)
        return build_plan(_plan(tp, fw), prof, steps=1, check_memory=False)

    whole = _msg(2, ACT)
    (a, g), = hop(2).transfer_times[0]
    assert a == g == pytest.approx(_msg(2, 72.0) + _msg(2, ACT / 2), rel=1e-12)
    off = hop(2, ("grad_partitioned", False), ("pipe_partitioned", False))
    assert off.transfer_times[0] == ((pytest.approx(whole, rel=1e-12),) * 2,)
    # as the code before timed pipe_partitioned = false alone, bit for bit
    assert off.transfer_times == (((0.278435456, 0.278435456),),)
    assert off.config.replica_times == (((0.032589, 0.075887),), ((0.036026, 0.080182),))
    assert not off.behaviour.partitioned and not off.behaviour.gradient_partitioned
    assert off.behaviour.gathers == () and off.behaviour.tp_degrees is None
    for opts, words in (((("pipe_partitioned", False),), "pipe_partitioned=false with "
                         "grad_partitioned=true"),
                        ((("grad_partitioned", False),), "pipe_partitioned=true with "
                         "grad_partitioned=false")):
        with pytest.raises(ConfigError, match=r"^'tp' must be 1 with framework deepspeed, at "
                           r"stage 0 replica 0 \(" + words + r".*partition's metadata and 1/t "
                           r"part \(1094-1095\).*one whole-size tensor \(1204\).*\(1167\).*: 2$"):
            hop(2, *opts)
        assert resolve(FrameworkSpec("deepspeed", options=opts), 4).tp_degrees == (1,)
        # TP 1: neither key does anything (is_model_parallel false)
        assert hop(1, *opts).transfer_times == hop(1).transfer_times == ((
            (_msg(1, ACT), _msg(1, ACT)),),)
    # each release with the keys cites its own lines; before 0.12.3, 0.3.13 and the Sailor
    # artifact's engine (which partitions every gradient whatever the key says): refused
    for version, cfg, flag, recv in (("0.12.3", 453, 138, 1128), ("0.14.1", 466, 141, 1217)):
        src = RELEASES["deepspeed"][version].options["grad_partitioned"][1]
        assert f"v{version}" in src and f"config.py:{cfg} " in src and f":{flag}," in src and \
            f"tensor ({recv})" in src, version
    for name, version in (("deepspeed", "0.12.2"), ("deepspeed", "0.3.13"),
                          ("sailor-deepspeed", "0.16.5")):
        with pytest.raises(ConfigError, match=r"grad_partitioned: .*: 'grad_partitioned'$"):
            FrameworkSpec(name, version, options=(("grad_partitioned", False),))
