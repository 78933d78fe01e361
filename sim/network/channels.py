"""First-in-first-out channels over the network: one transfer at a time per sender, receiver and stream.

A communication library moves the messages one process sends to one peer on
one stream one after another: NCCL runs the operations issued on one
communicator's CUDA stream in issue order, and PyTorch's ``ProcessGroupNCCL``
issues every point-to-point ``send``/``recv`` between two ranks of a group on
the one communicator (and stream) it keeps for that pair
(``ProcessGroupNCCL::pointToPoint``, keyed by ``getKeySendRecv``; batched by
``batch_isend_irecv``, on the device's communicator); Megatron-LM
(``megatron/core/pipeline_parallel/p2p_communication.py``, ``_communicate``
and ``_p2p_ops``) and DeepSpeed's pipeline engine
(``deepspeed/runtime/pipe/p2p.py``, ``send``/``recv``) post their
activations and gradients between neighbouring stages on that group, so a
stage that produces micro-batches faster than the link moves them has them
queue behind each other, each moving at the link's full share, rather than
all moving at once and arriving together.

:class:`Channels` adds that to a :class:`~sim.network.service.NetworkService`:
a transfer sent on a channel (any hashable key naming the sender, the
receiver and the stream) starts as a flow when the transfers sent before it on
the same channel have arrived; while it moves it shares every link of its
route max-min with all other flows, those of other channels included, as
every flow of the service does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

import simpy

__all__ = ["Channels"]


class _Send:
    __slots__ = ("src", "dst", "size", "event", "flow", "started")

    def __init__(self, src: Any, dst: Any, size: float, event: simpy.Event,
                 started: Callable[[], Any] | None) -> None:
        self.src, self.dst, self.size, self.event = src, dst, size, event
        self.flow: simpy.Event | None = None
        self.started = started


class Channels:
    """FIFO channels on a network service (see the module docstring).

    Parameters
    ----------
    service : NetworkService

    Attributes
    ----------
    queued : int
        Transfers that had to wait behind another on their channel.
    """

    def __init__(self, service: Any) -> None:
        self.service = service
        self.env: simpy.Environment = service.env
        self._queues: dict[Hashable, deque[_Send]] = {}
        self._of: dict[simpy.Event, tuple[Hashable, _Send]] = {}
        self.queued = 0

    def send(self, channel: Hashable, src: Any, dst: Any, size: float, *,
             started: Callable[[], Any] | None = None) -> simpy.Event:
        """Send ``size`` from ``src`` to ``dst`` on ``channel``; the event fires on arrival
        (its value the arrival time), after every transfer sent before it on the channel.
        ``started()``, if given, is called when the transfer leaves the queue and starts
        moving (now, on a free channel; it reads the clock and changes nothing here)."""
        ev = self.env.event()
        x = _Send(src, dst, size, ev, started)
        q = self._queues.get(channel)
        if q is None:
            q = self._queues[channel] = deque()
        q.append(x)
        self._of[ev] = (channel, x)
        if len(q) == 1:
            self._start(channel, x)
        else:
            self.queued += 1
        return ev

    def _start(self, channel: Hashable, x: _Send) -> None:
        f = x.flow = self.service.transfer(x.src, x.dst, x.size)
        f.callbacks.append(lambda e: self._arrived(channel, x, e))
        if x.started is not None:
            x.started()

    def _arrived(self, channel: Hashable, x: _Send, flow: simpy.Event) -> None:
        if x.flow is not flow:  # withdrawn
            return
        q = self._queues[channel]
        q.popleft()
        del self._of[x.event]
        if q:  # the next one starts as this one arrives: the channel never idles
            self._start(channel, q[0])
        else:
            del self._queues[channel]
        x.event.succeed(flow.value)

    def holds(self, ev: simpy.Event) -> bool:
        """Whether ``ev`` is a transfer of these channels that has not arrived."""
        return ev in self._of

    def cancel(self, ev: simpy.Event) -> None:
        """Withdraw the transfer of ``ev`` (moving or queued); it never fires, and the next
        transfer of its channel starts if it was moving."""
        got = self._of.pop(ev, None)
        if got is None:
            return
        channel, x = got
        q = self._queues[channel]
        head = q[0] is x
        q.remove(x)
        if head and x.flow is not None:
            f, x.flow = x.flow, None
            self.service.cancel(f)
        if not q:
            del self._queues[channel]
        elif head:
            self._start(channel, q[0])
