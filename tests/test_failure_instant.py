"""A failure at the very instant work ends: the work is done first, in every engine.

The rule (:data:`sim.failures.LATE`): a component goes down after every other event of its
instant, as ``--max-time T`` ends a run after the events of ``T``. One stage, one replica, one
microbatch a step, 3 s steps (a 3 s forward pass, no backward), 3 steps, ``max_wait`` 0: the
failure-free run ends at 9. The worker goes down at 6, exactly when step 2 ends, and is back
at 7. Step 2 is done at 6; step 3's pass starts at 6 and is cut there (0 s lost), the
microbatch finds its stage down and is dropped, and the run ends at 6: 2 of 3 delivered,
throughput 2 / 6, drop rate 1 / 3, no lost pass time. Before, the failure's event (scheduled
earlier) came first: step 2's pass was lost (3 s), steps 2 and 3 dropped, throughput 1 / 6.
"""

from __future__ import annotations

import pytest

from sim.rng import Streams
from sim.training import TrainingConfig, training_model
from sim.training.system import TrainingSystem

BASE = dict(stages=1, replicas=1, microbatches=1, steps=3, forward_time=3.0,
            backward_ratio=0.0)


def _check(out):
    assert out["training_time"] == 6.0
    assert out["throughput"] == pytest.approx(2 / 6, rel=1e-12)
    assert out["drop_rate"] == pytest.approx(1 / 3, rel=1e-12)
    assert out["lost_lost_pass"] == 0.0 and out["lost_passes"] == 1  # step 3's, 0 s of it


def _trace(tmp_path, start=6.0, end=7.0):
    p = tmp_path / "down.csv"
    p.write_text(f"worker,start,end\ns0r0,{start},{end}\n")
    return str(p)


@pytest.mark.parametrize("max_time", [float("inf"), 6.0])
def test_a_trace_failure_at_a_step_end_keeps_the_step(tmp_path, max_time):
    """The replayed failure at 6 (also with ``--max-time 6``: inclusive, the step and the
    failure at 6 both happen before the run stops)."""
    out = training_model(TrainingConfig(**BASE, failure_trace=_trace(tmp_path),
                                        max_time=max_time), Streams(0).replication(0))
    _check(out)
    # only the exact instant moves: at 5.999 step 2's pass is lost (2.999 of it), the two
    # steps left dropped
    out = training_model(TrainingConfig(**BASE, failure_trace=_trace(tmp_path, 5.999)),
                         Streams(0).replication(0))
    assert out["training_time"] == pytest.approx(5.999, rel=1e-12)
    assert out["drop_rate"] == pytest.approx(2 / 3, rel=1e-12)
    assert out["lost_lost_pass"] == pytest.approx(2.999, rel=1e-12)


class _At:
    """A generator stand-in whose exponential draws are given times (then never again)."""

    def __init__(self, *ts):
        self.ts = list(ts)

    def exponential(self, _scale=1.0, size=None):
        return self.ts.pop(0) if self.ts else 1e9


def test_a_spot_preemption_at_a_step_end_keeps_the_step():
    """The spot model (``mtbf``) preempting at 6, replaced 1 later: the trace's numbers."""
    c = TrainingConfig(**BASE, mtbf=100.0, replace_time=1.0)
    system = TrainingSystem(c, Streams(0).replication(0))
    assert len(system.spots) == 1
    system.spots[0].rng = _At(6.0)
    _check(system.run())


class _Law:
    """A duration law of constant ``d`` whose residual is ``d`` too."""

    def __init__(self, d):
        self.mean = d

    def residual(self, _rng):
        return self.mean

    def sample(self, _rng, size=None):
        return self.mean


def test_a_renewal_failure_at_a_step_end_keeps_the_step():
    """The availability model's renewal process (up 6, down 1, starting up): the worker
    goes down at 6 exactly, as the trace's."""
    from sim.failures import _Renewal

    c = TrainingConfig(**BASE, availability=0.5, mean_downtime=1.0)
    system = TrainingSystem(c, Streams(0).replication(0))
    fm = system.failure_model
    i = next(k for k, d in enumerate(fm._drivers) if d.comp.name == "s0r0")
    drv = _Renewal(fm._drivers[i].comp, _Law(6.0), _Law(1.0), fm._drivers[i].rng)
    drv.initial_state = lambda: True
    fm._drivers[i] = drv
    _check(system.run())


def test_a_job_engine_spot_preemption_at_a_step_end_keeps_the_step():
    """The job engine's spot model (reconfiguration, no boot, reconfigure 1): two workers, 3 s
    steps at 3 and 6; one preempted at 6 exactly. Step 2 is done, step 3 is cut at once (0 s
    lost), the job re-forms on the other worker by 7 and ends at 10. It used to take the
    preemption first: step 2 lost (3 s), 13. At 5.999 step 2 is still lost (2.999 s)."""
    from sim.training.strategies.job import JobSystem

    for at, wall, lost in ((6.0, 10.0, 0.0), (5.999, 12.999, 2.999)):
        c = TrainingConfig(stages=1, replicas=2, microbatches=1, steps=3, forward_time=3.0,
                           backward_ratio=0.0, mtbf=100.0, replace_time=1.0,
                           strategy="reconfiguration:boot=0,reconfigure=1,restart=2")
        job = JobSystem(c, Streams(0).replication(0))
        job._spot_rngs = [_At(at), _At()]
        m = job.run()
        assert m["training_time"] == pytest.approx(wall, rel=1e-12)
        assert m["lost_work"] == pytest.approx(lost, abs=1e-12)
        assert m["reconfigurations"] == 1.0
