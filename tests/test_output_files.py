"""Outputs never replace or mix a file of the user's (the outputs audit).

A command that writes a file replaces an existing one only when dtsim wrote it (recognised by
content dtsim always writes) or with ``--overwrite``; otherwise it refuses in one line, exit 2,
before any work, and the file is left byte for byte. Files are replaced atomically.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.runner import load_experiment, run_experiment
from sim.timeline import Recorder

MINE = '{"my": "own notes"}\n'
TRAIN = ["train", "--stages", "2", "--microbatches-per-step", "2", "--steps", "1",
         "--replications", "1"]
PLAN = ["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-central1-a",
        "--global-batch-size", "8", "--simulate", "0", "--top", "2"]
PIPELINE = ["pipeline", "--stages", "2", "--stage-time", "1", "--microbatches", "10",
            "--replications", "1", "--engine", "des"]


def _cli(argv, capsys):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _refused(capsys, argv, param, path: Path, before: str) -> None:
    code, out, err = _cli(argv, capsys)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and f"'{param}' must be a new file or " in err, err
    assert path.read_text() == before  # left as it was


def test_plan_out_keeps_a_users_file_and_replaces_its_own(tmp_path, capsys):
    """--out over the user's plan is refused (it was overwritten silently); over the plan the
    same command wrote it runs again; --overwrite replaces any file."""
    mine = tmp_path / "plan.json"
    mine.write_text(MINE)
    _refused(capsys, [*PLAN, "--out", mine], "out", mine, MINE)
    own = tmp_path / "own.json"
    assert _cli([*PLAN, "--out", own], capsys)[0] == 0
    first = own.read_text()
    assert json.loads(first)["model"] == "OPT-350"
    assert _cli([*PLAN, "--out", own], capsys)[0] == 0  # re-running the same command
    assert own.read_text() == first
    assert _cli([*PLAN, "--out", mine, "--overwrite"], capsys)[0] == 0
    assert mine.read_text() == first


def test_plan_overwrite_needs_a_file(capsys):
    code, out, err = _cli([*PLAN, "--overwrite"], capsys)
    assert code == 2 and "'overwrite' must be given only with --out or --export-plan" in err


def test_timeline_keeps_a_users_file_and_replaces_its_own(tmp_path, capsys):
    """--timeline over a file that is not a timeline dtsim wrote is refused before the run; a
    timeline of an earlier run is replaced; --overwrite replaces any file."""
    mine = tmp_path / "notes.json"
    mine.write_text(MINE)
    _refused(capsys, [*TRAIN, "--timeline", mine], "timeline", mine, MINE)
    tl = tmp_path / "tl.json"
    code, out, err = _cli([*TRAIN, "--timeline", tl], capsys)
    assert code == 0, err
    first = tl.read_text()
    code, out2, err = _cli([*TRAIN, "--timeline", tl], capsys)
    assert code == 0 and out2 == out, err
    assert tl.read_text() == first
    assert _cli([*TRAIN, "--timeline", mine, "--overwrite"], capsys)[0] == 0
    assert mine.read_text() == first


@pytest.mark.parametrize("argv", [
    ["gossip", "--protocol", "edge", "--nodes", "4", "--rounds", "4", "--replications", "1"],
    PIPELINE,
])
def test_every_timeline_command_keeps_a_users_file(tmp_path, capsys, argv):
    mine = tmp_path / "notes.json"
    mine.write_text(MINE)
    _refused(capsys, [*argv, "--timeline", mine], "timeline", mine, MINE)


def test_event_log_keeps_a_users_file_and_replaces_its_own(tmp_path, capsys):
    mine = tmp_path / "data.csv"
    mine.write_text("a,b\n1,2\n")
    _refused(capsys, [*PIPELINE, "--event-log", mine], "event_log", mine, "a,b\n1,2\n")
    log = tmp_path / "ev.csv"
    assert _cli([*PIPELINE, "--event-log", log], capsys)[0] == 0
    first = log.read_bytes()
    assert first.startswith(b"time,microbatch,event,stage,replica\r\n")
    assert _cli([*PIPELINE, "--event-log", log], capsys)[0] == 0
    assert log.read_bytes() == first


def test_a_failed_timeline_write_leaves_the_earlier_file_whole(tmp_path):
    """A write that fails midway leaves the file it replaces as it was (it was removed), and no
    temporary file."""
    path = tmp_path / "tl.json"
    path.write_text("the earlier timeline\n")
    rec = Recorder()

    def broken(other=None):
        yield '{"traceEvents":[\n'
        raise OSError(28, "No space left on device")

    rec.lines = broken  # type: ignore[method-assign]
    with pytest.raises(OSError):
        rec.write(path)
    assert path.read_text() == "the earlier timeline\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tl.json"]


def test_write_atomic_keeps_the_mode_and_makes_the_folder(tmp_path):
    from sim.errors import write_atomic

    p = tmp_path / "a.txt"
    p.write_text("old")
    os.chmod(p, 0o640)
    write_atomic(p, ["ne", "w"])
    assert p.read_text() == "new" and stat.S_IMODE(p.stat().st_mode) == 0o640
    q = write_atomic(tmp_path / "sub" / "b.txt", "x")
    assert q.read_text() == "x"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(q.stat().st_mode) == 0o666 & ~mask


def test_check_replaceable_rules(tmp_path):
    from sim.errors import check_replaceable

    p = tmp_path / "f.txt"
    assert check_replaceable("out", p, overwrite=False, ours=lambda _: False, kind="a x") == p
    p.write_text("")  # empty: nothing to lose
    check_replaceable("out", p, overwrite=False, ours=lambda _: False, kind="a x")
    p.write_text("data")
    with pytest.raises(ConfigError, match=r"^'out' must be a new file or a x dtsim wrote "):
        check_replaceable("out", p, overwrite=False, ours=lambda _: False, kind="a x")
    check_replaceable("out", p, overwrite=False, ours=lambda _: True, kind="a x")
    check_replaceable("out", p, overwrite=True, ours=lambda _: False, kind="a x")
    link = tmp_path / "link.txt"
    link.symlink_to(p)  # a link to the user's file: refused unless --overwrite
    with pytest.raises(ConfigError, match=r"^'out' must be a new file or a x dtsim wrote .*"
                                          r"link.txt \(a link to .*f.txt\)'$"):
        check_replaceable("out", link, overwrite=False, ours=lambda _: False, kind="a x")
    check_replaceable("out", link, overwrite=True, ours=lambda _: False, kind="a x")


def test_figure_out_keeps_a_users_image_and_replaces_its_own(tmp_path, capsys):
    tl = tmp_path / "tl.json"
    assert _cli([*TRAIN, "--timeline", tl], capsys)[0] == 0
    photo = tmp_path / "photo.png"
    photo.write_text("a photo\n")
    _refused(capsys, ["plot", "--timeline", tl, "--out", photo], "out", photo, "a photo\n")
    for ext in ("png", "pdf", "svg"):
        fig = tmp_path / f"fig.{ext}"
        assert _cli(["plot", "--timeline", tl, "--out", fig], capsys)[0] == 0
        assert _cli(["plot", "--timeline", tl, "--out", fig], capsys)[0] == 0, ext
    _refused(capsys, ["trace", "plot", "aws-p3", "--out", photo, "--samples", "0"], "out",
             photo, "a photo\n")


def test_bench_appends_only_to_a_bench_history(tmp_path, capsys):
    mine = tmp_path / "results.jsonl"
    mine.write_text(MINE)
    _refused(capsys, ["bench", "--quick", "--parts", "simpy", "--out", mine], "out", mine, MINE)


def test_reproduce_keeps_a_users_report(tmp_path, capsys):
    rep = tmp_path / "report.md"
    rep.write_text("# my report\n")
    _refused(capsys, ["reproduce", "--quick", "--out", tmp_path], "out", rep, "# my report\n")


EXPERIMENT = '''NAME = "same"
BASE = {{"p": 0.5}}
FACTORS = {{"p": [{p}]}}
REPLICATIONS = 2


def model(config, streams):
    return {{"y": config["p"] + streams.rng("d").random()}}
'''


def test_a_folder_of_another_experiment_file_of_the_same_name_is_refused(tmp_path, capsys):
    """Two files of one NAME share out/NAME by default: the second is refused before any task,
    rather than keeping its records beside the first's. The same file edited, or moved (the
    first gone), resumes."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = tmp_path / "a" / "exp.py"
    b = tmp_path / "b" / "exp.py"
    a.write_text(EXPERIMENT.format(p="0.1"))
    b.write_text(EXPERIMENT.format(p="0.3"))
    out = tmp_path / "res"
    run_experiment(load_experiment(a), out=out, executor="serial", progress=False)
    records = (out / "records.csv").read_bytes()
    code, text, err = _cli(["run", b, "--out", out, "--executor", "serial"], capsys)
    assert (code, text) == (2, "") and err.count("\n") == 1, err
    assert "'out' must be a folder no other experiment file wrote" in err and str(a) in err
    assert (out / "records.csv").read_bytes() == records
    a.write_text(EXPERIMENT.format(p="0.1, 0.2"))  # the same file edited: resumes
    r = run_experiment(load_experiment(a), out=out, executor="serial", progress=False)
    assert (r.ran, r.reused) == (2, 2)
    a.unlink()  # the first file gone: b is the experiment moved, and resumes
    r = run_experiment(load_experiment(b), out=out, executor="serial", progress=False)
    assert r.ran == 2


