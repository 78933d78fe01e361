"""A user's own event log (--trace-format events:...): read, replayed and refused.

The hand log below, in trace seconds from 12:00:00Z (its rows out of order, its
times written with three different offsets):

    i-c  launched 0     preempted 1200, again 1300 (a repeat)   launched 2400
    i-a  launched 0     preempted 600    launched 1500   preempted 2700   launched 3600
    i-b  first event preempted 900 (so up from 0), never back (down to the end)
    a 'pending' row (ignored)

Span 0 .. 3600. Up time: i-a 600 + 1200 = 1800, i-b 900, i-c 1200 + 1200 = 2400, in all
5100 s of 3 x 3600 = 10800: availability 5100/10800. Falls at 600, 900, 1200, 2700: four
events of one; returns at 1500, 2400, 3600: three. Mean up 5100/4 = 1275 s, mean down
(10800 - 5100)/3 = 1900 s. Slots by first event (time, then file order): i-c, i-a, i-b.
"""

from __future__ import annotations

import json

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.traces import NodeSpan, load_trace, replay, slot_patterns, trace_stats

SPEC = "events:worker=instance_id,time=timestamp,down=preempted,up=launched,ignore=pending"

ISO = """timestamp,instance_id,event,zone
2024-03-01T13:00:00+01:00,i-c,launched,b
2024-03-01T13:10:00+01:00,i-a,preempted,a
2024-03-01T12:00:00Z,i-a,launched,a
2024-03-01T12:15:00Z,i-b,Preempted,a
2024-03-01T12:20:00Z,i-c,preempted,b
2024-03-01T12:21:40Z,i-c,preempted,b
2024-03-01T12:22:00Z,i-c,pending,b
2024-03-01T07:25:00-05:00,i-a,launched,a
2024-03-01T12:40:00Z,i-c,launched,b
2024-03-01T12:45:00Z,i-a, preempted ,a
2024-03-01T13:00:00Z,i-a,launched,a
"""

# the same events in epoch seconds (2024-03-01T12:00:00Z = 1709294400)
EPOCH = """timestamp,instance_id,event,zone
1709294400,i-c,launched,b
1709295000,i-a,preempted,a
1709294400,i-a,launched,a
1709295300,i-b,preempted,a
1709295600,i-c,preempted,b
1709295700,i-c,preempted,b
1709295720,i-c,pending,b
1709295900,i-a,launched,a
1709296800,i-c,launched,b
1709297100,i-a,preempted,a
1709298000,i-a,launched,a
"""

#: the down intervals of the slots, by hand (slot 0 i-c, 1 i-a, 2 i-b)
DOWN = [((1200.0, 2400.0),), ((600.0, 1500.0), (2700.0, 3600.0)), ((900.0, 3600.0),)]
#: the same intervals in dtsim's own CSV (its workers take slots by name among ties)
DTSIM = "worker,start,end\nw1,600,1500\nw1,2700,3600\nw0,1200,2400\nw2,900,3600\n"

HAND = {"nodes": 3, "duration": 3600.0, "mean_available": 5100 / 3600,
        "availability": 5100 / 10800, "preemption_events": 4, "preempted_nodes": 4,
        "batch_fraction": 0.0, "preemptions_per_hour": 4.0, "event_sizes": {1: 4},
        "node_ids": 3, "mean_up": 1275.0, "mean_down": 1900.0, "returns": 3}


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text", [ISO, EPOCH], ids=["iso-offsets", "epoch"])
def test_hand_log_reads_to_the_hand_trace(tmp_path, text):
    tr = load_trace(_write(tmp_path, "log.csv", text), format=SPEC)
    assert tr.times.tolist() == [0, 600, 900, 1200, 1500, 2400, 2700, 3600]
    assert tr.counts.tolist() == [3, 2, 1, 0, 1, 2, 1, 2]
    assert tr.end == 3600.0
    assert set(tr.nodes) == {NodeSpan("i-c", 0.0, 1200.0), NodeSpan("i-a", 0.0, 600.0),
                             NodeSpan("i-b", 0.0, 900.0), NodeSpan("i-a", 1500.0, 2700.0),
                             NodeSpan("i-c", 2400.0, None), NodeSpan("i-a", 3600.0, None)}
    assert slot_patterns(tr) == DOWN
    assert replay.slot_nodes(tr) == [["i-c"], ["i-a"], ["i-b"]]
    s = trace_stats(tr)
    for k, v in HAND.items():
        assert s[k] == v, k
    assert s.get("time_unit_assumed") == (None if text is ISO else "s")


