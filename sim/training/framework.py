"""Framework pipelines: every device runs its fixed per-step program, as Megatron-LM and DeepSpeed do.

Used by :class:`sim.training.system.TrainingSystem` when a config asks for
blocking point-to-point (``p2p="blocking"``, DeepSpeed's pipeline engine) or
the interleaved schedule (``schedule="interleaved"``, Megatron-LM's virtual
stages). Each pipeline device (one replica of one stage: a TP group acting as
one) runs, in every step, the program :func:`sim.training.schedules.device_program`
gives it:

* compute passes (forward or backward of one micro-batch on one of its model
  chunks) take the config's time for that replica and chunk;
* with ``p2p="blocking"`` a transfer is an explicit send on one device paired
  with a receive on its neighbour: it starts when both have reached it and
  takes the hop's transfer time on both (NCCL send/recv of messages above its
  eager size wait for the peer; DeepSpeed's ``SendActivation`` and
  ``RecvActivation`` "must be paired ... to avoid deadlock");
* with ``p2p="batched"`` (Megatron-LM's non-interleaved 1F1B,
  :func:`sim.training.schedules.megatron_program`) a call may post a send and
  a receive together (``send_forward_recv_backward``,
  ``send_backward_recv_forward``): each of its transfers starts when the peer
  has posted the call holding its other end (a pair or a lone operation) and
  the two run at once (over a network, two flows); the device goes on when
  both have ended;
* with ``p2p="overlap"`` a pass sends its output as it ends and goes on;
  the output reaches the neighbour after the hop's transfer time, and the
  neighbour's pass that needs it waits for it.

A pass of stage 0's first chunk finishing a micro-batch's backward delivers it
to the trainer; the step then ends with the gradient all-reduce and the
optimizer step (:class:`sim.training.trainer.StepTrainer`).

Failures: a framework job does not fail over or skip. Any device that goes
down loses the step in progress (the trainer restarts from the last
checkpoint after ``restart_cost``, when every device is back and has
downloaded its weights), so configs with failures must give a restart model
(checked by :class:`~sim.training.config.TrainingConfig`).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import simpy

from ..timeline import NULL
from .config import TrainingConfig, replica_name
from .flow import LOST_CAUSES, DownClock
from .replica import Microbatch, Refetch, WorkerState
from .schedules import device_program, p2p_program

__all__ = ["Device", "FrameworkFlow"]


class Device(WorkerState):
    """One pipeline device: its failure state (the interface of :class:`~sim.training.replica.Replica`)
    and its accounting."""

    __slots__ = ("system", "env", "stage", "index", "speed", "name", "fm_up", "spot_up", "live",
                 "loaded", "epoch", "busy_time", "passes", "in_flight", "peak_in_flight",
                 "proc", "_download")

    def __init__(self, system: Any, stage: int, index: int, speed: float, name: str) -> None:
        self.system = system
        self.env: simpy.Environment = system.env
        self.stage, self.index, self.speed, self.name = stage, index, speed, name
        self.fm_up = self.spot_up = True
        self.live = False
        self.loaded = True
        self.epoch = 0
        self.busy_time = 0.0
        self.passes = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.proc: simpy.Process | None = None
        self._download: simpy.Process | None = None

    def went_down(self, cause: Any) -> None:
        """The device went down: its weights are gone, its download is cut, the step lost."""
        was_live = self.live
        self.live = False
        self.loaded = False
        self.epoch += 1
        self.in_flight = 0
        dl = self._download
        if dl is not None and dl.is_alive:
            dl.interrupt(cause)
        self.system.replica_down(self, was_live)

    def came_up(self) -> None:
        """The device came back: download the stage's weights."""
        self._download = self.env.process(self._fetch())

    def cut_download(self, cause: Refetch) -> None:
        """Cut the weight download in progress, if any (:meth:`_fetch` asks again)."""
        dl = self._download
        if dl is not None and dl.is_alive and self.up:
            dl.interrupt(cause)

    def _fetch(self):
        """Download the stage's weights, then be live (a failure during it loses the time);
        none while the flow's ``skip_download`` says its DiLoCo group's model fetch brings
        them (asked again when :meth:`cut_download` cuts the download)."""
        env, sysm = self.env, self.system
        while True:
            skip = sysm.skip_download
            if skip is not None and skip(self):
                if not self.up:  # it went down before this started: nothing to load
                    return
                break
            t0 = env.now
            try:
                yield env.timeout(sysm.download_time)
            except simpy.Interrupt as i:
                sysm.lost["download"] += env.now - t0
                sysm.rec.download(self, t0, env.now, cut=True)
                if isinstance(i.cause, Refetch) and self.up:  # not a failure: ask again
                    continue
                return
            sysm.lost["download"] += sysm.download_time
            sysm.rec.download(self, t0, env.now)
            break
        self.loaded = True
        self._download = None
        sysm.replica_live(self)


