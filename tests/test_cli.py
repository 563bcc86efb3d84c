"""The command line: ``paralingam fit FILE``."""

import json

import numpy as np
import pytest

from paralingam import cli, reference


def test_fit_csv_with_header_keeps_names_and_writes_json(lingam_data, tmp_path, capsys):
    X = lingam_data(6, 400, "sparse", 901)[0]
    names = [f"gene{k}" for k in range(6)]
    path = tmp_path / "data.csv"
    np.savetxt(path, X, delimiter=",", header=",".join(names), comments="")
    assert cli.main(["fit", str(path), "--backend", "cpu"]) == 0
    out = json.loads((tmp_path / "data.paralingam.json").read_text())
    order, _ = reference.causal_order(np.loadtxt(path, delimiter=",", skiprows=1))
    assert out["causal_order"] == order
    assert out["causal_order_names"] == [names[k] for k in order]
    assert " -> ".join(names[k] for k in order) in capsys.readouterr().out


def test_fit_npy_and_output_option(lingam_data, tmp_path):
    X = lingam_data(5, 300, "dense", 902)[0]
    np.save(tmp_path / "x.npy", X)
    target = tmp_path / "result.json"
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu", "-o", str(target)]) == 0
    assert json.loads(target.read_text())["causal_order"] == reference.causal_order(X)[0]


def test_bundled_example_result_goes_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--backend", "cpu"]) == 0
    out = json.loads((tmp_path / "example.paralingam.json").read_text())
    assert sorted(out["causal_order"]) == list(range(8))


@pytest.mark.parametrize("content, message", [
    ("a,b,c\n1,2,3\n4,5\n", "line 3 has 2 fields, expected 3"),
    ("a,b\n1,x\n2,3\n3,4\n", "'b': 'x' is not a number"),
    ("a,b\n1,1\n2,1\n3,1\n", "constant columns (zero variance): column 1 ('b')"),
])
def test_bad_files_exit_2_with_a_message(tmp_path, capsys, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert cli.main(["fit", str(path), "--backend", "cpu"]) == 2
    assert message in capsys.readouterr().err


def test_missing_file_exits_2(tmp_path, capsys):
    assert cli.main(["fit", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