def test_an_experiment_is_the_file_asked_for(tmp_path):
    """Two files of one name and text share one loaded module; each experiment is still its own
    file (the manifest named the first file loaded in the process)."""
    text = EXPERIMENT.format(p="0.1")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "exp.py", tmp_path / "b" / "exp.py"
    first.write_text(text)
    second.write_text(text)
    assert load_experiment(first).path == first.resolve()
    assert load_experiment(second).path == second.resolve()


def test_a_link_is_written_through_never_replaced_by_a_file(tmp_path, capsys):
    """smallfix8: --overwrite on a symbolic link replaced the link itself with a file. A link
    stays a link: the file it points to is what is checked and written, replaced when it is
    dtsim's own output (or empty) or with --overwrite; a link to a user's file, or to no file
    yet, is refused without --overwrite and left as it was."""
    from sim.errors import check_replaceable, write_atomic

    own = tmp_path / "own.json"
    assert _cli([*PLAN, "--out", own], capsys)[0] == 0
    plan = own.read_text()
    mine = tmp_path / "mine.json"
    mine.write_text(MINE)
    for target, before in ((mine, MINE), (tmp_path / "nothing.json", None)):
        link = tmp_path / f"to_{target.name}"
        link.symlink_to(target)
        code, out, err = _cli([*PLAN, "--out", link], capsys)
        assert (code, out) == (2, "") and err.count("\n") == 1, err
        assert "'out' must be a new file or a plan file dtsim wrote" in err and "a link to" in err
        assert link.is_symlink() and (target.read_text() if before else None) == before
        assert _cli([*PLAN, "--out", link, "--overwrite"], capsys)[0] == 0  # told to
        assert link.is_symlink() and target.read_text() == plan
    link = tmp_path / "to_own.json"  # a link to dtsim's own plan: re-running writes through
    link.symlink_to(own)
    ino = own.stat().st_ino
    assert _cli([*PLAN, "--out", link], capsys)[0] == 0
    assert link.is_symlink() and own.read_text() == plan and own.stat().st_ino != ino  # anew
    ex = tmp_path / "to_export.json"  # --export-plan --overwrite: through the link too
    notes = tmp_path / "notes.json"
    notes.write_text(MINE)
    ex.symlink_to(notes)
    code, _, err = _cli([*PLAN, "--export-plan", ex], capsys)
    assert code == 2 and "'export_plan' must be a file that does not exist yet" in err
    assert _cli([*PLAN, "--export-plan", ex, "--overwrite"], capsys)[0] == 0
    assert ex.is_symlink() and notes.read_text() not in (MINE, "")
    # the one write path: a link in another folder, written where it points
    sub = tmp_path / "sub"
    sub.mkdir()
    far = sub / "far.txt"
    far.write_text("old")
    os.chmod(far, 0o640)
    near = tmp_path / "near.txt"
    near.symlink_to(far)
    assert write_atomic(near, "new") == near
    assert near.is_symlink() and far.read_text() == "new"
    assert stat.S_IMODE(far.stat().st_mode) == 0o640
    assert sorted(p.name for p in sub.iterdir()) == ["far.txt"]  # no temporary file left
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    for overwrite in (False, True):
        with pytest.raises(ConfigError, match=r"^'out' must be a writable file: "):
            check_replaceable("out", loop, overwrite=overwrite, ours=lambda _: True, kind="a x")


