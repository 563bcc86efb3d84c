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


@pytest.mark.parametrize("name", ["x.npy", "X.NPY"])
def test_fit_npy_and_output_option(lingam_data, tmp_path, name):
    X = lingam_data(5, 300, "dense", 902)[0]
    with open(tmp_path / name, "wb") as fh:  # np.save would append .npy to X.NPY
        np.save(fh, X)
    target = tmp_path / "result.json"
    assert cli.main(["fit", str(tmp_path / name), "--backend", "cpu", "-o", str(target)]) == 0
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


@pytest.mark.parametrize("soft", [False, True])
def test_prior_knowledge_file_matches_the_reference(lingam_data, tmp_path, soft):
    from lingam_cases import random_prior_knowledge

    X = lingam_data(7, 500, "sparse", 903)[0]
    pk = random_prior_knowledge(7, 903, frac_no_path=0.2)
    # and the unconstrained order's sink known to be exogenous (no path into it)
    sink = reference.causal_order(X)[0][-1]
    pk[sink, :] = 0
    pk[sink, sink] = -1
    names = [f"v{k}" for k in range(7)]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header=",".join(names), comments="")
    np.savetxt(tmp_path / "pk.csv", pk, delimiter=",", header=",".join(names), comments="",
               fmt="%d")
    args = ["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
            "--prior-knowledge", str(tmp_path / "pk.csv")] + (["--soft-prior"] if soft else [])
    assert cli.main(args) == 0
    out = json.loads((tmp_path / "x.paralingam.json").read_text())
    X_read = np.loadtxt(tmp_path / "x.csv", delimiter=",", skiprows=1)
    want, _ = reference.causal_order(X_read, prior_knowledge=pk, apply_prior_knowledge_softly=soft)
    assert out["causal_order"] == want
    # the prior knowledge changes the answer on this case (else the test proves nothing)
    assert want != reference.causal_order(X_read)[0]


@pytest.mark.parametrize("pk_text, message", [
    ("a,b,x\n-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n", "header column 2 is 'x', but the data's column 2 is 'c'"),
    ("-1,-1\n-1,-1\n", "prior_knowledge must be of shape (3, 3)"),
    ("-1,2,-1\n-1,-1,-1\n-1,-1,-1\n", "invalid at [0, 1] = 2.0"),
])
def test_bad_prior_knowledge_file_exits_2(lingam_data, tmp_path, capsys, pk_text, message):
    X = lingam_data(3, 200, "sparse", 904)[0]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c", comments="")
    (tmp_path / "pk.csv").write_text(pk_text)
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
                     "--prior-knowledge", str(tmp_path / "pk.csv")]) == 2
    assert message in capsys.readouterr().err


def test_on_collinear_error_exits_2_naming_the_columns(lingam_data, tmp_path, capsys):
    X = np.array(lingam_data(4, 300, "sparse", 905)[0])
    X[:, 3] = X[:, 0] + X[:, 1]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d", comments="")
    args = ["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]
    assert cli.main(args + ["--on-collinear", "ignore"]) == 0
    capsys.readouterr()
    assert cli.main(args + ["--on-collinear", "error"]) == 2
    err = capsys.readouterr().err
    assert "paralingam: error:" in err and "'d'" in err


def test_byte_order_mark_is_not_part_of_the_first_name(lingam_data, tmp_path, capsys):
    # spreadsheet programs save "CSV UTF-8" with a byte-order mark
    X = lingam_data(3, 200, "sparse", 906)[0]
    text = "alpha,beta,gamma\n" + "\n".join(",".join(f"{v:.17g}" for v in row) for row in X)
    (tmp_path / "x.csv").write_text(text, encoding="utf-8-sig")
    (tmp_path / "pk.csv").write_text("alpha,beta,gamma\n-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
                     "--prior-knowledge", str(tmp_path / "pk.csv")]) == 0
    out = json.loads((tmp_path / "x.paralingam.json").read_text())
    assert sorted(out["causal_order_names"]) == ["alpha", "beta", "gamma"]


def test_fully_explained_variables_are_printed_by_name(lingam_data, tmp_path, capsys):
    X = np.array(lingam_data(4, 300, "sparse", 907)[0])
    X = np.column_stack([X, X[:, 0] + X[:, 2]])
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d,e", comments="")
    with pytest.warns(Warning):
        assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    line = next(s for s in out.splitlines() if "fully explained" in s)
    # e = a + c: explained once both are ordered, after the later of the two
    order = json.loads((tmp_path / "x.paralingam.json").read_text())["causal_order_names"]
    later = max("a", "c", key=order.index)
    assert line.endswith(f": e (after {later})")