def test_epoch_milliseconds_with_time_unit(tmp_path):
    """Numbers in another unit with --time-unit: ms exact (decimal arithmetic, rounded once)."""
    lines = EPOCH.splitlines()
    ms = [lines[0]] + [f"{r.split(',')[0]}000,{r.split(',', 1)[1]}" for r in lines[1:]]
    tr = load_trace(_write(tmp_path, "ms.csv", "\n".join(ms) + "\n"), format=SPEC,
                    time_unit="ms")
    assert slot_patterns(tr) == DOWN and tr.assumed_unit is None


def test_row_order_does_not_matter(tmp_path):
    rows = ISO.splitlines()
    a = load_trace(_write(tmp_path, "a.csv", ISO), format=SPEC)
    b = load_trace(_write(tmp_path, "b.csv", "\n".join([rows[0]] + rows[:0:-1]) + "\n"),
                   format=SPEC)
    assert a.times.tolist() == b.times.tolist() and a.counts.tolist() == b.counts.tolist()
    assert set(a.nodes) == set(b.nodes)
    # i-a and i-c come up at one time: file order breaks the tie for slots 0 and 1
    assert slot_patterns(b) == [DOWN[1], DOWN[0], DOWN[2]]


def test_defaults_and_detection(tmp_path):
    """Columns worker,time,event with words down/up need no spec (detected); a fractional
    ISO second is exact."""
    p = _write(tmp_path, "plain.csv", "worker,time,event\nn0,2024-01-01 00:00:00,up\n"
               "n0,2024-01-01 00:00:10.25,down\nn1,2024-01-01 00:00:20,DOWN\n"
               "n0,2024-01-01 00:00:30,up\n")
    tr = load_trace(p)
    assert tr.format == "events" and tr.end == 30.0
    assert slot_patterns(tr) == [((10.25, 30.0),), ((20.0, 30.0),)]


def test_start_and_end_set_the_span(tmp_path):
    p = _write(tmp_path, "log.csv", ISO)
    tr = load_trace(p, format=SPEC + ",start=2024-03-01T11:50:00Z,end=2024-03-01T13:10:00Z")
    # every time 600 s later, the span to 4800; i-a and i-c, first launched, are down before
    # it, i-b, first preempted, up from time zero: it comes up first and takes slot 0
    assert tr.end == 4800.0
    assert replay.slot_nodes(tr) == [["i-b"], ["i-c"], ["i-a"]]
    assert slot_patterns(tr) == [((1500.0, 4800.0),), ((0.0, 600.0), (1800.0, 3000.0)),
                                 ((0.0, 600.0), (1200.0, 2100.0), (3300.0, 4200.0))]


def test_a_returning_instance_takes_back_its_own_slot(tmp_path):
    """y is down longest, but x comes back to its own slot (the policy picks for newcomers)."""
    p = _write(tmp_path, "xy.csv", "worker,time,event\nx,0,up\ny,0,up\ny,100,down\n"
               "x,200,down\nx,300,up\nz,400,up\n")
    tr = load_trace(p)
    assert slot_patterns(tr) == [((200.0, 300.0),), ((100.0, 400.0),)]
    assert replay.slot_nodes(tr) == [["x"], ["y", "z"]]


