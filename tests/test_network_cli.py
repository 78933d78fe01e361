"""``dtsim network``: finish times in the file's order, utilisation, one-line refusals."""

from __future__ import annotations

import json

import pytest

from sim.cli import main


def _flows(tmp_path, text):
    p = tmp_path / "flows.csv"
    p.write_text(text)
    return str(p)


def test_json_gives_finish_times_in_file_order_and_link_utilisation(tmp_path, capsys):
    """--json: 'finish' in the file's order (two flows sharing a host link, one across racks)."""
    f = _flows(tmp_path, "src,dst,size,start\n0,5,100,0\n1,5,100,0\n2,30,50,1\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=20", "--flows", f, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["finish"] == pytest.approx([2.1, 2.1, 2.6], rel=1e-12)
    links = {x["link"]: x for x in out["links"]}
    assert links["rack0->5"]["bytes"] == 200.0
    assert links["rack0->5"]["utilisation"] == pytest.approx(200.0 / (100.0 * 2.6))
    assert out["makespan"] == pytest.approx(2.6)


def test_text_table_and_full_solver_agree(tmp_path, capsys):
    """The table prints each flow; --solver full gives the same finish times."""
    f = _flows(tmp_path, "src,dst,size,start\n0,3,10,0\n1,3,30,0.5\n2,0,5,0.2\n")
    args = ["network", "--topology", "tree:racks=2,hosts=2", "--flows", f, "--nic", "20"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "3 flows on tree:racks=2,hosts=2 (maxmin sharing)" in text
    assert main([*args, "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["finish"]
    assert main([*args, "--json", "--solver", "full"]) == 0
    assert json.loads(capsys.readouterr().out)["finish"] == pytest.approx(a, rel=1e-12)


@pytest.mark.parametrize("rows,message", [
    ("0,nope,1,0", "'flows' must be rows whose dst is a node of the network"),
    ("0,1,-1,0", "'flows' must be rows with a finite size >= 0"),
    ("0,0,1,0", "'flows' must be rows whose dst differs from src"),
])
def test_bad_rows_are_one_line_exit_2(tmp_path, capsys, rows, message):
    """Unknown node, negative size, a flow to itself: one line, exit 2."""
    f = _flows(tmp_path, "src,dst,size,start\n" + rows + "\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=2", "--flows", f]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_graph_without_bandwidth_is_refused(tmp_path, capsys):
    """A graph whose routes cross no finite bandwidth has nothing to share: refused."""
    f = _flows(tmp_path, "src,dst,size,start\n0,1,1,0\n")
    assert main(["network", "--topology", "ring:n=4", "--flows", f]) == 2
    assert "'topology' must be a graph with a finite bandwidth" in capsys.readouterr().err
    assert main(["network", "--topology", "ring:n=4", "--flows", f, "--nic", "2"]) == 0