class FrameworkFlow:
    """The devices of every pipeline and their programs (the ``flow`` a StepTrainer drives)."""

    def __init__(self, config: TrainingConfig, env: simpy.Environment, streams: Any,
                 schedule: Any, speeds: tuple[tuple[float, ...], ...], *, traffic: Any,
                 recorder: Any = None) -> None:
        c = self.config = config
        self.env = env
        self.rec = recorder if recorder is not None else NULL  # the timeline (sim.timeline)
        self.trainer: Any = None
        self.track = False
        # every transfer is the traffic adapter's (sim.training.traffic): a hop's time, or flows
        self.traffic = traffic
        self.schedule = schedule
        self.L = L = c.stages
        self.v = c.virtual_stages
        self.r = c.replicas[0]  # type: ignore[index]
        self.blocking, self.batched = p2p_program(c.p2p)
        self.download_time = traffic.download_time
        self.lost = dict.fromkeys(LOST_CAUSES, 0.0)
        self.lost_passes = self.reroutes = self.recomputes = self.skips = self.waits = 0
        self.stages: list[list[Device]] = [
            [Device(self, j, i, speeds[j][i], replica_name(j, i)) for i in range(len(speeds[j]))]
            for j in range(L)]
        self.replicas = [d for st in self.stages for d in st]
        self.n_out = len(self.replicas)
        # per device: (forward, backward) time of one chunk pass; per hop and pipeline: transfers
        v = self.v
        rt = c.replica_times
        self.work = [[((rt[j][i][0] if rt else c.forward_time[j]) / speeds[j][i] / v,  # type: ignore[index]
                       (rt[j][i][1] if rt else c.backward_time[j]) / speeds[j][i] / v)  # type: ignore[index]
                      for i in range(len(speeds[j]))] for j in range(L)]
        # per device: the all-gather before each gradient receive (DeepSpeed 0.3.13), an
        # intra-node collective: not scaled by the device's speed
        self.gather = c.recv_gather_times
        traffic.attach(self)
        self._mbs: list[Microbatch] = []
        self._procs: list[simpy.Process] = []
        #: asked as a device comes back (DiLoCo's groups): True when its group will fetch the
        #: model across the WAN tier, which is then its only download (None: always download)
        self.skip_download: Any = None
        self._channels: dict[tuple, deque] = {}
        self._arrivals: dict[tuple, simpy.Event] = {}
        self._cause: Any = None
        self.down = DownClock()  # worker-time of the devices not live (bubble_fraction)

    # -- the trainer's interface --------------------------------------------------
    def start(self) -> None:
        for d in self.replicas:
            d.loaded = d.live = d.up
        out = [d for d in self.replicas if not d.live]
        self.n_out = len(out)
        self.down.change(self.env.now, self.n_out, out)

    @property
    def passes(self) -> int:
        return sum(d.passes for d in self.replicas)

    @property
    def live(self) -> list[list[Device]]:
        return [[d for d in st if d.live] for st in self.stages]

    def replica_live(self, dev: Device) -> None:
        dev.live = True
        self.down.change(self.env.now, -1, (dev,))
        self.n_out -= 1
        if self.n_out == 0:
            self.trainer.all_live()

    def cut_downloads(self, cause: Any) -> None:
        """Cut the weight downloads in progress (``cause``): each device asks
        :attr:`skip_download` again (DiLoCo: its group will fetch the model)."""
        for d in self.replicas:
            d.cut_download(cause)

    def replica_down(self, dev: Device, was_live: bool) -> None:
        if was_live:
            self.down.change(self.env.now, 1, (dev,))
            self.n_out += 1
        self.trainer.stage_lost(dev.stage)

    def begin_step(self) -> None:
        """A step starts (its programs are launched when its micro-batches arrive)."""

    def arrive_fwd(self, mb: Microbatch, j: int) -> None:
        """Collect the step's micro-batches; the last one launches every device's program."""
        self._mbs.append(mb)
        if len(self._mbs) == self.config.microbatches:
            mbs, self._mbs = self._mbs, []
            self._launch(mbs)

    def release(self, mb: Microbatch) -> None:  # pragma: no cover - no drops without skips
        pass

    def abort(self, cause: Any) -> None:
        """The step is lost: stop every program, forget pending transfers."""
        self._cause = cause
        procs, self._procs = self._procs, []
        for p in procs:
            if p.is_alive:
                p.interrupt(cause)
        self._channels.clear()
        self._arrivals.clear()
        self._mbs = []
        for d in self.replicas:
            d.in_flight = 0

    # -- programs -------------------------------------------------------------------
    def _launch(self, mbs: list[Microbatch]) -> None:
        if self.n_out:
            dead = next(d for d in self.replicas if not d.live)
            self.trainer.stage_lost(dead.stage)
            return
        r = self.r
        self._channels.clear()
        self._arrivals.clear()
        self.traffic.begin_step()
        self.traffic.launch([k for k in range(r) if mbs[k::r]])
        for k in range(r):
            mine = mbs[k::r]
            for mb in mine:
                mb.pipe = k
            if not mine:
                continue
            for j in range(self.L):
                prog = device_program(self.schedule.name, self.L, len(mine), j, v=self.v,
                                      blocking=self.blocking, batched=self.batched,
                                      recv_gather=self.gather is not None)
                dev = self.stages[j][k]
                self._procs.append(self.env.process(self._run(dev, prog, mine, k)))

    def _run(self, dev: Device, prog: list[tuple], mbs: list[Microbatch], k: int):
        """Run ``prog`` on ``dev`` for pipeline ``k``'s micro-batches ``mbs``."""
        env, L, v = self.env, self.L, self.v
        S = L * v
        j = dev.stage
        fw, bw = self.work[j][k]
        overlap = self.traffic.overlap
        try:
            for op in prog:
                kind = op[0]
                if kind == "F" or kind == "B":
                    c, i = op[1], op[2]
                    s = c * L + j
                    back = kind == "B"
                    if not self.blocking:  # wait for the input to arrive
                        key = ("g", s, i, k) if back else ("a", s, i, k)
                        if (back and s < S - 1) or (not back and s > 0):
                            ev = self._arrival(key)
                            if not ev.processed:
                                yield ev
                    t0 = env.now
                    work = bw if back else fw
                    if back and overlap:
                        self.traffic.backward_started(dev, work)
                    try:
                        yield env.timeout(work)
                    except simpy.Interrupt:
                        dev.busy_time += env.now - t0
                        self.lost["lost_pass"] += env.now - t0
                        self.lost_passes += 1
                        self.rec.device_pass(dev, back, s, c, mbs[i], t0, env.now, lost=True)
                        return
                    dev.busy_time += work
                    if self.rec.on:
                        self.rec.device_pass(dev, back, s, c, mbs[i], t0, env.now)
                    dev.passes += 1
                    if self.track:
                        self.trainer.participated(j, dev)
                    if back:
                        dev.in_flight -= 1
                        if s == 0:
                            self.trainer.finished(mbs[i])
                        elif not self.blocking:
                            self._send(("g", s - 1, i, k), s - 1, k, True)
                    else:
                        dev.in_flight += 1
                        if dev.in_flight > dev.peak_in_flight:
                            dev.peak_in_flight = dev.in_flight
                        if s < S - 1 and not self.blocking:
                            self._send(("a", s + 1, i, k), s, k, False)
                elif kind == "G":  # DeepSpeed 0.3.13: all-gather the output before the receive
                    g = self.gather[j][k]  # type: ignore[index]
                    t0 = env.now
                    try:
                        yield env.timeout(g)
                    except simpy.Interrupt:
                        dev.busy_time += env.now - t0
                        self.lost["lost_pass"] += env.now - t0
                        self.rec.device_gather(dev, j, mbs[op[2]], t0, env.now, lost=True)
                        return
                    dev.busy_time += g
                    if self.rec.on:
                        self.rec.device_gather(dev, j, mbs[op[2]], t0, env.now)
                elif kind == "sendrecv":  # Megatron-LM's batched pair: both posted, both waited
                    a = self._rendezvous((op[1], op[2], op[3], k), "send", op[2], k, op[1] == "g")
                    b = self._rendezvous((op[4], op[5], op[6], k), "recv", op[5], k, op[4] == "g")
                    yield env.all_of([a, b])
                else:  # blocking "send"/"recv" of activation "a" or gradient "g": ("send", tag, s, i)
                    tag, hop, i = op[1], op[2], op[3]  # hop h: between model stages h, h + 1
                    yield self._rendezvous((tag, hop, i, k), kind, hop, k, tag == "g")
        except simpy.Interrupt:
            return
        # the device's program is over (its last pass, and with blocking transfers the final
        # send of a gradient after it): without a barrier its stage's collectives may start
        self.traffic.program_done(dev)

    def _arrival(self, key: tuple) -> simpy.Event:
        ev = self._arrivals.get(key)
        if ev is None:
            ev = self._arrivals[key] = self.env.event()
        return ev

    def _send(self, key: tuple, s: int, k: int, grad: bool) -> None:
        """Hop ``s`` of pipeline ``k`` overlapped with compute: its arrival fires ``key``'s event."""
        ev = self._arrival(key)
        self.traffic.send(s, k, grad, lambda: ev.succeed() if not ev.triggered else None,
                          i=key[2])

    def _rendezvous(self, key: tuple, role: str, s: int, k: int, grad: bool) -> simpy.Event:
        """The event ending a paired send/receive of hop ``s`` of pipeline ``k``: the second
        party starts the transfer (:meth:`sim.training.traffic.Traffic.transfer`)."""
        q = self._channels.get(key)
        if q is None:
            q = self._channels[key] = deque()
        if q and q[0][0] != role:
            _role, ev = q.popleft()
            t = self.traffic.transfer(s, k, grad, i=key[2])
            t.callbacks.append(lambda _e: ev.succeed() if not ev.triggered else None)
            return t
        ev = self.env.event()
        q.append((role, ev))
        return ev
