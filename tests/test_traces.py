"""Readers, statistics, mapping policies, fits and the generator of sim.traces."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import simpy

from sim.errors import ConfigError
from sim.failures import FailureModel
from sim.rng import Streams
from sim.traces import (
    SHIPPED,
    TraceReplay,
    block_bootstrap,
    detect_format,
    fit_durations,
    fit_model,
    fit_sizes,
    load_trace,
    read_trace_file,
    shipped_path,
    slot_patterns,
    trace_stats,
)

# --------------------------------------------------------------------------- small files by hand

SMALL = {
    "bamboo": ("b.csv", "0,4\n10,4\n10,2\n30,2\n30,4\n40,4\n"),
    "gcloud": ("g.txt", "2021-12-11, 23:59:00, 5\n2021-12-12, 00:01:00, 3\n"
                        "2021-12-12, 00:02:00, 3\n"),
    "oobleck": ("o.csv", "0,add,a\n0,add,b\n0,add,c\n1000,remove,a\n1000,remove,b\n"
                         "2000,add,d\n3000,remove,c\n4000,add,e\n"),
    "skypilot": ("s.json", '{"metadata": {"gap_seconds": 60}, "data": [2, 2, 1, 2]}'),
    "simgrid": ("p.txt", "0 1\n10 0\n15 1\nLOOPAFTER 5\n"),
    "dtsim": ("d.csv", "worker,start,end\nw0,0,5\nw1,2,4\nw1,6,8\n"),
}
# Worked out by hand: points after merging, span end, capacity, integral, events (time: size).
EXPECT = {
    "bamboo": ([0, 10, 30], [4, 2, 4], 40, 4, 120, {10: 2}),
    "gcloud": ([0, 120], [5, 3], 180, 5, 780, {120: 2}),
    "oobleck": ([0, 1, 2, 3, 4], [3, 1, 2, 1, 2], 4, 3, 7, {1: 2, 3: 1}),
    "skypilot": ([0, 120, 180], [2, 1, 2], 180, 2, 300, {120: 1}),
    "simgrid": ([0, 10, 15], [1, 0, 1], 20, 1, 15, {10: 1}),
    "dtsim": ([0, 2, 4, 5, 6, 8], [1, 0, 1, 2, 1, 2], 8, 2, 7, {2: 1, 6: 1}),
}


def _write(tmp_path: Path, fmt: str) -> Path:
    name, text = SMALL[fmt]
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("fmt", sorted(SMALL))
def test_small_file_round_trip(tmp_path, fmt):
    """Each reader gives the hand-worked step function and statistics of a small file."""
    p = _write(tmp_path, fmt)
    assert detect_format(p.read_text()) == fmt
    tr = read_trace_file(p)
    times, counts, end, cap, area, events = EXPECT[fmt]
    assert tr.format == fmt
    assert tr.times.tolist() == times and tr.counts.tolist() == counts
    assert tr.end == end and tr.capacity == cap
    s = trace_stats(tr)
    assert s["duration"] == end and s["nodes"] == cap
    assert s["mean_available"] == pytest.approx(area / end, rel=1e-15)
    assert s["availability"] == pytest.approx(area / (end * cap), rel=1e-15)
    assert s["preemption_events"] == len(events)
    assert s["preempted_nodes"] == sum(events.values())
    assert s["batch_fraction"] == sum(v >= 2 for v in events.values()) / len(events)
    assert s["preemptions_per_hour"] == pytest.approx(len(events) * 3600 / end)


def test_bamboo_hours_and_dips(tmp_path):
    """A Bamboo file in hours: a fall and a rise at one timestamp is one event; the unit is needed."""
    p = tmp_path / "h.csv"
    p.write_text("0.0,3\n0.5,3\n0.5,2\n0.5,2\n0.5,3\n1.0,3\n1.0,1\n2.0,1\n")
    with pytest.raises(ConfigError) as e:
        read_trace_file(p)
    assert str(e.value) == (f"'time_unit' must be given (s or h) for a Bamboo trace with "
                            f"fractional timestamps: '{p}'")
    s = trace_stats(read_trace_file(p, time_unit="h"))
    assert s["duration"] == 7200 and s["nodes"] == 3
    assert s["mean_available"] == pytest.approx(2.0) and s["availability"] == pytest.approx(2 / 3)
    assert s["event_sizes"] == {1: 1, 2: 1} and s["batch_fraction"] == 0.5


def test_shipped_file_by_path_takes_its_unit(tmp_path):
    """A copy of the hours-based shipped file read by path is recognised by content."""
    p = tmp_path / "copy.csv"
    p.write_bytes(shipped_path("aws-p2-3day").read_bytes())
    assert read_trace_file(p).end == load_trace("aws-p2-3day").end


BAD = [
    ("bin", b"\x00\x01\x02", "'trace' must be a text file: '{p} (binary content, NUL byte at offset 0)'"),
    ("utf", b"0,1\n\xff\xfe,2\n", "'trace' must be a UTF-8 text file: '{p}:2 (byte 0xff at offset 4)'"),
    ("line", b"0,1\n5,x\n", "'trace' must be a Bamboo count trace of t,count lines "
                            "(count an integer >= 0): '{p}:2 (5,x)'"),
    ("order", b"0,1\n5,2\n3,2\n", "'trace' must be a trace with non-decreasing times: '{p}:3 (3 after 5)'"),
    ("unknown", b"hello world foo\n", "'trace' must be a trace in a known format (bamboo, gcloud, "
                                      "oobleck, skypilot, simgrid, dtsim; a CSV event log of your own: "
                                      "--trace-format events:worker=COL,time=COL,event=COL,"
                                      "down=WORD,up=WORD): '{p}:1 (hello world foo)'"),
    ("remove", b"0,add,a\n5,remove,b\n", "'trace' must be an Oobleck trace that removes only nodes "
                                         "that are up: '{p}:2 (b)'"),
    ("twice", b"0,add,a\n5,remove,a\n6,add,a\n", "'trace' must be an Oobleck trace that adds each "
                                                 "node ID once: '{p}:3 (a)'"),
    ("json", b'{"metadata": {"gap_seconds": 0}, "data": [1, 2]}',
     "'trace' must be a SkyPilot trace {\"metadata\": {\"gap_seconds\": g > 0}, \"data\": "
     "[counts >= 0]}: '{p}:1 (gap_seconds 0)'"),
    ("span", b"5,3\n5,2\n", "'trace' must be a trace spanning a positive time: "
                            "'{p} (first and last timestamps 5, 5)'"),
    ("empty", b"\n\n", "'trace' must be a non-empty trace file: '{p} (no data lines)'"),
]


@pytest.mark.parametrize("name,data,msg", BAD, ids=[b[0] for b in BAD])
def test_malformed_files_are_one_line(tmp_path, name, data, msg):
    """A malformed file is one ConfigError naming the file, the line and the rule."""
    p = tmp_path / f"{name}.trace"
    p.write_bytes(data)
    with pytest.raises(ConfigError) as e:
        read_trace_file(p)
    assert str(e.value) == msg.replace("{p}", str(p))
    assert "\n" not in str(e.value)


# Other scripts' digits ('\u0663' is 3 to \d and to float()): no trace means them; each is
# refused as a malformed line, named by path:line, on both the plain and the line reader.
UNICODE_DIGITS = [
    ("bamboo", "0,4\n10,4\n10,\u0663\n20,3\n", "s",
     "'trace' must be a Bamboo count trace of t,count lines (count an integer >= 0): "
     "'{p}:3 (10,\u0663)'"),
    ("gcloud", "2021-12-11, 00:00:00, 4\n2021-12-1\u0661, 00:10:00, 3\n", None,
     "'trace' must be a Google Cloud trace of 'YYYY-MM-DD, HH:MM:SS, count' lines: "
     "'{p}:2 (2021-12-1\u0661, 00:10:00, 3)'"),
    ("oobleck", "0,add,a\n\u0662000,remove,a\n", None,
     "'trace' must be an Oobleck event trace of time_ms,add|remove,nodeID lines: "
     "'{p}:2 (\u0662000,remove,a)'"),
    ("simgrid", "0 1\n1\u0660 0\n20 1\n", "s",
     "'trace' must be a SimGrid state profile of 'date value' lines: '{p}:2 (1\u0660 0)'"),
    ("dtsim", "worker,start,end\na,1,\u0663\n", "s",
     "'trace' must be a CSV file of numeric start,end: \"{p}:2 ('1', '\u0663')\""),
]


@pytest.mark.parametrize("fmt,text,unit,msg", UNICODE_DIGITS, ids=[c[0] for c in UNICODE_DIGITS])
@pytest.mark.parametrize("how", ["auto", "named"])
def test_other_scripts_digits_are_refused(tmp_path, fmt, text, unit, msg, how):
    p = tmp_path / f"{fmt}.trace"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        read_trace_file(p, format=fmt if how == "named" else "auto", time_unit=unit)
    assert str(e.value) == msg.replace("{p}", str(p))


def test_ascii_digits_read_as_before(tmp_path):
    """The same files in ASCII digits read (a non-ASCII node name keeps the line reader)."""
    p = tmp_path / "b.csv"
    p.write_text("0,4\n10,4\n10,3\n20,3\n")
    assert read_trace_file(p, time_unit="s").counts.tolist() == [4, 3]
    p.write_text("0,add,\u00e9\n2000,remove,\u00e9\n")
    tr = read_trace_file(p)
    assert tr.counts.tolist() == [1, 0] and tr.times.tolist() == [0.0, 2.0]


def test_time_unit_refused_where_the_file_tells(tmp_path):
    """--time-unit on a format that gives its own unit is an error, not ignored."""
    p = _write(tmp_path, "oobleck")
    with pytest.raises(ConfigError, match="'time_unit' must be unset for a oobleck trace"):
        read_trace_file(p, time_unit="s")


# --------------------------------------------------------------------------- shipped traces


def _independent_counts(name: str) -> tuple[list[float], list[int], int | None]:
    """Parse a shipped file with plain Python, separately from the readers: (times s, counts, ids)."""
    meta = SHIPPED[name]
    lines = [ln for ln in shipped_path(name).read_text().splitlines() if ln.strip()]
    if meta.format == "bamboo":
        scale = 3600.0 if meta.time_unit == "h" else 1.0
        rows = [ln.split(",") for ln in lines]
        return [float(t) * scale for t, _ in rows], [int(c) for _, c in rows], None
    if meta.format == "gcloud":
        ts, cs = [], []
        for ln in lines:
            d, t, c = (x.strip() for x in ln.split(","))
            ts.append(datetime.fromisoformat(f"{d}T{t}").timestamp())
            cs.append(int(c))
        return [t - ts[0] for t in ts], cs, None
    # Oobleck: one point per timestamp per kind of change, removals first.
    by_t: dict[int, list[str]] = {}
    ids = set()
    for ln in lines:
        t, kind, node = ln.split(",")
        by_t.setdefault(int(t), []).append(kind)
        ids.add(node)
    ts, cs, n = [], [], 0
    for t, kinds in by_t.items():
        for kind, d in (("remove", -1), ("add", 1)):
            k = kinds.count(kind)
            if k:
                n += d * k
                ts.append(t / 1000.0)
                cs.append(n)
    return ts, cs, len(ids)


def _independent_stats(name: str) -> dict:
    ts, cs, ids = _independent_counts(name)
    end = ts[-1] - ts[0]
    area = sum((ts[i + 1] - ts[i]) * cs[i] for i in range(len(ts) - 1))
    lost: dict[float, int] = {}
    for i in range(1, len(cs)):
        if cs[i] < cs[i - 1]:
            lost[ts[i]] = lost.get(ts[i], 0) + cs[i - 1] - cs[i]
    cap = max(cs)
    return {"nodes": cap, "duration": end, "mean_available": area / end,
            "availability": area / end / cap, "preemption_events": len(lost),
            "preempted_nodes": sum(lost.values()),
            "batch_fraction": sum(v >= 2 for v in lost.values()) / len(lost),
            "preemptions_per_hour": len(lost) / (end / 3600), "node_ids": ids,
            "event_sizes": {k: list(lost.values()).count(k) for k in sorted(set(lost.values()))}}


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_statistics_independently(name):
    """Every shipped trace's statistics equal an independent plain-Python computation."""
    mine = trace_stats(load_trace(name))
    ref = _independent_stats(name)
    for k, v in ref.items():
        if isinstance(v, float):
            assert mine[k] == pytest.approx(v, rel=1e-12), k
        else:
            assert mine[k] == v, k


