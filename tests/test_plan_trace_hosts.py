"""A trace named by a plan's hosts is replayed by name (usertrial16).

docs/traces.md says a trace whose instances are named as the run's workers or their hosts
("a plan's nodes") is replayed by name, a worker the trace does not name staying up. A plan's
``host`` names were never among the names: such a trace was replayed slot by slot (the
preemptions on whichever workers the slots fell to) and, when a host was never preempted (a
console's export lists only instances with events), refused for having fewer slots than
workers. The run on a trace named by hosts must be the run on the same trace named by the
workers those hosts hold.
"""

from __future__ import annotations

import json

from sim.cli import main

REP = {"gpu": "GH-96", "tp": 1, "gpus_per_node": 4, "zone": "us-central1-a"}


def _plan(tmp_path, hosts):
    stages = [{"first_layer": 0, "last_layer": 12,
               "replicas": [dict(REP, host=hosts[0]), dict(REP, host=hosts[1])]},
              {"first_layer": 13, "last_layer": 25,
               "replicas": [dict(REP, host=hosts[2]), dict(REP, host=hosts[3])]}]
    p = tmp_path / "plan.json"
    p.write_text(json.dumps({"model": "OPT-350", "microbatch_size": 2, "global_batch_size": 8,
                             "framework": "deepspeed", "stages": stages}))
    return str(p)


def _run(capsys, plan, trace, strategy):
    code = main(["train", "--plan", plan, "--model", "OPT-350", "--failure-trace", str(trace),
                 "--strategy", strategy, "--steps", "40", "--replications", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    return out


def test_host_named_trace_is_the_worker_named_one(tmp_path, capsys):
    plan = _plan(tmp_path, ["east-0", "east-1", "east-2", "east-3"])
    # east-0 is never preempted: it is not in the log
    by_host = tmp_path / "hosts.csv"
    by_host.write_text("worker,start,end\neast-3,1,40\neast-1,5,30\neast-2,50,60\n")
    by_worker = tmp_path / "workers.csv"
    by_worker.write_text("worker,start,end\ns1r1,1,40\ns0r1,5,30\ns1r0,50,60\n")
    for strategy in ("checkpoint-restart", "redundancy:mode=lazy"):
        a = _run(capsys, plan, by_host, strategy)
        b = _run(capsys, plan, by_worker, strategy)
        assert a["trace_instances"] == {"s0r0": None, "s0r1": "east-1", "s1r0": "east-2",
                                        "s1r1": "east-3"}
        for k in ("samples_per_second", "steps_done", "lost_time", "worker_availability",
                  "strategy_counts", "cost"):
            assert a[k] == b[k], k
        assert a["strategy_counts"]["losses"] >= 1 and a["lost_time"]


def test_host_order_not_first_event_order(tmp_path, capsys):
    """Hosts listed in another order than the log's first events: each worker replays its
    host's instance, not the slot its first event gave it."""
    plan = _plan(tmp_path, ["b", "d", "a", "c"])
    log = tmp_path / "log.csv"
    log.write_text("worker,start,end\na,1,40\nb,5,30\nc,50,60\nd,70,80\n")
    out = _run(capsys, plan, log, "checkpoint-restart")
    assert out["trace_instances"] == {"s0r0": "b", "s0r1": "d", "s1r0": "a", "s1r1": "c"}
