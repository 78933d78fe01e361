"""A user's own profiles folders, plans, fleets and CSV files: one-line refusals, never tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sim.cli import main
from sim.errors import ConfigError
from sim.profiles import load_profiles

DATA = Path(__file__).resolve().parents[1] / "sim" / "profiles" / "data"


def _folder(tmp_path, mutate=None, info_text=None) -> str:
    """A Sailor-format profiles folder holding OPT-350 only, changed by ``mutate(prof, info)``."""
    d = tmp_path / "profiles"
    d.mkdir()
    for f in ("gpus.json", "bandwidths.json"):
        shutil.copy(DATA / f, d / f)
    prof = {"OPT-350": json.loads((DATA / "profiles.json").read_text())["OPT-350"]}
    info = {"OPT-350": json.loads((DATA / "llm_info.json").read_text())["OPT-350"]}
    if mutate is not None:
        mutate(prof, info)
    (d / "profiles.json").write_text(json.dumps(prof))
    (d / "llm_info.json").write_text(info_text if info_text is not None else json.dumps(info))
    return str(d)


def _gh(p):
    return p["OPT-350"]["GH-96"]


@pytest.mark.parametrize("mutate,message", [
    (lambda p, i: _gh(p).__setitem__("²", _gh(p)["2"]),
     "'profiles' must be positive integer keys at OPT-350.GH-96: '²'"),
    (lambda p, i: _gh(p).__setitem__("³", _gh(p)["2"]),
     "'profiles' must be positive integer keys at OPT-350.GH-96: '³'"),
    (lambda p, i: p["OPT-350"].__setitem__("GH-96", 5),
     "'profiles' must be an object of micro-batch sizes at OPT-350.GH-96: 5"),
    (lambda p, i: p["OPT-350"].__setitem__("GH-96", [1, 2]),
     "'profiles' must be an object of micro-batch sizes at OPT-350.GH-96: 'list'"),
    (lambda p, i: _gh(p).__setitem__("2", 7),
     "'profiles' must be an object of TP degrees at OPT-350.GH-96.2: 7"),
    (lambda p, i: _gh(p).__setitem__("2", [1]),
     "'profiles' must be an object of TP degrees at OPT-350.GH-96.2: 'list'"),
    (lambda p, i: _gh(p)["2"]["1"].__setitem__("0", [-1, 1, 1]),
     "'profiles' must be >= 0 for forward at OPT-350.GH-96.2.1: -1"),
    (lambda p, i: i["OPT-350"]["1"]["0"].__setitem__("act_output_bytes", -5),
     "'profiles' must be >= 0 for activation_bytes at llm_info.OPT-350.1.0: -5.0"),
])
def test_malformed_sailor_folders_are_one_line(tmp_path, mutate, message):
    """Keys that str.isdigit accepts but int() does not, entries of the wrong kind, negative
    values: a ConfigError naming the place (they were tracebacks or unlocated)."""
    with pytest.raises(ConfigError) as exc:
        load_profiles(_folder(tmp_path, mutate))
    assert str(exc.value) == message


def test_a_number_beyond_a_double_is_refused_not_read_as_inf(tmp_path, capsys):
    """params_floats of 1e400 in llm_info.json: refused when read (it was an OverflowError)."""
    text = json.dumps({"OPT-350": json.loads((DATA / "llm_info.json").read_text())["OPT-350"]})
    text = text.replace('"params_floats": 53608448', '"params_floats": 1e400', 1)
    d = _folder(tmp_path, info_text=text)
    assert main(["plan", "--model", "OPT-350", "--profiles", d, "--nodes",
                 "GH-96:4x2@us-central1-a", "--global-batch-size", "8", "--simulate", "0"]) == 2
    err = capsys.readouterr().err
    assert "1e400 is beyond the largest double" in err and len(err.strip().splitlines()) == 1


def test_plan_nodes_with_thousands_of_digits_is_one_line(capsys):
    """GH-96:4x<5000 digits>: refused (int() of 5000 digits raised past Python's limit)."""
    assert main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x" + "9" * 5000
                 + "@us-central1-a", "--global-batch-size", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "'nodes' must be GPUs per node and counts below 10^9" in err
    assert "(5024 characters)" in err and len(err) < 400


def test_zone_typo_in_nodes_is_refused(capsys):
    """A zone the network has no link for: refused (every multi-node plan was refused silently)."""
    assert main(["plan", "--model", "OPT-350", "--nodes", "GH-96:4x2@us-centrl1-a",
                 "--global-batch-size", "8", "--simulate", "0"]) == 2
    err = capsys.readouterr().err
    assert "'nodes' must be a zone the network has links for GH-96 in (us-central1-a" in err


def test_csv_with_a_byte_order_mark_and_a_long_field(tmp_path, capsys):
    """A UTF-8 BOM before the header is not part of 'src'; a 200 KB field is a refusal naming
    the row, not a csv.Error traceback."""
    f = tmp_path / "bom.csv"
    f.write_bytes(b"\xef\xbb\xbfsrc,dst,size,start\n0,3,10,0\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=2", "--flows", str(f)]) == 0
    capsys.readouterr()
    f.write_text("src,dst,size,start\n" + "a" * 200_000 + ",0,1,0\n")
    assert main(["network", "--topology", "tree:racks=2,hosts=2", "--flows", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "'flows' must be rows whose src is a node of the network" in err
    assert len(err.splitlines()) == 1 and len(err) < 500


def test_toml_number_beyond_a_double_is_one_line(tmp_path, capsys):
    """A TOML plan with 1e400: refused in one line (tomllib let the parse_float error out)."""
    f = tmp_path / "p.toml"
    f.write_text("microbatch_size = 1e400\n")
    assert main(["train", "--plan", str(f)]) == 2
    assert "'plan' must be a valid TOML file" in capsys.readouterr().err