def test_p3_matches_the_readme():
    """aws-p3: 177 node IDs, 167 removals on 79 timestamps, 40 of them batches, capacity 32."""
    s = trace_stats(load_trace("aws-p3"))
    assert (s["node_ids"], s["preempted_nodes"], s["preemption_events"], s["nodes"]) == (177, 167, 79, 32)
    assert round(s["batch_fraction"] * 79) == 40


# --------------------------------------------------------------------------- replay


def _replay_availability(replay: TraceReplay, workers: int, horizon: float, seed: int = 1,
                         domain_of=None) -> float:
    env = simpy.Environment()
    streams = Streams(seed).replication(0)
    fm = FailureModel(env, streams)
    ivs = replay.worker_intervals(workers, streams=streams, domain_of=domain_of)
    ws = [fm.add_worker(f"w{i}", trace=ivs[i]) for i in range(workers)]
    fm.start()
    env.run(until=horizon)
    return float(np.mean([w.own_availability(horizon) for w in ws]))


@pytest.mark.parametrize("name", list(SHIPPED))
@pytest.mark.parametrize("policy", ["recent", "random", "domain"])
def test_replay_availability_is_the_traces(name, policy):
    """Replaying every slot over the whole trace gives exactly the trace's availability."""
    r = TraceReplay(name, policy=policy)
    a = _replay_availability(r, r.slots, r.duration, domain_of=[i % 3 for i in range(r.slots)])
    assert a == pytest.approx(trace_stats(r.load())["availability"], abs=1e-12)