def test_every_table_and_report_writer_is_the_one_atomic_write(tmp_path):
    """smallfix8: write_csv (and so write_tables' CSV) opened its file for writing in place, so a
    failure midway left a torn table where the earlier one was; write_report renamed its own
    temporary file over the path, turning a link (to a report dtsim wrote) into a file;
    write_tables' Markdown and write_trace wrote in place. Each goes through
    sim.errors.replace_atomic now: the earlier file whole after a failed write, a link kept."""
    from sim.results import write_csv, write_report, write_tables
    from sim.traces import load_trace, write_trace

    table = tmp_path / "t.csv"
    write_csv([{"a": 1, "b": 2}], table)
    before = table.read_text()

    class Broken:
        def __str__(self):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_csv([{"a": 1, "b": 2}] * 1000 + [{"a": Broken(), "b": 0}], table)
    assert table.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]  # no temporary file left
    kept = tmp_path / "kept"
    kept.mkdir()
    for name, write in (
            ("report.md", lambda p: write_report([], p)),
            ("x.csv", lambda p: write_csv([{"a": 1}], p)),
            ("x.md", lambda p: write_tables([{"a": 1}], ["a"], p.parent, "x", "X")),
            ("tr.csv", lambda p: write_trace(load_trace("aws-p3"), p, "simgrid"))):
        target = kept / name
        target.write_text("earlier\n")
        link = tmp_path / "links" / name
        link.parent.mkdir(exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        write(link)
        assert link.is_symlink(), name
        assert target.read_text() != "earlier\n", name


@pytest.mark.parametrize("option", ["--export-plan", "--out"])
def test_an_output_named_as_a_folder_is_refused(tmp_path, capsys, option):
    """audit9: 'DIR/' (a name ending in '/') was written as the file DIR; now refused."""
    code, out, err = _cli([*PLAN, option, f"{tmp_path / 'dir'}/"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "a name ending in '/' is a folder's" in err
    assert not (tmp_path / "dir").exists()


def test_plot_timeline_refuses_metric(tmp_path, capsys):
    """audit9: --metric with --timeline was taken and ignored (the Gantt chart drawn, exit 0)."""
    tl = tmp_path / "tl.json"
    assert _cli([*TRAIN, "--timeline", tl], capsys)[0] == 0
    fig = tmp_path / "tl.png"
    code, out, err = _cli(["plot", "--timeline", tl, "--metric", "throughput", "--out", fig],
                          capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "'metric' must be not given with --timeline" in err and not fig.exists()


def test_an_output_that_is_an_input_is_refused(tmp_path, capsys):
    """audit9: with --overwrite, an output named as a file the command reads replaced it:
    plan --fleet F --export-plan F wrote the plan over the fleet, then failed reading it (exit 2
    after the work); train --failure-trace T --timeline T replaced the trace. Refused; kept."""
    fleet = tmp_path / "fleet.json"
    fleet.write_text('{"nodes": [{"gpu": "GH-96", "gpus_per_node": 4, "zone": "us-central1-a", '
                     '"count": 2}]}')
    before = fleet.read_text()
    base = [a for a in PLAN if a not in ("--nodes", "GH-96:4x2@us-central1-a")]
    for option in ("--export-plan", "--out"):
        code, out, err = _cli([*base, "--fleet", fleet, option, fleet, "--overwrite"], capsys)
        assert (code, out) == (2, "") and err.count("\n") == 1, err
        assert "another file than --fleet's" in err and fleet.read_text() == before
    trace = tmp_path / "trace.csv"
    trace.write_text("worker,start,end\nw0,1,2\nw1,3,4\n")
    code, out, err = _cli([*TRAIN, "--failure-trace", trace, "--timeline", trace, "--overwrite"],
                          capsys)
    assert (code, out) == (2, "") and "another file than --failure-trace's" in err, err
    assert trace.read_text() == "worker,start,end\nw0,1,2\nw1,3,4\n"


def test_every_command_keeps_its_inputs_from_its_timeline_and_event_log(tmp_path, capsys):
    """(lead, after review16) audit9's rule was train's and plan's only: dtsim pipeline
    --failure-trace T --timeline T --overwrite replaced the user's trace with a timeline, and
    dtsim gossip --topology G --timeline G --overwrite the user's graph. Every command that
    writes a timeline or an event log now refuses a file it reads, even with --overwrite."""
    trace = tmp_path / "trace.csv"
    trace.write_text("worker,start,end\nworker0,10,20\n")
    graph = tmp_path / "g.edges"
    graph.write_text("a b\nb c\nc a\n")
    runs = (
        (["pipeline", "--stages", "1", "--replicas", "1", "--failure-trace", trace,
          "--trace-loop", "--timeline", trace, "--overwrite"], trace, "failure-trace", "timeline"),
        (["pipeline", "--stages", "1", "--replicas", "1", "--failure-trace", trace,
          "--trace-loop", "--event-log", trace, "--overwrite"], trace, "failure-trace",
         "event_log"),
        (["gossip", "--topology", graph, "--rounds", "3", "--timeline", graph, "--overwrite"],
         graph, "topology", "timeline"),
    )
    for argv, kept, option, name in runs:
        before = kept.read_text()
        code, out, err = _cli(argv, capsys)
        assert (code, out) == (2, "") and err.count("\n") == 1, err
        assert f"'{name}' must be another file than --{option}'s" in err, err
        assert kept.read_text() == before
