"""SWARM parallelism: today's training DES with a swarm schedule, rewiring around a lost peer.

Every pass is routed at its stage to a live replica (SWARM's stochastic
wiring, by the config's ``routing``: SWARM's own balancers, one a trainer at each
stage, are ``trainer-balancer``, :data:`sim.training.routing.SWARM_ROUTING`, not the
default while the swarm schedule ends each step at a barrier SWARM does not have); a lost replica's passes are re-queued after the detection timeout,
a lost backward recomputes its forwards, and an out stage is skipped, waited
for or, under a restart model, restarted from the last checkpoint: the rules
of :mod:`sim.training.flow` and :mod:`sim.training.trainer`. This strategy
names that behaviour so it can be compared with the others on the same
traces; it runs on the training DES (``engine = "des"``) and needs the swarm
schedule.

A preemption notice drains the leaving replica: from the notice on it takes
no new pass (routing avoids it) and finishes those it holds.

Reference: M. Ryabinin, T. Dettmers, M. Diskin, A. Borzunov, "SWARM
parallelism: training large models can be surprisingly
communication-efficient", ICML 2023.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import check
from .base import Strategy, register_strategy

__all__ = ["Swarm"]


@register_strategy
@dataclass(frozen=True)
class Swarm(Strategy):
    """SWARM's rewiring on the training DES (module notes); ``boot`` must stay 0 (the DES
    downloads weights for ``download_time``)."""

    name = "swarm"
    engine = "des"

    def prepare_des(self, system: Any) -> None:
        """Wire the preemption notices: ``notice`` before each preemption (the spot model's,
        as soon as it is drawn; a replayed trace's, when its worker comes up) the replica
        is retired from routing (:meth:`sim.training.flow.ReplicaFlow.retire`)."""
        c = system.config
        if c.notice <= 0:
            return
        env, flow = system.env, system.flow
        system.notices_used = 0

        def at(rep: Any, when: float) -> None:
            ev = env.timeout(max(when - c.notice - env.now, 0.0))

            def fire(_e: Any) -> None:
                if rep.up and env.now < when and flow.retire(rep):
                    system.notices_used += 1
            ev.callbacks.append(fire)

        for slot in system.spots:
            slot.on_draw.append(lambda when, rep=slot.replica: at(rep, when))
        if c.failure_trace is None or isinstance(c.failure_trace, str):
            return
        for rep, w in zip(system.flow.replicas, system.workers, strict=True):
            def check_next(_e: Any = None, rep: Any = rep, w: Any = w) -> None:
                t = w.next_own_change
                if w.own_up and env.now < t < float("inf"):
                    at(rep, t)

            def went(_comp: Any, up: bool, _now: float, check_next: Any = check_next) -> None:
                if up:  # the replay sets the next change after this callback: look a moment on
                    env.timeout(0.0).callbacks.append(check_next)
            w.on_own_change(went)
            env.timeout(0.0).callbacks.append(check_next)

    def check(self, config: Any) -> None:
        check(config.schedule == "swarm", "schedule", "swarm with --strategy swarm",
              config.schedule)
        check(self.boot == 0, "boot", "0 with swarm (a returning replica downloads its "
              "weights for the config's download time)", self.boot)