def test_replay_loop_speedup_tile_window():
    """Looping, speed-up and tiling keep the availability over whole periods; a window its own."""
    r0 = TraceReplay("aws-g4dn-24h")
    tr = r0.load()
    a = trace_stats(tr)["availability"]
    C, P = tr.capacity, tr.end
    loop = TraceReplay("aws-g4dn-24h", speedup=60.0, loop=True, start=1000.0)
    assert _replay_availability(loop, C, 3 * P / 60.0) == pytest.approx(a, abs=1e-12)
    tile = TraceReplay("aws-g4dn-24h", policy="random+tile")
    assert _replay_availability(tile, 3 * C, P) == pytest.approx(a, abs=1e-12)
    start = 30000.0
    win = TraceReplay("aws-g4dn-24h", start=start)
    grid = np.linspace(start, P, 200_001)
    ref = np.trapezoid(tr.count_at(grid).astype(float), grid) / ((P - start) * C)
    assert _replay_availability(win, C, win.duration) == pytest.approx(ref, abs=1e-3)
    assert win.duration == P - start


def test_replay_refusals():
    """More workers than slots need +tile; a horizon past the end needs looping."""
    r = TraceReplay("aws-p3")
    with pytest.raises(ConfigError) as e:
        r.check_workers(33)
    assert str(e.value) == "'workers' must be at most the trace's 32 worker slots (or a +tile policy): 33"
    with pytest.raises(ConfigError) as e:
        r.check_horizon(50_000.0)
    assert str(e.value) == ("'horizon' must be at most the trace's 40920 simulated time units "
                            "(or --trace-loop): 50000.0")
    with pytest.raises(ConfigError, match="'trace_policy' must be one of recent, random, domain"):
        TraceReplay("aws-p3", policy="newest")
    with pytest.raises(ConfigError, match="'trace_loop' must be set with resample offset"):
        TraceReplay("aws-p3", resample="offset")
    with pytest.raises(ConfigError, match="'trace' must be a readable file or a shipped trace name"):
        TraceReplay("no-such-trace")


