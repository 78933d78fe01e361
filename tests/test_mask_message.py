"""DeepSpeed 0.3.13's attention mask, a blocking message of its own: a ``GPT2ModelPipe``
stage's output is the tuple ``(hidden, mask)``, partitioned with TP > 1 into ``(metadata,
part, mask)`` (``runtime/pipe/engine.py:106, 513-520``), and the engine sends the tuple item
by item, each a blocking ``p2p.send`` (``788-792``), a ``dist.broadcast`` over the two ranks'
group (``runtime/pipe/p2p.py:31-41``, ``async_op`` forced False), received one by one
(``873-886``); the gradient goes back without it (``822-830``). So every activation is one
latency longer than the part and the mask as one message, at TP 1 too.

Worked by hand on the shipped OPT-350 profiles with every link of ``B`` = 1 Gbit/s and
latency ``l`` = 10 ms, where ``k`` flows of ``S`` bytes each take ``l + k S / B``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

# the shipped OPT-350 profiles on links of 1 Gbit/s and 10 ms, and their hand arithmetic, as
# the partition metadata's tests have them (``prof`` is their fixture)
from test_partition_meta import ACT, LAT, Z, _msg, _step, slow_link_profiles, two_stage_1f1b
from test_partition_meta import _plan as _plan_of

from sim.analytic.training import program_makespan
from sim.profiles import Plan, ReplicaSpec, StageSpec
from sim.profiles.build import build_plan, mask_message_bytes, p2p_flows
from sim.profiles.frameworks import FrameworkSpec
from sim.rng import Streams
from sim.training import training_model
from sim.training.schedules import deepspeed_program

SEQ = 2048
MASK = 2 * SEQ * SEQ  # the 1 x 1 x seq x seq mask in fp16: 8 MiB from every TP rank
DS3 = FrameworkSpec("deepspeed", "0.3.13", options=(("seq_length", SEQ),))


@pytest.fixture(scope="module")
def prof():
    return slow_link_profiles()


def _plan(tp, fw=DS3, m=4, L=2):
    return _plan_of(tp, fw, m=m, L=L)


@pytest.mark.parametrize("tp, meta, grad", [
    # TP 1: (hidden, mask), two broadcasts; the gradient whole, one
    (1, 0.0, _msg(1, ACT)),
    # TP 2: (metadata, part, mask) from each rank, three broadcasts each; the gradient whole
    # from each rank (0.3.13 does not partition it, engine.py:107)
    (2, 8 * (7 + 2), _msg(2, ACT)),
])
def test_two_stages_by_hand(prof, tp, meta, grad):
    """DeepSpeed 0.3.13, fp32, 2 stages of TP ``t``, one pipeline, 4 micro-batches of 2,
    sequence 2048. An activation is ``[l + t 8 (7 + t) / B] + (l + t (16 MiB / t) / B)
    + (l + t 8 MiB / B)``: at TP 1 ``0.2213266 s`` (10 ms more than the part and the mask as
    one message, ``0.2113266 s``), at TP 2 ``0.2984366 s`` (against ``0.2884366 s``); the
    gradient ``l + t 16 MiB / B``. With stage 0's passes ``f0, b0`` and stage 1's ``f1, b1``
    the blocking 1F1B program (``deepspeed_program``) ends at
    ``X3 + g + a + max(b0, f1 + b1) + g + b0``, ``X3 = f0 + a + max(f0, f1 + b1) + 2 P``,
    ``P = g + a + max(b0 + f0, f1 + b1)``: four activations on the critical path, so the
    step is ``4 l`` = 40 ms longer (TP 1: 2.4385 -> 2.4785 s; TP 2: 2.8438 -> 2.8838 s).
    The DES over the plan's network (each rank's mask a transfer of its own after its
    part) gives the closed form's step."""
    plan = _plan(tp)
    b = build_plan(plan, prof, steps=1, check_memory=False)
    assert mask_message_bytes(b.behaviour) == MASK
    assert mask_message_bytes(b.behaviour, gradient=True) == 0.0
    assert p2p_flows(b.behaviour, ACT, tp) == (ACT / tp, tp)  # the tensor alone
    a_hand = (_msg(tp, meta) if meta else 0.0) + _msg(tp, ACT / tp) + _msg(tp, MASK)
    one = (_msg(tp, meta) if meta else 0.0) + _msg(tp, ACT / tp + MASK)  # as dtsim had it
    (a, g), = b.transfer_times[0]
    assert a == pytest.approx(a_hand, rel=1e-12)
    assert a - one == pytest.approx(LAT, rel=1e-9)
    assert g == pytest.approx(grad, rel=1e-12)
    (f0, b0), (f1, b1) = (row[0] for row in b.config.replica_times)

    def program(a, g):
        return two_stage_1f1b(f0, b0, f1, b1, a, g)

    progs = [deepspeed_program(2, 4, j) for j in (0, 1)]
    for x in (a, one):
        assert program_makespan(progs, [f0, f1], [b0, b1], [x], [g], blocking=True) == \
            pytest.approx(program(x, g), rel=1e-12)
    step = _step(b.config)
    before = _step(replace(b.config, transfer_times=(((one, g),),)))
    assert step - before == pytest.approx(program(a, g) - program(one, g), rel=1e-9)
    assert step - before == pytest.approx(4 * LAT, rel=1e-9)
    assert step == pytest.approx({1: 2.478479197, 2: 2.883800115}[tp], rel=1e-9)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    assert net.config.mask_sizes == (tp * MASK,)
    assert net.config.transfer_sizes == (ACT,)  # the parts alone
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(step, rel=1e-9)