def test_train_replays_the_log_as_its_dtsim_csv_bit_for_bit(tmp_path, capsys):
    """dtsim train on the event log == on the same intervals as dtsim's CSV (every number)."""
    args = ["train", "--stages", "3", "--replicas", "1", "--microbatches-per-step", "2",
            "--steps", "1500", "--max-wait", "inf", "--trace-loop", "--replications", "2",
            "--json"]
    outs = []
    for argv in (["--failure-trace", _write(tmp_path, "log.csv", ISO), "--trace-format", SPEC],
                 ["--failure-trace", _write(tmp_path, "own.csv", DTSIM)]):
        assert main(args + argv) == 0
        outs.append(json.loads(capsys.readouterr().out))
    ev, own = outs
    assert ev["wall_time_mean"] > 10 * 3600  # many loops of the trace
    assert ev.pop("trace_time_unit_assumed") is None and own.pop("trace_time_unit_assumed") == "s"
    assert ev.pop("failure_trace") != own.pop("failure_trace")
    assert ev == own


def test_trace_stats_cli_gives_the_hand_figures(tmp_path, capsys):
    p = _write(tmp_path, "log.csv", ISO)
    assert main(["trace", "stats", p, "--trace-format", SPEC, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["slots"] == [["i-c"], ["i-a"], ["i-b"]] and s["format"] == "events"
    for k, v in HAND.items():
        assert s[k] == ({str(a): b for a, b in v.items()} if k == "event_sizes" else v), k
    assert main(["trace", "stats", p, "--trace-format", SPEC]) == 0
    out = capsys.readouterr().out
    assert "slot 0: i-c\n  slot 1: i-a\n  slot 2: i-b\n" in out


def test_integer_times_read_as_seconds_are_said(tmp_path, capsys):
    """A dtsim CSV of integer times without --time-unit: read in seconds, and the output says so
    (it said nothing, so hours passed as seconds); with --time-unit, no note."""
    p = _write(tmp_path, "own.csv", DTSIM)
    assert main(["trace", "stats", p]) == 0
    assert "times read in seconds: the file does not say its unit" in capsys.readouterr().out
    assert main(["trace", "stats", p, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_unit_assumed"] == "s"
    assert main(["trace", "stats", p, "--time-unit", "h", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert "time_unit_assumed" not in s and s["duration"] == 3600.0 * 3600
    note = "  times read in seconds: the file does not say its unit"
    assert main(["train", "--stages", "3", "--replicas", "1", "--steps", "2",
                 "--failure-trace", p, "--replications", "1"]) == 0
    assert note in capsys.readouterr().out
    assert main(["pipeline", "--stages", "3", "--replicas", "1", "--failure-trace", p,
                 "--microbatches", "5", "--replications", "2"]) == 0
    assert note in capsys.readouterr().out
    assert main(["failures", "--trace", p, "--workers", "3", "--replications", "2"]) == 0
    assert note in capsys.readouterr().out
    assert main(["failures", "--trace", p, "--workers", "3", "--replications", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_time_unit_assumed"] == "s"
    assert main(["failures", "--trace", p, "--workers", "3", "--replications", "2",
                 "--time-unit", "s"]) == 0
    assert note not in capsys.readouterr().out


#: a SimGrid state profile (instances up from each date): numbers without a unit, read in seconds
PROFILE = "0 4\n600 3\n1500 4\n2700 2\n3600 4\n"


@pytest.mark.parametrize("argv", [
    ["gossip", "--protocol", "async", "--nodes", "4", "--rounds", "3", "--record-every", "3",
     "--replications", "2"],
    ["gossip", "--protocol", "async", "--nodes", "4", "--rounds", "3", "--record-every", "3",
     "--replications", "2", "--objective", "quadratic"],
    ["design", "--stages", "2", "--skip-budget", "0", "--target-drop", "0.5"],
    ["design", "--stages", "2", "--skip-penalty", "0.1"],
    ["plan", "--model", "OPT-350", "--nodes", "GH-96:2x1@us-central1-a", "--global-batch-size",
     "8", "--simulate", "1", "--top", "1", "--steps", "2", "--replications", "1",
     "--restart-cost", "0.01", "--trace-loop"],
], ids=["gossip", "gossip-training", "design", "design-optimal", "plan"])
def test_every_command_reading_a_trace_says_seconds_were_assumed(tmp_path, capsys, argv):
    """gossip (plain and training), design and plan read a trace as train, pipeline and failures
    do, and said nothing when its times were taken as seconds for want of a unit: now the same
    line under their first lines and trace_time_unit_assumed in their JSON ("s"; null with
    --time-unit)."""
    argv = [*argv, "--failure-trace", _write(tmp_path, "up.prof", PROFILE)]
    note = "\n  times read in seconds: the file does not say its unit and --time-unit was not given"
    assert main(argv) == 0
    assert note in capsys.readouterr().out
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_time_unit_assumed"] == "s"
    assert main([*argv, "--time-unit", "s"]) == 0
    assert "times read in seconds" not in capsys.readouterr().out
    assert main([*argv, "--time-unit", "s", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace_time_unit_assumed"] is None


def test_trace_fit_and_plot_say_seconds_were_assumed(tmp_path, capsys):
    """trace fit (its durations in s) and trace plot said nothing of a unit taken as seconds,
    which trace stats says: the same line now, and fit's JSON has stats's time_unit_assumed."""
    p = _write(tmp_path, "up.prof", PROFILE)
    note = "times read in seconds: the file does not say its unit and --time-unit was not given"
    assert main(["trace", "fit", p]) == 0
    assert f"\n  {note}" in capsys.readouterr().out
    assert main(["trace", "fit", p, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_unit_assumed"] == "s"
    assert main(["trace", "fit", p, "--time-unit", "s", "--json"]) == 0
    assert "time_unit_assumed" not in json.loads(capsys.readouterr().out)
    assert main(["trace", "plot", p, "--out", str(tmp_path / "up.png")]) == 0
    assert capsys.readouterr().out.startswith(note)


BAD = [  # (file text, more of the spec or a whole spec, more arguments, the one line)
    (ISO.replace("pending", "stopping"), "", [],
     "'failure_trace' must be an event log whose events are down (preempted) or up (launched) "
     "or ignored (pending): \"{p}:8 ('stopping')\""),
    (ISO.replace("12:45:00Z", "12:45:00"), "", [],
     "'failure_trace' must be an event log whose times are all ISO-8601 with an offset (Z, "
     "+02:00), as its first (2024-03-01T13:00:00+01:00): \"{p}:11 ('2024-03-01T12:45:00')\""),
    (EPOCH.replace("1709297100", "2024-03-01T12:45:00Z"), "", [],
     "'failure_trace' must be an event log whose times are all numbers, as its first "
     "(1709294400): \"{p}:11 ('2024-03-01T12:45:00Z')\""),
    (ISO.replace("12:40:00Z", "noon"), "", [],
     "'failure_trace' must be an event log whose times are ISO-8601 (2024-03-01T12:00:05Z) or "
     "numbers (epoch seconds): \"{p}:10 ('2024-03-01Tnoon')\""),
    (ISO.replace("i-b,", ",", 1), "", [],
     "'failure_trace' must be an event log with an instance in 'instance_id' on every row: "
     "'{p}:5'"),
    (ISO.replace("instance_id", "node"), "", [],
     "'failure_trace' must be an event log with a column 'instance_id' (worker= of "
     "--trace-format): '{p}:1 (columns: timestamp, node, event, zone)'"),
    (ISO + "2024-03-01T13:00:00Z,i-x\n", "", [],
     "'failure_trace' must be an event log row with the 'instance_id', 'timestamp' and "
     "'event' cells: '{p}:13 (2024-03-01T13:00:00Z,i-x)'"),
    ("timestamp,instance_id,event\n5,a,preempted\n9,a,preempted\n", "", [],
     "'failure_trace' must be an event log with an instance up at some time: '{p} (none ever up)'"),
    ("timestamp,instance_id,event\n5,a,launched\n5,a,preempted\n", "", [],
     "'failure_trace' must be a trace spanning a positive time: '{p} (first and last times 0, "
     "0 s)'"),
    (ISO, ",start=2024-03-01T12:05:00Z", [],
     "'failure_trace' must be an event log whose events are at or after start=: '{p}:2 (300 s "
     "before 2024-03-01T12:05:00Z)'"),
    (ISO, ",end=2024-03-01T12:05:00Z", [],
     "'failure_trace' must be an event log whose events are at or before end=: '{p}:12 (3300 s "
     "after 2024-03-01T12:05:00Z)'"),
    (ISO, ",start=12", [],
     "'trace_format' must be a start= time written as the log's times are (as its first, "
     "2024-03-01T13:00:00+01:00): '12'"),
    (ISO, ",bogus=1", [],
     "'trace_format' must be a key of events (worker, time, event, down, up, ignore, start, "
     "end): 'bogus'"),
    (ISO, ",up=x", [], "'trace_format' must be each key once: 'up'"),
    (ISO, ",event=zone,time=zone", [], "'trace_format' must be each key once: 'time'"),
    (ISO, "events:worker=instance_id,time=timestamp,down=preempted,up=launched,"
          "ignore=pending/ Launched", [],
     "'trace_format' must be each event word in one of down=, up=, ignore= (ignoring case): "
     "'Launched in up= and ignore='"),
    (ISO, "", ["--time-unit", "h"],
     "'time_unit' must be unset for an event log of ISO-8601 times (they give their own unit): "
     "'h'"),
    # (audit 8) each read silently before: the first of two columns, a row's extra cell dropped,
    # two times made one by a far start= (a KeyError in the replay)
    (ISO.replace(",zone", ",timestamp", 1), "", [],
     "'failure_trace' must be an event log with one column 'timestamp' (time= of "
     "--trace-format): \"{p}:1 (2 columns named 'timestamp')\""),
    (ISO.replace("i-c,launched,b", "i-c,launched,b,2", 1), "", [],
     "'failure_trace' must be an event log row of at most the header's 4 cells: '{p}:2 "
     "(2024-03-01T13:00:00+01:00,i-c,launched,b,2)'"),
    (EPOCH, ",start=-1e300", [],
     "'failure_trace' must be an event log whose different times stay different in seconds "
     "from its time zero (start=, else its first event): '{p}:3 (1e+300 s as the row before)'"),
    (ISO, ",end=noon", [],
     "'trace_format' must be an end= time written as the log's times are (as its first, "
     "2024-03-01T13:00:00+01:00): 'noon'"),
]


@pytest.mark.parametrize("text,extra,args,line", BAD, ids=[
    "unknown-word", "naive-among-aware", "iso-among-numbers", "not-a-time", "no-instance",
    "no-column", "short-row", "never-up", "no-span", "before-start", "after-end", "start-clock",
    "unknown-key", "key-twice", "key-twice-2", "word-twice", "time-unit-with-iso",
    "column-twice", "row-too-long", "far-start", "end-article"])
def test_each_bad_log_is_one_line_before_any_work(tmp_path, capsys, text, extra, args, line):
    p = _write(tmp_path, "bad.csv", text)
    assert main(["train", "--stages", "3", "--steps", "2", "--failure-trace", p,
                 "--trace-format", extra if extra.startswith("events") else SPEC + extra,
                 *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines() == ["dtsim train: error: " + line.replace("{p}", p)]


def test_spec_errors_through_the_library():
    with pytest.raises(ConfigError, match="'trace_format' must be events"):
        load_trace("aws-p3", format="events:down=")


def test_fit_censors_the_up_periods_a_log_starts_in(tmp_path):
    """An instance up at the log's start may have been up before it: its first up period is
    censored for the fits (an Oobleck trace's joins at 0 are seen). By hand, from DOWN: complete
    up periods 1500 -> 2700 only; censored 0 -> 1200, 0 -> 600, 0 -> 900 and 2400 -> 3600;
    complete down periods 1200 -> 2400, 600 -> 1500; censored 2700 -> 3600, 900 -> 3600."""
    from sim.traces.fit import durations

    d = durations(load_trace(_write(tmp_path, "log.csv", ISO), format=SPEC))
    assert sorted(d["up"].tolist()) == [1200.0]
    assert sorted(d["up_censored"].tolist()) == [600.0, 900.0, 1200.0, 1200.0]
    assert sorted(d["down"].tolist()) == [900.0, 1200.0]
    assert sorted(d["down_censored"].tolist()) == [900.0, 2700.0]