def test_policies_pick_the_documented_slots(tmp_path):
    """recent takes the newest slots; domain empties a whole domain; event traces keep identity."""
    p = tmp_path / "c.csv"
    p.write_text("0,4\n10,4\n10,2\n20,2\n")
    tr = read_trace_file(p)
    recent = slot_patterns(tr, policy="recent")
    assert [bool(x) for x in recent] == [False, False, True, True]
    dom = slot_patterns(tr, policy="domain", domain_of=[0, 1, 0, 1])
    assert [bool(x) for x in dom] == [True, False, True, False]
    ev = slot_patterns(read_trace_file(_write(tmp_path, "oobleck")), policy="recent")
    assert ev == [((1.0, 2.0),), ((1.0, 4.0),), ((3.0, 4.0),)]


def test_random_policy_is_uniform_given_the_count(tmp_path):
    """Under random, each of 4 slots is down a quarter of the time when one of 4 is down."""
    p = tmp_path / "c.csv"
    p.write_text("0,4\n" + "".join(f"{t},4\n{t},3\n{t + 1},3\n{t + 1},4\n" for t in range(2, 4002, 2)))
    tr = read_trace_file(p)
    down = np.zeros(4)
    pats = slot_patterns(tr, policy="random", rng=np.random.default_rng(3))
    for i, pat in enumerate(pats):
        down[i] = sum(e - s for s, e in pat)
    frac = down / down.sum()  # 2000 outages: binomial sd sqrt(.25 * .75 / 2000) ~ 0.0097
    assert np.all(np.abs(frac - 0.25) < 4 * 0.0097)
    rec = slot_patterns(tr, policy="recent")
    assert [len(x) for x in rec] == [0, 0, 0, 2000]  # the wrong (deterministic) rule is lopsided