@pytest.mark.parametrize("name, content, message", [
    ("idx.csv", ",a,b\n0,1,2\n1,3,1\n2,5,7\n3,2,2\n", "no name for column(s) 0 (a table saved with its row index"),
    ("x.csv", "a,,b\n1,0,2\n3,1,1\n5,0,7\n2,1,2\n", "no name for column(s) 1"),
    ("dup.csv", "a,a,b\n1,0,2\n3,1,1\n5,0,7\n2,1,2\n", "column names must be unique: 'a' (columns 0, 1)"),
    ("x.npz", "PK\x03\x04", ".npz files are not read; give a text table"),
    ("X.XLSX", "PK\x03\x04", ".xlsx files are not read; give a text table"),
    ("x.dat", "\udcff\udcfe\x00\x01", "not a UTF-8 text table"),
])
def test_unreadable_tables_exit_2_with_a_message(tmp_path, capsys, name, content, message):
    (tmp_path / name).write_bytes(content.encode("utf-8", "surrogateescape"))
    assert cli.main(["fit", str(tmp_path / name), "--backend", "cpu"]) == 2
    assert message in capsys.readouterr().err


def test_object_npy_exits_2_with_a_message(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.array([[1.0, "a"]], dtype=object), allow_pickle=True)
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu"]) == 2
    assert "cannot read this .npy file as a numeric array" in capsys.readouterr().err


def test_soft_prior_needs_prior_knowledge(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "--soft-prior"])
    assert exc.value.code == 2
    assert "--soft-prior needs --prior-knowledge" in capsys.readouterr().err


def test_prior_knowledge_header_needs_a_data_header(lingam_data, tmp_path, capsys):
    X = lingam_data(3, 200, "sparse", 908)[0]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    (tmp_path / "pk.csv").write_text("a,b,c\n-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
                     "--prior-knowledge", str(tmp_path / "pk.csv")]) == 2
    assert "pk.csv has a header but the data file has none" in capsys.readouterr().err


def test_backslash_t_delimiter_is_a_tab(lingam_data, tmp_path):
    # --delimiter '\t' in a shell passes a backslash and a t
    X = lingam_data(3, 200, "sparse", 909)[0]
    np.savetxt(tmp_path / "x.tsv", X, delimiter="\t")
    target = tmp_path / "out.json"
    assert cli.main(["fit", str(tmp_path / "x.tsv"), "--backend", "cpu", "--delimiter", "\\t",
                     "-o", str(target)]) == 0
    assert json.loads(target.read_text())["causal_order"] == reference.causal_order(X)[0]


@pytest.mark.parametrize("delimiter", ["", ",,", "\\n", '"', "\n"])
def test_bad_delimiter_exits_2_with_a_message(tmp_path, capsys, delimiter):
    (tmp_path / "x.csv").write_text("1,2\n3,1\n5,7\n2,2\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
                     "--delimiter", delimiter]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paralingam: error: the delimiter must be one character"), err
    assert repr(delimiter) in err


def test_field_over_the_csv_limit_exits_2_with_a_message(tmp_path, capsys):
    # an unclosed quote makes the rest of the file one field
    rows = "\n".join(f"{k},{k % 7}" for k in range(30000))
    (tmp_path / "x.csv").write_text('a,b\n"1,2\n' + rows + "\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paralingam: error: ") and "field limit" in err, err
    assert "unclosed quote" in err


@pytest.mark.parametrize("spelling", ["same", "dotted", "symlink", "prior"])
def test_output_onto_an_input_file_exits_2_before_any_work(lingam_data, tmp_path, capsys,
                                                           monkeypatch, spelling):
    X = lingam_data(3, 200, "sparse", 910)[0]
    data = tmp_path / "data.csv"
    np.savetxt(data, X, delimiter=",")
    pk = tmp_path / "pk.csv"
    pk.write_text("-1,-1,-1\n-1,-1,-1\n-1,-1,-1\n")
    output = {"same": data, "dotted": tmp_path / "sub" / ".." / "data.csv",
              "symlink": tmp_path / "link.csv", "prior": pk}[spelling]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.csv").symlink_to(data)
    before = data.read_bytes(), pk.read_bytes()

    def no_work(*args, **kwargs):
        raise AssertionError("the input was read")

    monkeypatch.setattr(cli, "read_table", no_work)
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", str(data), "--backend", "cpu", "--prior-knowledge", str(pk),
                  "-o", str(output)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "paralingam: error: the output file" in err and "would overwrite it" in err, err
    assert (data.read_bytes(), pk.read_bytes()) == before


def test_messages_give_command_line_spellings(lingam_data, tmp_path, capsys):
    X = np.array(lingam_data(4, 300, "sparse", 905)[0])
    X[:, 3] = X[:, 0] + X[:, 1]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d", comments="")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu",
                     "--on-collinear", "error"]) == 2
    err = capsys.readouterr().err
    assert "or pass --on-collinear warn to apply" in err and "on_collinear=" not in err, err
    np.save(tmp_path / "one.npy", X[:, 0])
    assert cli.main(["fit", str(tmp_path / "one.npy"), "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "for a single variable save an array of shape (n_samples, 1)" in err, err
    assert "reshape" not in err, err