def test_eight_stages_one_latency_per_activation(prof):
    """8 stages of TP 2, 8 micro-batches: 21 activations on the critical path, so the step
    is 21 l = 210 ms longer than with the part and the mask as one message (12.3473 ->
    12.5573 s); the DES over the plan's network agrees with the closed form (1e-9)."""
    plan = _plan(2, m=8, L=8)
    b = build_plan(plan, prof, steps=1, check_memory=False)
    for row in b.transfer_times:  # every hop: metadata, part, mask, each a latency
        assert row[0][0] == pytest.approx(_msg(2, 72.0) + _msg(2, ACT / 2) + _msg(2, MASK),
                                          rel=1e-12)
    one = tuple(tuple((a - LAT, g) for a, g in row) for row in b.transfer_times)
    step = _step(b.config)
    assert step - _step(replace(b.config, transfer_times=one)) == \
        pytest.approx(21 * LAT, rel=1e-9)
    assert step == pytest.approx(12.557316462, rel=1e-9)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    des = training_model(net.config, Streams(0).replication(0))["step_time_mean"]
    assert des == pytest.approx(step, rel=1e-9)


def test_overlapped_hops_queue_the_mask_after_the_part(prof):
    """With ``p2p`` overlap (FIFO channels, a rank's messages in the order sent) the mask
    queues behind its rank's part: the DES over the plan's network gives the closed form's
    step (1e-9), the hop three messages of a latency each."""
    plan = _plan(2)
    b = build_plan(plan, prof, steps=1, check_memory=False, p2p="overlap")
    net = build_plan(plan, prof, steps=1, check_memory=False, p2p="overlap", network=True)
    assert b.transfer_times[0][0][0] == pytest.approx(
        _msg(2, 72.0) + _msg(2, ACT / 2) + _msg(2, MASK), rel=1e-12)
    assert training_model(net.config, Streams(0).replication(0))["step_time_mean"] == \
        pytest.approx(_step(b.config), rel=1e-9)


@pytest.mark.parametrize("fw", [FrameworkSpec("deepspeed", "0.16.5"),
                                FrameworkSpec("sailor-deepspeed"), FrameworkSpec("megatron")])
def test_no_mask_elsewhere(prof, fw):
    """Every other framework sends no mask: no message after the part, no ``mask_sizes``."""
    b = build_plan(_plan(2, fw), prof, steps=1, check_memory=False, network=True)
    assert mask_message_bytes(b.behaviour) == 0.0
    assert b.config.mask_sizes is None


@pytest.mark.parametrize("tp", [1, 2])
def test_timeline_hop_bytes(prof, tp):
    """The timeline's hop spans say what moved: an activation its part(s), the ``tp`` masks
    after them and at TP 2 the ranks' metadata before them (``2 x 8 (7 + 2)`` = 144 bytes,
    named apart with the mask: it was left out); a gradient its own bytes (whole from every
    TP rank in 0.3.13, ``engine.py:107``), no metadata and never a mask (``822-830``). At
    micro-batch 1 (hidden states ``H`` = 8 MiB, fp32) the activation is ``H + tp 8 MiB``
    (+ 144 at TP 2), the gradient ``tp H``; the gradient had shown the activation's bytes,
    masks included (16 MiB for 8 at TP 1, 24 MiB for 16 at TP 2)."""
    import json

    from sim.timeline import Recorder

    H = ACT // 2
    plan = Plan(tuple(StageSpec(tuple(range(a, b)), (
        ReplicaSpec("A100-40", tp, gpus_per_node=tp, zone=Z),)) for a, b in ((0, 13), (13, 26))),
        1, 4, model="OPT-350", framework=DS3)
    net = build_plan(plan, prof, steps=1, check_memory=False, network=True)
    rec = Recorder()
    training_model(net.config, Streams(0).replication(0), recorder=rec)
    rec.close(1e9)
    meta = 0 if tp == 1 else 2 * 8 * (7 + 2)
    seen = {(e["name"], e["args"]["bytes"], e["args"].get("metadata"), e["args"].get("mask"))
            for e in json.loads(rec.to_json())["traceEvents"]
            if e.get("name") in ("activation", "gradient") and e.get("ph") == "X"}
    assert seen == {("activation", float(H + meta + tp * MASK), float(meta), float(tp * MASK)),
                    ("gradient", float(tp * H), None, None)}