def test_resampling():
    """A block as long as the trace reproduces it; offsets differ across replications."""
    tr = load_trace("aws-p3")
    same = block_bootstrap(tr, tr.end, rng=np.random.default_rng(0))
    assert same.times.tolist() == tr.times.tolist() and same.counts.tolist() == tr.counts.tolist()
    boot = block_bootstrap(tr, 3600.0, rng=np.random.default_rng(0))
    assert boot.end == tr.end and boot.capacity <= tr.capacity
    r = TraceReplay("aws-p3", loop=True, resample="offset")
    a = [next(iter(r.worker_intervals(32, streams=Streams(5).replication(k))[31]), None)
         for k in range(2)]
    assert a[0] != a[1]


# --------------------------------------------------------------------------- fits and generator


def test_fit_durations_recovers_a_weibull():
    """Censored MLE recovers a Weibull shape and picks it by AIC; exponential data keep k ~ 1."""
    rng = np.random.default_rng(7)
    x = 100 * rng.weibull(0.6, 3000)
    cut = 400.0
    f = fit_durations(np.minimum(x, cut)[x < cut], np.full(int((x >= cut).sum()), cut))
    w = f["laws"]["weibull"]
    assert f["best"] == "weibull" and abs(w["shape"] - 0.6) < 4 * 0.6 / math.sqrt(3000) * 1.2
    assert f["laws"]["exponential"]["aic"] > w["aic"] + 100
    e = fit_durations(rng.exponential(50.0, 3000))
    assert abs(e["laws"]["weibull"]["shape"] - 1.0) < 0.06
    assert e["laws"]["exponential"]["mean"] == pytest.approx(50.0, rel=4 / math.sqrt(3000))


def test_fit_sizes_geometric_mle():
    """The zero-truncated geometric's MLE is one over the mean size."""
    f = fit_sizes(np.array([1, 1, 2, 4]))
    assert f["geometric_p"] == 0.5 and f["batch_fraction"] == 0.5
    assert f["geometric_loglik"] == pytest.approx(4 * math.log(0.5) + 4 * math.log(0.5))


# aws-g4dn-24h (the cheapest; the burst-free model fails there too) in default, the others slow
@pytest.mark.parametrize("name", [pytest.param("aws-p3", marks=pytest.mark.slow),
                                  pytest.param("gcp-a100", marks=pytest.mark.slow),
                                  pytest.param("aws-p2-3day", marks=pytest.mark.slow),
                                  "aws-g4dn-24h"])
def test_generator_matches_its_source(name):
    """Generated traces match the source's availability, event rate and batch fraction.

    Tolerances: availability 0.03 (absolute), event rate 10 % (relative), batch
    fraction 0.04 (absolute), each plus 4 standard errors over 16 generated
    traces of 10 spans; the burst-free model at the same availability fails.
    """
    tr = load_trace(name)
    src = trace_stats(tr)
    model = fit_model(tr)
    rng = np.random.default_rng(11)
    keys = ("availability", "preemptions_per_hour", "batch_fraction")  # as measured below
    tol = {"availability": 0.03, "preemptions_per_hour": 0.10 * src["preemptions_per_hour"],
           "batch_fraction": 0.04}
    def measure(g):  # availability over the model's capacity, not the generated maximum
        st = trace_stats(g)
        return [st["mean_available"] / model.capacity, st["preemptions_per_hour"],
                st["batch_fraction"]]

    for m, want in ((model, True), (model.with_independent_outages(), False)):
        rows = np.array([measure(m.generate(10 * tr.end, rng=rng)) for _ in range(16)])
        mean, se = rows.mean(0), rows.std(0, ddof=1) / 4.0
        ok = [abs(mean[i] - src[k]) <= tol[k] + 4 * se[i] for i, k in enumerate(keys)]
        if want:
            assert all(ok), (mean, se, [src[k] for k in keys])
        else:
            assert not ok[1] and not ok[2]  # event rate and bursts are wrong without bursts


def test_generator_refuses_traces_without_returns():
    """A trace where nothing comes back has nothing stationary to fit."""
    with pytest.raises(ConfigError, match="'trace' must be a trace in which instances are lost and come back"):
        fit_model(load_trace("synthetic-10m"))


# --------------------------------------------------------------------------- CLI


def test_cli_trace(tmp_path, capsys):
    """list names every shipped trace, stats --json gives the statistics, bad input exits 2."""
    from sim.cli import main

    assert main(["trace", "list"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in SHIPPED)
    assert main(["trace", "stats", "aws-p3", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["nodes"] == 32 and s["preemption_events"] == 79
    bad = tmp_path / "bad.csv"
    bad.write_text("0,1\n5,x\n")
    assert main(["trace", "stats", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dtsim trace: error: 'trace' must be a Bamboo count trace of t,count lines "
                   f"(count an integer >= 0): '{bad}:2 (5,x)'"]
    png = tmp_path / "p.png"
    assert main(["trace", "plot", "aws-p2-19h", "--out", str(png), "--samples", "20"]) == 0
    assert png.stat().st_size > 1000


@pytest.mark.slow  # a ~2 s fit; test_traces_fit_domains.py::test_shipped_trace_fit_is_reported_in_json
# runs the same command in the default suite and checks the same field
def test_cli_trace_fit(capsys):
    """trace fit --json names the best law of the down times."""
    from sim.cli import main

    assert main(["trace", "fit", "aws-p3", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)
    assert f["down"]["best"] in ("exponential", "weibull", "lognormal")


@pytest.mark.parametrize("name", list(SHIPPED))
def test_dtsim_failures_replays_the_trace(capsys, name):
    """dtsim failures --failure-trace X --json reports the trace's availability exactly."""
    from sim.cli import main

    slots = TraceReplay(name).slots
    assert main(["failures", "--failure-trace", name, "--workers", str(slots), "--domains", "4",
                 "--replications", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = trace_stats(load_trace(name))["availability"]
    assert out["trace_availability"] == want
    assert out["worker_availability"] == pytest.approx(want, abs=1e-12)
    assert out["target_availability"] == pytest.approx(want, abs=1e-15)


def test_dtsim_failures_trace_alias_and_refusals(capsys, tmp_path):
    """--trace is the alias of --failure-trace FILE --trace-format dtsim; stray options are refused."""
    from sim.cli import main

    p = tmp_path / "t.csv"
    p.write_text("worker,start,end,state\nA,0,2,down\nA,5,6,down\nB,1,3,down\nB,3,4,up\n")
    args = ["failures", "--workers", "2", "--domains", "1", "--horizon", "10",
            "--replications", "2", "--json"]
    assert main(args + ["--trace", str(p)]) == 0
    a = json.loads(capsys.readouterr().out)
    assert main(args + ["--failure-trace", str(p), "--trace-format", "dtsim"]) == 0
    b = json.loads(capsys.readouterr().out)
    assert a["worker_availability"] == b["worker_availability"] == pytest.approx(15 / 20)
    assert main(["failures", "--trace-policy", "random"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim failures: error: 'trace_policy' must be unset without --failure-trace: 'random'")
    assert main(["failures", "--failure-trace", "aws-p3", "--horizon", "1e6"]) == 2
    assert "'horizon' must be at most the trace's 40920 simulated time units" in capsys.readouterr().err
    assert main(["failures", "--failure-trace", "aws-p3", "--workers", "64",
                 "--trace-policy", "random+tile", "--replications", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["worker_availability"] == pytest.approx(out["trace_availability"], abs=1e-12)


def _down_at(intervals, t: float) -> bool:
    for s, e in intervals:
        if s <= t < e:
            return True
        if s > t:
            return False
    return False


@pytest.mark.parametrize("policy,skip", [("recent", 0), ("domain", 0), ("random", 1)])
def test_pipeline_des_replays_the_trace_exactly(policy, skip):
    """The pipeline DES drops exactly the microbatches that meet > s stages with every replica down."""
    from sim.pipeline import PipelineConfig, des_pipeline_model

    L, r, n, rate = 6, 2, 400, 1 / 97.3
    replay = TraceReplay("aws-p3", policy=policy)
    cfg = PipelineConfig(stages=L, replicas=r, skip_budget=skip, failure_trace=replay,
                         rate=rate, microbatches=n)
    streams = Streams(4).replication(0)
    got = des_pipeline_model(cfg, streams)["drop_rate"]
    ivs = [list(iv) for iv in replay.worker_intervals(L * r, streams=Streams(4).replication(0),
                                                     domain_of=[w // r for w in range(L * r)])]
    drops, t = 0, 0.0
    for _ in range(n):
        t += 1 / rate  # the DES's fixed arrivals: one gap after another
        out = sum(all(_down_at(ivs[j * r + k], t) for k in range(r)) for j in range(L))
        drops += out > skip
    assert got == drops / n
    assert 0 < drops < n  # the check is not vacuous


def test_pipeline_trace_refusals(capsys):
    """The pipeline refuses worker-law options with a trace and a trace that ends too soon."""
    from sim.cli import main

    assert main(["pipeline", "--stages", "4", "--replicas", "2", "--failure-trace", "aws-p3",
                 "--distribution", "weibull"]) == 2
    assert capsys.readouterr().err.strip() == (
        "dtsim pipeline: error: 'distribution' must be unset with --failure-trace (the trace "
        "sets the workers' up and down times): 'weibull'")
    assert main(["pipeline", "--stages", "4", "--replicas", "2", "--failure-trace", "aws-p3",
                 "--microbatches", "50000"]) == 2
    assert "'microbatches' must be arriving before the failure trace ends" in capsys.readouterr().err
    assert main(["pipeline", "--stages", "4", "--replicas", "2", "--failure-trace", "aws-p3",
                 "--trace-loop", "--trace-speedup", "10", "--microbatches", "5000",
                 "--replications", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["predicted_drop_rate"] is None and out["engine"] == "des"
    assert out["failure_trace"] == "aws-p3"


def test_domain_policy_spares_do_not_shield_the_workers():
    """Under domain, half the slots of a count trace keep its availability on average; fixed ties do not."""
    tr = load_trace("gcp-a100")
    a, P = trace_stats(tr)["availability"], tr.end
    layout = [w // 2 for w in range(32)]  # 16 stages of 2; the 32 spare slots repeat the layout

    def workers_up(rng):
        pats = slot_patterns(tr, policy="domain", domain_of=layout, rng=rng)
        return 1 - sum(e - s for p in pats[:32] for s, e in p) / (32 * P)

    v = np.array([workers_up(np.random.default_rng(k)) for k in range(60)])
    se = v.std(ddof=1) / math.sqrt(len(v))
    assert abs(v.mean() - a) < 4 * se
    assert abs(workers_up(None) - a) > 10 * se  # ties always to the lowest domain: biased


def test_fitted_replay_keeps_the_availability():
    """Replaying fresh look-alikes (model='fitted') keeps the trace's availability on every slot."""
    from sim.failures import ClusterConfig, failures_model

    r = TraceReplay("aws-p3", model="fitted")
    cfg = ClusterConfig(workers=32, domains=4, domain_outage=0.0, horizon=r.duration,
                        failure_trace=r)
    v = np.array([failures_model(cfg, Streams(2).replication(k))["worker_availability"]
                  for k in range(30)])
    se = v.std(ddof=1) / math.sqrt(len(v))
    a = trace_stats(r.load())["availability"]
    assert abs(v.mean() - a) < 4 * se + 0.01  # 0.01: the generator's stated tolerance
    assert se < 0.02


# --------------------------------------------------------------------------- round trips


def _same(a, b, *, rel=0.0):
    assert a.counts.tolist() == b.counts.tolist()
    np.testing.assert_allclose(a.times, b.times, rtol=rel, atol=1e-9 if rel else 0)
    assert a.end == pytest.approx(b.end, rel=rel or 1e-15)


@pytest.mark.parametrize("name,fmt,kw", [
    ("aws-g4dn-24h", "bamboo", {}), ("aws-p2-3day", "bamboo", {"time_unit": "h"}),
    ("gcp-a100", "gcloud", {}), ("aws-p3", "oobleck", {}), ("aws-p3", "simgrid", {}),
    ("aws-p2-19h", "simgrid", {"time_unit": "h"}),
])
def test_round_trip_shipped(tmp_path, name, fmt, kw):
    """Write a shipped trace in a format and read it back: the same step function."""
    from sim.traces import write_trace

    tr = load_trace(name)
    p = write_trace(tr, tmp_path / f"x.{fmt}", fmt, **kw)
    back = read_trace_file(p, format="auto", **kw)
    assert back.format == fmt
    _same(back, tr, rel=1e-12 if kw else 0.0)
    if fmt == "oobleck":
        assert sorted(back.nodes, key=lambda s: s.node) == sorted(tr.nodes, key=lambda s: s.node)


def test_round_trip_skypilot_simgrid_loop_and_dtsim(tmp_path):
    """SkyPilot on a grid, SimGrid with LOOPAFTER, and dtsim intervals from a policy's slots."""
    from sim.traces import count_trace, write_trace

    grid = count_trace([0, 60, 120, 300], [3, 2, 3, 1], 360, format="test")
    _same(read_trace_file(write_trace(grid, tmp_path / "s.json", "skypilot", gap=60.0)), grid)
    loop = read_trace_file(_write(tmp_path, "simgrid"))
    back = read_trace_file(write_trace(loop, tmp_path / "l.txt", "simgrid"))
    _same(back, loop)
    assert back.loop_after == loop.loop_after == 5
    g4 = load_trace("aws-g4dn-24h")
    d = read_trace_file(write_trace(g4, tmp_path / "d.csv", "dtsim"))
    assert d.format == "dtsim" and d.end <= g4.end
    grid_t = np.linspace(0, d.end, 5001)[:-1]  # at the very end a dtsim worker is back up
    assert d.count_at(grid_t).tolist() == g4.count_at(grid_t).tolist()
    with pytest.raises(ConfigError, match="'trace' must be an event trace with node identity"):
        write_trace(g4, tmp_path / "o.csv", "oobleck")


def test_zero_length_outage_after_a_rounded_wait():
    """A zero-length outage whose start the clock overshoots by rounding replays (no negative delay)."""
    env = simpy.Environment()
    fm = FailureModel(env, Streams(0))
    a, c = 0.19045653011926333, 52859.29550044872
    assert a + (c - a) > c  # the clock lands one ulp past c
    w = fm.add_worker("w", trace=[(0.1, a), (c, c), (c + 1.0, c + 3.0)])
    fm.start()
    env.run(until=c + 10.0)
    assert w.own_transitions == 6
    assert w.own_availability(c + 10.0) == pytest.approx(1 - (a - 0.1 + 2.0) / (c + 10.0))


def test_gossip_churn_from_a_trace():
    """Async gossip nodes replay a trace's churn; the config refuses what it cannot honour."""
    from sim.gossip import GossipConfig, gossip_model

    r = TraceReplay("aws-p3", policy="random", loop=True, speedup=1000.0)
    cfg = GossipConfig(topology="complete", nodes=32, protocol="async", latency=0.0, rounds=20,
                       failure_trace=r)
    out = gossip_model(cfg, Streams(3).replication(0))
    assert out["final_disagreement"] < out["disagreement"][0]
    none = gossip_model(GossipConfig(topology="complete", nodes=32, protocol="async",
                                     latency=0.0, rounds=20), Streams(3).replication(0))
    assert out["exchanges"] < none["exchanges"]  # offline nodes neither wake nor are chosen
    with pytest.raises(ConfigError, match="'nodes' must be at most the trace's 32 worker slots"):
        GossipConfig(topology="complete", nodes=40, protocol="async", rounds=5, failure_trace=r)
    with pytest.raises(ConfigError, match="'failure_trace' must be unset unless protocol is async"):
        GossipConfig(topology="complete", nodes=8, protocol="edge", failure_trace=r)
    with pytest.raises(ConfigError, match="'availability' must be 1 with failure_trace"):
        GossipConfig(topology="complete", nodes=8, protocol="async", availability=0.9,
                     failure_trace=r)
