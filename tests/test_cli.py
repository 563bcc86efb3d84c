"""The command line: ``paralingam fit FILE``."""

import json
from pathlib import Path

import numpy as np
import pytest

from paralingam import cli
from paralingam.search import reference


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


def test_bundled_example_writes_nothing_unasked(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "--backend", "cpu"]) == 0
    assert list(tmp_path.iterdir()) == []
    assert "result not written (the bundled example): pass -o FILE" in capsys.readouterr().out
    assert cli.main(["fit", "--backend", "cpu", "-o", "ex.json"]) == 0
    out = json.loads((tmp_path / "ex.json").read_text())
    assert sorted(out["causal_order"]) == list(range(8))
    assert [p.name for p in tmp_path.iterdir()] == ["ex.json"]


@pytest.mark.parametrize("content, message", [
    ("a,b,c\n1,2,3\n4,5\n", "line 3 has 2 fields, expected 3"),
    ("a,b\n1,x\n2,3\n3,4\n", "'b': 'x' is not a number"),
    ("a,b\n1,1\n2,1\n3,1\n", "constant columns (zero variance): column 1 ('b')"),
    # names XML (the GraphML output) cannot hold
    ("a\x01,b\x7f,c\n1,2,3\n4,5,6\n2,1,0\n",
     "the header's names hold control characters: column 0 ('a\\x01'), column 1 ('b\\x7f'); "
     "remove them"),
    ("a,d\x00\n1,2\n4,5\n2,1\n", "column 1 ('d\\x00')"),
    # a delimiter the sniffer does not know: the file reads as one column
    ("a|b|c\n0.5|1|2\n4|5|6\n2|1|0\n",
     "'0.5|1|2' is not a number (fields separated by '|'? pass --delimiter '|')"),
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
    ("-1,-1\n-1,-1\n", "pk.csv: prior knowledge of shape (2, 2), but the data have 3 columns: "
                       "it must be (3, 3)"),
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
    # an unnamed first column that is not 0..n-1 is not taken for pandas' index
    ("idx.csv", ",a,b\n5,1,2\n6,3,1\n7,5,7\n8,2,2\n", "no name for column(s) 0 (a table saved with its row index"),
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


# ----------------------------------------------------------------------
# the header rule (issue 20, point 4)
# ----------------------------------------------------------------------

def _fit_json(tmp_path, data, *extra):
    """Run ``fit`` on ``data`` with -o; the JSON result and the captured text."""
    target = tmp_path / "result.json"
    code = cli.main(["fit", str(data), "--backend", "cpu", "-o", str(target), *extra])
    assert code == 0
    return json.loads(target.read_text())


@pytest.mark.parametrize("index", [False, True])
def test_pandas_to_csv_default_header_is_read_as_names(lingam_data, tmp_path, capsys, index):
    pd = pytest.importorskip("pandas")
    X = lingam_data(4, 300, "sparse", 911)[0]
    path = tmp_path / "x.csv"
    pd.DataFrame(X).to_csv(path, index=index)  # header 0,1,2,3 (and ",0,1,2,3" with index)
    out = _fit_json(tmp_path, path)
    text = capsys.readouterr().out
    assert f"read {path}: 300 samples, 4 variables; names 0, 1, 2, 3" in text
    assert ("pandas' default header 0..p-1" in text) != index
    assert ("read as pandas' row index and skipped" in text) == index
    X_read = pd.read_csv(path, index_col=0 if index else None).to_numpy()
    assert X_read.shape == (300, 4)
    assert out["causal_order"] == reference.causal_order(X_read)[0]
    assert out["names"] == ["0", "1", "2", "3"]


def test_numpy_savetxt_default_has_no_header(lingam_data, tmp_path, capsys):
    X = lingam_data(4, 300, "sparse", 912)[0]
    np.savetxt(tmp_path / "x.txt", X)  # "%.18e", blank-separated, no header
    out = _fit_json(tmp_path, tmp_path / "x.txt")
    assert ": 300 samples, 4 variables; no names" in capsys.readouterr().out
    assert out["causal_order"] == reference.causal_order(X)[0] and out["names"] is None


def test_first_data_row_of_whole_numbers_is_a_sample(tmp_path, lingam_data, capsys):
    # whole numbers, but not in increasing order: data, as the rule says
    X = np.array(lingam_data(3, 200, "sparse", 913)[0])
    X[0] = [3.0, -1.0, 2.0]
    (tmp_path / "x.csv").write_text("3,-1,2\n" + "\n".join(
        ",".join(repr(float(v)) for v in row) for row in X[1:]))
    out = _fit_json(tmp_path, tmp_path / "x.csv")
    assert ": 200 samples, 3 variables; no names" in capsys.readouterr().out
    assert out["causal_order"] == reference.causal_order(X)[0]


@pytest.mark.parametrize("first", ["2001,2002,2003,2004", "0,1,2,3"])
def test_labels_like_first_row_is_ambiguous(lingam_data, tmp_path, capsys, first):
    X = lingam_data(4, 300, "sparse", 914)[0]
    if first == "0,1,2,3":  # over whole numbers pandas' labels could be a sample too
        X = np.round(10 * X)
    body = "\n".join(",".join(f"{v:g}" if first == "0,1,2,3" else repr(float(v)) for v in row)
                     for row in X)
    path = tmp_path / "x.csv"
    path.write_text(first + "\n" + body + "\n")
    assert cli.main(["fit", str(path), "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"the first row ({first}) is whole numbers in increasing order" in err
    assert "Pass --header" in err and "--no-header" in err
    assert not (tmp_path / "x.paralingam.json").exists()
    # --header: names; --no-header: one more sample, as asked
    out = _fit_json(tmp_path, path, "--header")
    assert out["names"] == first.split(",")
    assert out["causal_order"] == reference.causal_order(X)[0]
    assert "first row read as column names (--header)" in capsys.readouterr().out
    if first == "0,1,2,3":  # a sample 0,1,2,3 keeps the data fit-able
        out = _fit_json(tmp_path, path, "--no-header")
        assert out["names"] is None
        assert out["causal_order"] == reference.causal_order(np.vstack([[0, 1, 2, 3], X]))[0]
        assert ": 301 samples, 4 variables" in capsys.readouterr().out


def test_no_header_refuses_a_row_of_names(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("a,b\n1,2\n3,1\n5,7\n2,2\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu", "--no-header"]) == 2
    assert "line 1, column 0: 'a' is not a number" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    ("a,b\n1.5,2\n2.5,1_000\n3,4\n", "line 3, column 'b': '1_000' is not a number "
                                    "(digit-group underscores are not read)"),
    ("a,b\n1.5,2\n2.5,\uff13\n3,4\n", "line 3, column 'b': '\uff13' is not a number"),
    ("a,b\n1.5,2\n,\n3,4\n2,9\n", "line 3, column 'a': an empty field (a missing value?)"),
    ("a;b\n1;2\n2,5;3\n3;4\n2;9\n", "line 3, column 'a': '2,5' is not a number "
                                    "(a decimal comma? write a decimal point)"),
])
def test_numbers_python_would_take_are_refused(tmp_path, capsys, content, message):
    (tmp_path / "x.csv").write_text(content, encoding="utf-8")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("header", [False, True])
def test_fixed_width_savetxt_is_read(lingam_data, tmp_path, capsys, header):
    X = lingam_data(4, 300, "sparse", 915)[0]
    path = tmp_path / "x.txt"
    np.savetxt(path, X, fmt="%10.4f", header="  a  b  c  d" if header else "", comments="")
    out = _fit_json(tmp_path, path)
    assert ": 300 samples, 4 variables" in capsys.readouterr().out
    assert out["names"] == (["a", "b", "c", "d"] if header else None)
    assert out["causal_order"] == reference.causal_order(np.loadtxt(path, skiprows=int(header)))[0]


def test_blank_lines_are_skipped_and_named_lines_keep_their_numbers(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("a,b\n\n1,2\n   \n3,1\n5,7\n2,x\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 2
    assert "line 7, column 'b': 'x' is not a number" in capsys.readouterr().err


def test_prior_knowledge_first_row_of_minus_one_zero_one_is_data(lingam_data, tmp_path):
    # "-1,0,1" is whole numbers in increasing order, but in a prior-knowledge
    # matrix it is a row of entries (pandas' labels there are 0..p-1 over p rows)
    X = lingam_data(3, 300, "sparse", 916)[0]
    np.save(tmp_path / "x.npy", X)
    pk = np.array([[-1, 0, 1], [-1, -1, -1], [-1, -1, -1]])
    for text in ("-1,0,1\n-1,-1,-1\n-1,-1,-1\n", "0,1,2\n-1,0,1\n-1,-1,-1\n-1,-1,-1\n",
                 ",0,1,2\n0,-1,0,1\n1,-1,-1,-1\n2,-1,-1,-1\n"):
        (tmp_path / "pk.csv").write_text(text)
        out = _fit_json(tmp_path, tmp_path / "x.npy", "--prior-knowledge",
                        str(tmp_path / "pk.csv"))
        assert out["causal_order"] == reference.causal_order(X, prior_knowledge=pk)[0]


# ----------------------------------------------------------------------
# outputs (issue 20, point 4)
# ----------------------------------------------------------------------

def _no_work(monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("the input was read")

    monkeypatch.setattr(cli, "read_table", no_work)


@pytest.mark.parametrize("option", ["-o", "--dot", "--graphml"])
@pytest.mark.parametrize("where, message", [
    ("missing/out", "the folder {tmp}/missing does not exist"),
    ("/dev/full", "No space left on device"),
    ("folder", "is a folder; give a file name"),
])
def test_unwritable_outputs_exit_2_before_any_work(lingam_data, tmp_path, capsys, monkeypatch,
                                                   option, where, message):
    if where == "/dev/full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 917)[0])
    (tmp_path / "folder").mkdir()
    target = where if where.startswith("/") else str(tmp_path / where)
    _no_work(monkeypatch)
    assert cli.main(["fit", str(tmp_path / "x.npy"), option, target]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paralingam: error: cannot write") or "is a folder" in err, err
    assert message.format(tmp=tmp_path) in err, err


def test_read_only_folder_exits_2_before_any_work(lingam_data, tmp_path, capsys, monkeypatch):
    import os

    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 917)[0])
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who may write anywhere (root)")
        _no_work(monkeypatch)
        assert cli.main(["fit", str(tmp_path / "x.npy"), "-o", str(locked / "r.json")]) == 2
        assert "permission denied" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)


def test_dash_output_is_standard_output(lingam_data, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    X = lingam_data(4, 300, "sparse", 918)[0]
    np.save(tmp_path / "x.npy", X)
    assert cli.main(["fit", "x.npy", "--backend", "cpu", "-o", "-"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)  # nothing but the JSON on stdout
    assert out["causal_order"] == reference.causal_order(X)[0]
    assert "read x.npy: 300 samples, 4 variables" in captured.err  # the summary on stderr
    assert "result written to standard output" in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]  # no file named "-"


def test_two_outputs_on_standard_output_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "-o", "-", "--dot", "-"])
    assert exc.value.code == 2
    assert "only one output can go to standard output" in capsys.readouterr().err


def test_failed_fit_leaves_an_earlier_result_as_it_was(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("a,b\n1,1\n2,1\n3,1\n")
    target = tmp_path / "x.paralingam.json"
    target.write_text("earlier")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 2
    assert target.read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.paralingam.json"]


def test_write_failure_after_the_work_exits_1_and_leaves_nothing_half_written(
        lingam_data, tmp_path, capsys, monkeypatch):
    import errno
    import os

    X = lingam_data(3, 200, "sparse", 919)[0]
    np.save(tmp_path / "x.npy", X)
    target = tmp_path / "r.json"
    target.write_text("earlier")
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    code = cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu", "-o", str(target),
                     "--graphml", str(tmp_path / "g.graphml")])
    assert code == 1
    err = capsys.readouterr().err
    assert f"cannot write the result file {target}: No space left on device" in err
    assert target.read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "x.npy"]


def test_broken_pipe_ends_without_a_traceback(lingam_data, tmp_path):
    import subprocess
    import sys

    np.save(tmp_path / "x.npy", lingam_data(4, 300, "sparse", 920)[0])
    root = Path(cli.__file__).parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from paralingam import cli; sys.exit(cli.main())",
         "fit", str(tmp_path / "x.npy"), "--backend", "cpu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root)
    proc.stdout.close()  # the reader is gone before the first line, as with "| head -0"
    err = proc.stderr.read().decode()
    # a summary cut short: the work goes on, its result is written
    assert proc.wait() == 0, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert json.loads((tmp_path / "x.paralingam.json").read_text())["causal_order"]
    # a result on standard output cut short: exit 141, no traceback either
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from paralingam import cli; sys.exit(cli.main())",
         "fit", str(tmp_path / "x.npy"), "--backend", "cpu", "-o", "-"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_interrupt_exits_130(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "read_table", interrupted)
    assert cli.main(["fit", "--backend", "cpu"]) == 130
    assert capsys.readouterr().err == "paralingam: interrupted\n"


# ----------------------------------------------------------------------
# the complete command line (issue 23, point 4)
# ----------------------------------------------------------------------

def test_no_command_prints_help(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: paralingam") and "fit" in out


def test_version(capsys):
    import paralingam

    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"paralingam {paralingam.__version__}\n"


@pytest.mark.parametrize("argv", [["--help"], ["fit", "--help"]])
def test_help_has_no_restructuredtext_markup(capsys, argv):
    with pytest.raises(SystemExit):
        cli.main(argv)
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and ":mod:" not in out
    assert out.startswith("usage: paralingam")


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_default_adjacency_is_the_estimators_adaptive_lasso(lingam_data, tmp_path, backend):
    import paralingam

    X = lingam_data(8, 500, "sparse", 921)[0]
    np.save(tmp_path / "x.npy", X)
    target = tmp_path / "result.json"
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", backend, "-o",
                     str(target)]) == 0
    out = json.loads(target.read_text())
    model = paralingam.DirectLiNGAM(backend=backend).fit(X)
    B = np.array(out["adjacency_matrix"])
    assert out["adjacency"] == "adaptive_lasso" and out["stats"]["backend"] == backend
    assert out["causal_order"] == model.causal_order_
    np.testing.assert_allclose(B, model.adjacency_matrix_, rtol=1e-12, atol=1e-14)
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", backend, "-o", str(target),
                     "--adjacency", "ols"]) == 0
    B_ols = np.array(json.loads(target.read_text())["adjacency_matrix"])
    np.testing.assert_allclose(B_ols, paralingam.fit(X, backend=backend).adjacency_matrix,
                               rtol=1e-12, atol=1e-14)
    # the lasso drops edges least squares keeps (else the option changes nothing)
    assert np.count_nonzero(B) < np.count_nonzero(B_ols)


def test_bootstrap_probabilities_match_the_estimator(lingam_data, tmp_path, capsys):
    import paralingam

    X = lingam_data(5, 300, "sparse", 922)[0]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,c,d,e", comments="")
    out = _fit_json(tmp_path, tmp_path / "x.csv", "--bootstrap", "6", "--seed", "3")
    X_read = np.loadtxt(tmp_path / "x.csv", delimiter=",", skiprows=1)
    want = paralingam.DirectLiNGAM(backend="cpu", random_state=3).bootstrap(X_read, 6)
    P = want.get_probabilities()
    assert out["bootstrap"]["n_sampling"] == 6 and out["bootstrap"]["seed"] == 3
    np.testing.assert_array_equal(np.array(out["bootstrap"]["probabilities"]), P)
    names = "abcde"
    directions = out["bootstrap"]["directions"]
    assert len(directions) == np.count_nonzero(P)
    for d in directions:
        assert P[names.index(d["to"]), names.index(d["from"])] == d["probability"]
    assert [d["probability"] for d in directions] == sorted(
        (d["probability"] for d in directions), reverse=True)
    text = capsys.readouterr().out
    top = directions[0]
    assert "bootstrap: 6 resamples" in text
    assert f"{top['from']} -> {top['to']}" in text and f"{top['probability']:.1%}" in text


def test_bootstrap_resamples_the_table_itself(lingam_data, tmp_path, capsys):
    # a column one value dominates: the fit's scaled copy holds its other
    # values as subnormals, and the bootstrap must not resample that copy
    # (it stopped with "the edge weight ... exceeds float64")
    import paralingam

    X = lingam_data(4, 300, "sparse", 923)[0].copy()
    X[:, 0] *= 1e-170
    X[0, 0] = 1e150
    np.save(tmp_path / "x.npy", X)
    out = _fit_json(tmp_path, tmp_path / "x.npy", "--adjacency", "ols", "--bootstrap", "5",
                    "--seed", "0")
    want = paralingam.DirectLiNGAM(backend="cpu", adjacency="ols", random_state=0).bootstrap(X, 5)
    np.testing.assert_array_equal(np.array(out["bootstrap"]["probabilities"]),
                                  want.get_probabilities())
    capsys.readouterr()


def test_seed_needs_bootstrap(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "--seed", "1"])
    assert exc.value.code == 2
    assert "--seed needs --bootstrap" in capsys.readouterr().err


def test_dot_and_graphml_describe_the_adjacency_matrix(lingam_data, tmp_path, monkeypatch):
    import sys
    import xml.etree.ElementTree as ET

    monkeypatch.setitem(sys.modules, "networkx", None)  # must work without networkx
    X = lingam_data(6, 400, "sparse", 923)[0]
    names = ["a b", 'q"t', "c", "d", "e", "f"]
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", comments="",
               header=",".join(f'"{n}"' if '"' not in n else '"q""t"' for n in names))
    dot, gml = tmp_path / "g.dot", tmp_path / "g.graphml"
    out = _fit_json(tmp_path, tmp_path / "x.csv", "--dot", str(dot), "--graphml", str(gml),
                    "--lower-limit", "0.05")
    assert out["names"] == names
    B = np.array(out["adjacency_matrix"])
    want = {(names[j], names[i]): B[i, j] for i, j in zip(*np.nonzero(np.abs(B) > 0.05))}
    assert want and len(want) < np.count_nonzero(B) + 1

    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    graph = ET.parse(gml).getroot().find("g:graph", ns)
    assert graph.get("edgedefault") == "directed"
    assert [n.get("id") for n in graph.findall("g:node", ns)] == names
    got = {(e.get("source"), e.get("target")): float(e.find("g:data", ns).text)
           for e in graph.findall("g:edge", ns)}
    assert got == want

    text = dot.read_text()
    assert text.startswith("digraph") and '"q\\"t";' in text and '"a b";' in text
    assert text.count(" -> ") == len(want)
    for (frm, to), w in want.items():
        def q(s):
            return '"' + s.replace('"', '\\"') + '"'
        assert f'{q(frm)} -> {q(to)} [label="{w:.2f}"];' in text


def test_graphml_reads_in_networkx(lingam_data, tmp_path):
    nx = pytest.importorskip("networkx")
    X = lingam_data(5, 300, "sparse", 924)[0]
    np.save(tmp_path / "x.npy", X)
    gml = tmp_path / "g.graphml"
    out = _fit_json(tmp_path, tmp_path / "x.npy", "--graphml", str(gml), "--bootstrap", "3",
                    "--seed", "1")
    G = nx.read_graphml(gml)
    B = np.array(out["adjacency_matrix"])
    P = np.array(out["bootstrap"]["probabilities"])
    assert sorted(G.nodes) == [str(k) for k in range(5)]
    edges = {(int(a), int(b)): d for a, b, d in G.edges(data=True)}
    assert set(edges) == {(j, i) for i, j in zip(*np.nonzero(np.abs(B) > 0.01))}
    for (j, i), d in edges.items():
        assert d["weight"] == B[i, j] and d["probability"] == P[i, j]


def test_svg_without_graphviz_exits_2_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot program
    _no_work(monkeypatch)
    assert cli.main(["fit", "--svg", str(tmp_path / "g.svg")]) == 2
    err = capsys.readouterr().err
    assert "--svg needs Graphviz's dot program, which is not on PATH" in err
    assert "'pip install graphviz' installs only the Python bindings" in err
    assert not (tmp_path / "g.svg").exists()


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_svg_and_png_are_drawn_by_the_dot_program(lingam_data, tmp_path, monkeypatch, fmt):
    # a stand-in dot program that records its arguments and input
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n"
                    "cat > \"$(dirname \"$0\")/input\"\nprintf 'DRAWN'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    np.save(tmp_path / "x.npy", lingam_data(4, 300, "sparse", 925)[0])
    _fit_json(tmp_path, tmp_path / "x.npy", f"--{fmt}", str(tmp_path / f"g.{fmt}"),
              "--dot", str(tmp_path / "g.dot"))
    assert (tmp_path / f"g.{fmt}").read_bytes() == b"DRAWN"
    assert (fake.parent / "args").read_text().strip() == f"-T{fmt}"
    assert (fake.parent / "input").read_text() == (tmp_path / "g.dot").read_text()


def test_failing_dot_program_exits_1_after_writing_the_rest(lingam_data, tmp_path, monkeypatch,
                                                          capsys):
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Format: \"svg\" not recognized' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    np.save(tmp_path / "x.npy", lingam_data(4, 300, "sparse", 925)[0])
    code = cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu", "--svg",
                     str(tmp_path / "g.svg")])
    assert code == 1
    assert "Graphviz's dot program failed (1): Format: \"svg\" not recognized" in \
        capsys.readouterr().err
    assert (tmp_path / "x.paralingam.json").exists() and not (tmp_path / "g.svg").exists()


def test_threads_reach_the_search(lingam_data, tmp_path):
    np.save(tmp_path / "x.npy", lingam_data(40, 1000, "sparse", 926)[0])
    out = _fit_json(tmp_path, tmp_path / "x.npy", "--threads", "1")
    assert set(out["stats"]["threads"]) == {1}


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "argument --threads: must be at least 1; got 0"),
    (["--bootstrap", "x"], "argument --bootstrap: not a whole number: 'x'"),
    (["--lower-limit", "-1"], "argument --lower-limit: must be a finite number >= 0"),
    (["--adjacency", "lasso"], "argument --adjacency: invalid choice: 'lasso'"),
])
def test_bad_option_values_exit_2(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_quiet_prints_nothing_but_writes_the_result(lingam_data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", lingam_data(4, 300, "sparse", 927)[0])
    _fit_json(tmp_path, tmp_path / "x.npy", "--quiet", "--bootstrap", "2")
    assert capsys.readouterr() == ("", "")


def test_output_through_a_symbolic_link_writes_its_target(lingam_data, tmp_path):
    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 928)[0])
    (tmp_path / "real.json").write_text("earlier")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu",
                     "-o", str(tmp_path / "link.json")]) == 0
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "real.json").read_text())["causal_order"]


def test_nan_is_read_and_refused_by_the_fit_naming_the_column(tmp_path, capsys):
    (tmp_path / "x.csv").write_text("a,b\n1.5,2\n2.5,nan\n3,4\n2,9\n")
    assert cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("paralingam: error: ") and "'b'" in err, err


def test_one_dimensional_array_with_prior_knowledge_exits_2(tmp_path, capsys):
    np.save(tmp_path / "one.npy", np.arange(10.0) ** 3)
    (tmp_path / "pk.csv").write_text("-1\n")
    assert cli.main(["fit", str(tmp_path / "one.npy"), "--backend", "cpu",
                     "--prior-knowledge", str(tmp_path / "pk.csv")]) == 2
    assert "save an array of shape (n_samples, 1)" in capsys.readouterr().err


def test_prior_knowledge_reaches_the_adjacency_step(lingam_data, tmp_path):
    import paralingam

    X = lingam_data(5, 400, "sparse", 929)[0]
    np.save(tmp_path / "x.npy", X)
    free = paralingam.DirectLiNGAM(backend="cpu").fit(X).adjacency_matrix_
    i, j = np.unravel_index(np.argmax(np.abs(free)), free.shape)  # the strongest edge j -> i
    pk = -np.ones((5, 5))
    pk[i, j] = 0  # no directed path from j to i
    np.save(tmp_path / "pk.npy", pk)
    # softly: the order keeps j before i, only the adjacency step drops the edge
    out = _fit_json(tmp_path, tmp_path / "x.npy", "--prior-knowledge", str(tmp_path / "pk.npy"),
                    "--soft-prior")
    want = paralingam.DirectLiNGAM(backend="cpu", prior_knowledge=pk,
                                   apply_prior_knowledge_softly=True).fit(X)
    B = np.array(out["adjacency_matrix"])
    assert out["causal_order"] == want.causal_order_
    assert want.causal_order_.index(j) < want.causal_order_.index(i) and B[i, j] == 0
    np.testing.assert_allclose(B, want.adjacency_matrix_, rtol=1e-12, atol=1e-14)


def test_a_named_row_index_column_is_pointed_out(lingam_data, tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    X = lingam_data(3, 200, "sparse", 930)[0]
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame.index.name = "id"
    frame.to_csv(tmp_path / "x.csv")  # header id,a,b,c: the index is a named column
    out = _fit_json(tmp_path, tmp_path / "x.csv")
    assert out["names"] == ["id", "a", "b", "c"]
    assert "paralingam: warning: column 'id' holds 0, 1, ..., n-1, as a row index does" in \
        capsys.readouterr().err


# ----------------------------------------------------------------------
# modes: time series (--lags) and multi-group data (several files)
# ----------------------------------------------------------------------

def _var_series(T, seed, p=4):
    """A VAR(2) series with instantaneous effects and non-Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = np.zeros((T, p))
    E = rng.uniform(-1, 1, size=(T, p)) ** 3
    for t in range(2, T):
        X[t] = 0.4 * X[t - 1] - 0.2 * X[t - 2] + E[t]
        X[t, 1] += 0.8 * X[t, 0]
        X[t, 2] += 0.5 * X[t, 1] + 0.3 * X[t - 1, 3]
    return X


def _write(path, X, names):
    np.savetxt(path, X, delimiter=",", header=",".join(names), comments="")
    return np.loadtxt(path, delimiter=",", skiprows=1)  # what the command line reads


@pytest.mark.parametrize("options, kwargs", [
    ([], {}),
    (["--criterion", "aic"], {"criterion": "aic"}),
    (["--criterion", "none", "--no-prune"], {"criterion": None, "prune": False}),
    (["--adjacency", "ols", "--no-prune", "--criterion", "none"],
     {"criterion": None, "prune": False, "ols": True}),
])
def test_time_series_mode_equals_varlingam(tmp_path, options, kwargs):
    import paralingam

    names = ["a", "b", "c", "d"]
    X = _write(tmp_path / "ts.csv", _var_series(400, 941), names)
    out = _fit_json(tmp_path, tmp_path / "ts.csv", "--lags", "3", *options)
    ols = kwargs.pop("ols", False)
    if ols:
        kwargs["lingam_model"] = paralingam.DirectLiNGAM(backend="cpu", adjacency="ols")
    want = paralingam.VARLiNGAM(lags=3, backend="cpu", **kwargs).fit(X)
    assert out["model"] == "VARLiNGAM"
    assert out["causal_order"] == want.causal_order_
    assert out["causal_order_names"] == [names[i] for i in want.causal_order_]
    assert out["lags"] == len(want.adjacency_matrices_) - 1
    np.testing.assert_array_equal(np.array(out["adjacency_matrices"]), want.adjacency_matrices_)
    if kwargs.get("criterion") is None and "criterion" in kwargs:
        assert out["lags"] == 3
    if ols:  # least squares: B0 dense below the order (else the option changes nothing)
        B0 = np.array(out["adjacency_matrices"][0])
        assert np.count_nonzero(B0) == 6


def test_time_series_bootstrap_and_graphs(tmp_path, capsys):
    import xml.etree.ElementTree as ET

    import paralingam

    names = ["a", "b", "c", "d"]
    X = _write(tmp_path / "ts.csv", _var_series(300, 942), names)
    dot, gml = tmp_path / "g.dot", tmp_path / "g.graphml"
    out = _fit_json(tmp_path, tmp_path / "ts.csv", "--lags", "2", "--criterion", "none",
                    "--bootstrap", "4", "--seed", "5", "--dot", str(dot), "--graphml", str(gml))
    want = paralingam.VARLiNGAM(lags=2, criterion=None, random_state=5, backend="cpu")
    P = want.bootstrap(X, 4).get_probabilities()  # one matrix per lag
    np.testing.assert_array_equal(np.array(out["bootstrap"]["probabilities"]), np.array(P))
    assert "bootstrap: 4 resamples" in capsys.readouterr().out

    # lagged nodes named x(t-k); an edge per |coefficient| > 0.01 of B0..B2
    label = {(tau, j): f"{names[j]}(t)" if tau == 0 else f"{names[j]}(t-{tau})"
             for tau in range(3) for j in range(4)}
    edges = {(label[tau, j], label[0, i]): B[i, j]
             for tau, B in enumerate(np.array(out["adjacency_matrices"]))
             for i, j in zip(*np.nonzero(np.abs(B) > 0.01))}
    assert any(frm.endswith("(t-2)") for frm, _ in edges)
    text = dot.read_text()
    assert text.count(" -> ") == len(edges)
    for (frm, to), w in edges.items():
        assert f'"{frm}" -> "{to}" [label="{w:.2f} (' in text
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    graph = ET.parse(gml).getroot().find("g:graph", ns)
    assert [n.get("id") for n in graph.findall("g:node", ns)] == list(label.values())
    got = {(e.get("source"), e.get("target")) for e in graph.findall("g:edge", ns)}
    assert got == set(edges)


def test_too_few_samples_for_the_lags_exit_2(tmp_path, capsys):
    _write(tmp_path / "ts.csv", _var_series(40, 943), ["a", "b", "c", "d"])
    assert cli.main(["fit", str(tmp_path / "ts.csv"), "--lags", "8", "--backend", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "40 samples: too few to fit a VAR with 8 lags of 4 variables" in err
    assert not (tmp_path / "ts.paralingam.json").exists()


def _groups(tmp_path, lingam_data, sizes=(300, 200, 250), names="abcde"):
    paths, data = [], []
    for g, n in enumerate(sizes):
        path = tmp_path / f"group{g}.csv"
        data.append(_write(path, lingam_data(len(names), n, "sparse", 950 + g)[0], list(names)))
        paths.append(path)
    return paths, data


def test_multi_group_equals_multigroupdirectlingam(lingam_data, tmp_path, capsys):
    import paralingam

    paths, data = _groups(tmp_path, lingam_data)
    target = tmp_path / "r.json"
    assert cli.main(["fit", *map(str, paths), "--backend", "cpu", "-o", str(target),
                     "--bootstrap", "3", "--seed", "4"]) == 0
    out = json.loads(target.read_text())
    want = paralingam.MultiGroupDirectLiNGAM(backend="cpu").fit(data)
    assert out["model"] == "MultiGroupDirectLiNGAM"
    assert out["causal_order"] == want.causal_order_
    assert [g["file"] for g in out["groups"]] == [str(p) for p in paths]
    assert [g["n_samples"] for g in out["groups"]] == [300, 200, 250]
    for g, B in zip(out["groups"], want.adjacency_matrices_):
        np.testing.assert_array_equal(np.array(g["adjacency_matrix"]), B)
    boots = paralingam.MultiGroupDirectLiNGAM(backend="cpu", random_state=4).bootstrap(data, 3)
    for g, res in zip(out["groups"], boots):
        np.testing.assert_array_equal(np.array(g["bootstrap"]["probabilities"]),
                                      res.get_probabilities())
    text = capsys.readouterr().out
    assert "3 groups, one causal order" in text and f"bootstrap of {paths[1]}" in text


def test_multi_group_graphs_have_an_edge_per_group(lingam_data, tmp_path):
    import xml.etree.ElementTree as ET

    paths, _ = _groups(tmp_path, lingam_data, sizes=(300, 200))
    gml, dot = tmp_path / "g.graphml", tmp_path / "g.dot"
    out = _fit_json(tmp_path, paths[0], str(paths[1]), "--graphml", str(gml), "--dot", str(dot))
    want = {(g["file"], "abcde"[j], "abcde"[i])
            for g in out["groups"] for i, j in
            zip(*np.nonzero(np.abs(np.array(g["adjacency_matrix"])) > 0.01))}
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    edges = ET.parse(gml).getroot().find("g:graph", ns).findall("g:edge", ns)
    got = {(e.find("g:data[@key='group']", ns).text, e.get("source"), e.get("target"))
           for e in edges}
    assert got == want and len(edges) == len(want)
    assert dot.read_text().count(" -> ") == len(want)


@pytest.mark.parametrize("bad, message", [
    ("a,b,c,d\n", "bad.csv has 4 columns but {first} has 5: the groups must have the same"),
    ("a,b,x,d,e\n", "bad.csv: column 2 is 'x' but {first}'s column 2 is 'c'"),
    (None, "{first} has a header but {bad} has none"),
])
def test_multi_group_mismatching_columns_exit_2_naming_the_file(lingam_data, tmp_path, capsys,
                                                                bad, message):
    paths, _ = _groups(tmp_path, lingam_data, sizes=(300, 200))
    X = lingam_data(5, 100, "sparse", 959)[0]
    path = tmp_path / "bad.csv"
    if bad is None:
        np.savetxt(path, X, delimiter=",")
    else:
        width = bad.count(",") + 1
        np.savetxt(path, X[:, :width], delimiter=",", header=bad.strip(), comments="")
    assert cli.main(["fit", str(paths[0]), str(path), str(paths[1]), "--backend", "cpu"]) == 2
    assert message.format(first=paths[0], bad=path) in capsys.readouterr().err
    assert not (tmp_path / "group0.paralingam.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["a.csv", "b.csv", "--lags", "2"], "--lags fits one time series; got 2 data files"),
    (["a.csv", "--criterion", "aic"], "--criterion needs --lags"),
    (["a.csv", "--no-prune"], "--no-prune needs --lags"),
    (["a.csv", "--lags", "2", "--prior-knowledge", "pk.csv"],
     "--prior-knowledge does not apply to --lags"),
    (["a.csv", "b.csv", "--no-threshold"], "--no-threshold does not apply to multi-group"),
    (["a.csv", "b.csv", "--on-collinear", "error"], "--on-collinear does not apply"),
    (["a.csv", "b.csv", "--devices", "0,1"], "--devices does not apply to multi-group"),
])
def test_options_of_another_mode_exit_2_before_any_work(capsys, monkeypatch, argv, message):
    _no_work(monkeypatch)
    assert cli.main(["fit", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("value", ["x", "0,,1", "1.5", "-1", "0;1", "0,0"])
def test_bad_devices_exit_2_naming_the_option(capsys, value):
    with pytest.raises(SystemExit) as exc:
        cli.main(["fit", "a.csv", "--devices", value])
    assert exc.value.code == 2
    assert "--devices" in capsys.readouterr().err


@pytest.mark.parametrize("value, expected", [("all", "all"), ("0,1", [0, 1]), ("2", [2])])
def test_devices_reach_the_fit_options(value, expected):
    args = cli.build_parser().parse_args(["fit", "a.csv", "--devices", value])
    assert cli._fit_options(args)["devices"] == expected


def test_devices_with_the_cpu_backend_exit_2_naming_them(tmp_path, capsys, monkeypatch):
    np.savetxt(tmp_path / "x.csv", np.random.default_rng(0).laplace(size=(50, 3)), delimiter=",")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["fit", "x.csv", "--no-header", "--backend", "cpu", "--devices", "0,1",
                     "-o", "-"]) == 2
    err = capsys.readouterr().err
    assert "--devices selects GPUs, but --backend is cpu" in err


def test_help_lists_the_modes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("one FILE is DirectLiNGAM", "--lags K is a time series (VARLiNGAM)",
                  "several FILEs with the same columns are groups", "--criterion",
                  "--no-prune"):
        assert words in text


# ----------------------------------------------------------------------
# progress
# ----------------------------------------------------------------------

@pytest.fixture
def terminal(monkeypatch):
    """Standard error seen as a terminal; the plain progress line, drawn at once."""
    import sys

    from paralingam import _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setattr(_progress, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(_progress, "AUTO_DELAY_S", 0.0)


@pytest.mark.parametrize("mode", [[], ["--lags", "1"], ["multi"]])
def test_bootstrap_progress_on_a_terminal_and_not_under_quiet(lingam_data, tmp_path, capsys,
                                                              terminal, mode):
    if mode == ["multi"]:
        paths, _ = _groups(tmp_path, lingam_data, sizes=(200, 150))
        files, mode = [str(paths[1])], []
        first = paths[0]
    else:
        first = tmp_path / "x.csv"
        _write(first, _var_series(200, 944), list("abcd"))
        files = []
    _fit_json(tmp_path, first, *files, *mode, "--bootstrap", "3")
    assert "bootstrap: 3/3 resamples (100%)" in capsys.readouterr().err
    _fit_json(tmp_path, first, *files, *mode, "--bootstrap", "3", "--quiet")
    assert capsys.readouterr() == ("", "")


def test_no_progress_in_a_pipeline(lingam_data, tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert not sys.stderr.isatty()
    np.save(tmp_path / "x.npy", lingam_data(4, 200, "sparse", 945)[0])
    _fit_json(tmp_path, tmp_path / "x.npy", "--bootstrap", "3")
    assert "resamples (" not in capsys.readouterr().err


def test_search_progress_on_a_terminal_and_not_under_quiet(lingam_data, tmp_path, capsys, terminal):
    np.save(tmp_path / "x.npy", lingam_data(6, 300, "sparse", 946)[0])
    _fit_json(tmp_path, tmp_path / "x.npy", "--backend", "cpu")
    assert "search: 6/6 variables (100%)" in capsys.readouterr().err
    _fit_json(tmp_path, tmp_path / "x.npy", "--backend", "cpu", "--quiet")
    assert capsys.readouterr() == ("", "")


# ----------------------------------------------------------------------
# Found by a review of the command line (each failed before its fix)
# ----------------------------------------------------------------------

@pytest.mark.parametrize("delimiter", ["\t", ";", ","])
@pytest.mark.parametrize("header", [False, True])
def test_wide_tables_are_split_by_their_own_delimiter(tmp_path, delimiter, header):
    # 3000 columns fill the sniffer's old 64 KiB sample in under two lines;
    # it failed on the cut line, fell back to a comma, and a tab or semicolon
    # table was one field per line
    X = np.random.default_rng(1).uniform(size=(12, 3000))
    path = tmp_path / "wide.txt"
    np.savetxt(path, X, delimiter=delimiter, comments="",
               header=delimiter.join(f"g{i}" for i in range(3000)) if header else "")
    table = cli.read_table(path)
    np.testing.assert_array_equal(table.X, X)
    assert table.names == ([f"g{i}" for i in range(3000)] if header else None)


@pytest.mark.parametrize("spec, message", [
    ("/", "/ is a folder, not a data file"), (".", ". is a folder, not a data file"),
    ("", "an empty data file name"), ("/no-such-folder/x.csv", "no such file: /no-such-folder/x.csv"),
])
def test_input_paths_that_name_no_file_exit_2(capsys, spec, message):
    # ("/" and "" were tracebacks from the default result path; a file in a
    # missing folder was reported as an unwritable result)
    assert cli.main(["fit", spec]) == 2
    assert capsys.readouterr().err.strip().endswith(message)


@pytest.mark.parametrize("extra, message", [
    (["-o", ""], "--output is empty"),
    (["--dot", ""], "--dot is empty"),
    (["-o", "same.json", "--dot", "same.json"], "--output and --dot name the same file"),
    (["--dot", "g.txt", "--graphml", "./g.txt"], "--dot and --graphml name the same file"),
    (["-o", "results/"], "results/ is a folder; give a file name"),
    (["--bootstrap", "2", "--seed", "-1"], "argument --seed: must be from 0 to 2**32 - 1"),
    (["--bootstrap", "2", "--seed", str(2**32)], "argument --seed: must be from 0 to 2**32 - 1"),
    (["--threads", "100000"], "argument --threads: must be at most 1024"),
])
def test_output_and_option_mistakes_exit_2_before_any_work(tmp_path, capsys, monkeypatch,
                                                           extra, message):
    monkeypatch.chdir(tmp_path)
    np.savetxt("x.csv", np.random.default_rng(0).laplace(size=(50, 3)), delimiter=",",
               header="a,b,c", comments="")
    try:  # (argparse's errors exit, paralingam's return the code)
        code = cli.main(["fit", "x.csv", "--backend", "cpu"] + extra)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "same.json").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("name, content, message", [
    ("zero.npy", b"", "cannot read this .npy file as a numeric array (No data left in file)"),
    ("fake.npy", b"1,2,3\n", "it holds Python objects, or is not a .npy file"),
])
def test_damaged_npy_files_exit_2(tmp_path, capsys, name, content, message):
    (tmp_path / name).write_bytes(content)
    assert cli.main(["fit", str(tmp_path / name)]) == 2
    assert message in capsys.readouterr().err


def test_a_structured_npy_array_exits_2_naming_its_fields(tmp_path, capsys):
    np.save(tmp_path / "s.npy", np.zeros(5, dtype=[("a", float), ("b", float)]))
    assert cli.main(["fit", str(tmp_path / "s.npy")]) == 2
    assert "a structured array (fields a, b); save a plain 2-D numeric array" in \
        capsys.readouterr().err


def test_a_bad_group_file_is_named(lingam_data, tmp_path, capsys):
    X = lingam_data(3, 200, "sparse", 904)[0]
    for name in ("g1.csv", "g2.csv"):
        np.savetxt(tmp_path / name, X, delimiter=",", header="a,b,c", comments="")
    bad = X.copy()
    bad[5, 1] = np.nan
    np.savetxt(tmp_path / "g3.csv", bad, delimiter=",", header="a,b,c", comments="")
    files = [str(tmp_path / n) for n in ("g1.csv", "g2.csv", "g3.csv")]
    assert cli.main(["fit", *files, "--backend", "cpu", "-o", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert f"{files[2]}: NaN, missing or infinite values" in err and "'b'" in err


def test_an_unclosed_quote_is_reported_where_its_record_starts(tmp_path, capsys):
    path = tmp_path / "q.csv"
    path.write_text("a,b,c\n\"1,2,3\n" + "1,2,3\n" * 200)
    assert cli.main(["fit", str(path)]) == 2
    assert f"{path}: line 2 has 1 fields, expected 3 (an unclosed quote?)" in \
        capsys.readouterr().err


@pytest.mark.parametrize("delimiter", [",", " "])
def test_savetxt_header_comment_mark_is_not_part_of_a_name(tmp_path, delimiter):
    X = np.random.default_rng(2).laplace(size=(20, 3))
    np.savetxt(tmp_path / "x.txt", X, delimiter=delimiter, header=delimiter.join("abc"))
    table = cli.read_table(tmp_path / "x.txt")
    assert table.names == ["a", "b", "c"]
    np.testing.assert_allclose(table.X, X, rtol=1e-15)


def test_quoted_names_of_a_blank_separated_table(tmp_path):
    # R's write.table: quoted names, one with a blank
    (tmp_path / "r.txt").write_text('"body mass" "b" "c"\n1 2 3\n4 5 7\n2 2 1\n')
    table = cli.read_table(tmp_path / "r.txt")
    assert table.names == ["body mass", "b", "c"]
    (tmp_path / "bad.txt").write_text('"body mass "b" "c"\n1 2 3\n')
    with pytest.raises(ValueError, match="line 1: an unclosed quote"):
        cli.read_table(tmp_path / "bad.txt")


def test_a_long_list_of_explained_variables_is_cut_in_the_warning():
    from paralingam import _api

    text = _api._listed([str(i) for i in range(2951)], "stats['explained']")
    assert text.startswith("0, 1, 2,") and text.endswith(", 19, ... and 2931 more "
                                                         "(stats['explained'])")
    assert _api._listed(["a", "b"], "x") == "a, b"
    # the warning formats only the pairs it names, and counts the rest
    explained = {v: 0 for v in range(1, 2952)}
    with pytest.warns(_api.DegenerateDataWarning) as caught:
        _api._warn_explained(explained, None)
    message = str(caught[0].message)
    assert message.startswith("2951 variable(s) are fully explained")
    assert "1 (after 0), 2 (after 0)," in message and "20 (after 0), ... and 2931 more" in message
    assert "21 (after 0)" not in message


def test_warnings_print_as_the_command_lines_own_lines(tmp_path):
    import subprocess
    import sys

    from child_process import child_env

    X = np.random.default_rng(930).laplace(size=(400, 4))
    np.savetxt(tmp_path / "x.csv", np.column_stack([X, X[:, 0] + X[:, 1]]), delimiter=",",
               header="a,b,c,d,e", comments="")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from paralingam import cli; sys.exit(cli.main())",
         "fit", str(tmp_path / "x.csv"), "--backend", "cpu"],
        capture_output=True, text=True, cwd=tmp_path, env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [s for s in proc.stderr.splitlines() if "fully explained" in s]
    assert lines and lines[0].startswith("paralingam: warning: 1 variable(s) are fully explained")
    # not Python's format: no file and line of the caller, no repeated source line
    assert "DegenerateDataWarning" not in proc.stderr and "sys.exit" not in proc.stderr
    # main restores Python's format when it returns
    import warnings

    before = warnings.formatwarning
    assert cli.main(["fit", str(tmp_path / "missing.csv")]) != 0
    assert warnings.formatwarning is before


# --- outputs that fail outside the result files ---------------------------------------------------

def test_a_summary_that_cannot_be_written_stops_but_the_result_is_written(lingam_data, tmp_path,
                                                                          capsys, monkeypatch):
    # "> log" on a full disk: the summary's first line fails; the work goes on
    import errno
    import sys

    class FullStream:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    np.save(tmp_path / "x.npy", lingam_data(4, 300, "sparse", 931)[0])
    target = tmp_path / "r.json"
    monkeypatch.setattr(sys, "stdout", FullStream())
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu", "-o", str(target)]) == 0
    err = capsys.readouterr().err
    assert ("paralingam: warning: the summary could not be written to standard output (No space "
            "left on device); it stops here") in err
    assert err.count("warning: the summary") == 1 and "Traceback" not in err
    assert json.loads(target.read_text())["causal_order"]


def test_result_to_a_closed_standard_output_exits_2_before_any_work(lingam_data, tmp_path,
                                                                    capsys, monkeypatch):
    import sys

    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 932)[0])
    _no_work(monkeypatch)
    monkeypatch.setattr(sys, "stdout", None)  # (python started with >&-)
    assert cli.main(["fit", str(tmp_path / "x.npy"), "-o", "-"]) == 2
    assert ("paralingam: error: cannot write the result file to standard output: it is closed"
            in capsys.readouterr().err)


def test_a_pipe_as_input_needs_a_named_output(tmp_path, capsys, monkeypatch):
    # "fit /dev/stdin" or "fit <(...)": no default result file beside a pipe
    import os

    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)  # (never opened: the error comes first)
    _no_work(monkeypatch)
    assert cli.main(["fit", str(fifo)]) == 2
    err = capsys.readouterr().err
    assert f"{fifo} is not a regular file (a pipe or a device)" in err
    assert "pass -o FILE, or -o - for standard output" in err


def test_a_folder_that_takes_no_new_file_exits_2_before_any_work(lingam_data, tmp_path, capsys,
                                                                 monkeypatch):
    # /proc or /sys as root: access() allows, the temporary file does not
    import errno
    import tempfile

    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 933)[0])

    def refused(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    _no_work(monkeypatch)
    monkeypatch.setattr(tempfile, "mkstemp", refused)
    assert cli.main(["fit", str(tmp_path / "x.npy"), "-o", str(tmp_path / "r.json")]) == 2
    assert (f"cannot write the result file {tmp_path / 'r.json'}: Read-only file system"
            in capsys.readouterr().err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


def test_a_constant_column_in_a_resample_is_named_from_the_header(tmp_path, capsys):
    rng = np.random.default_rng(934)
    X = rng.laplace(size=(200, 3))
    X[:, 2] = 0.0
    X[[5, 77, 150], 2] = 1.0  # three ones: some resample draws none of them
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b,rare", comments="")
    code = cli.main(["fit", str(tmp_path / "x.csv"), "--backend", "cpu", "--bootstrap", "100",
                     "--seed", "0", "-o", str(tmp_path / "r.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert "has constant columns: column 2 ('rare') (the resample drew only rows where it is 0" \
        in err
    assert "197 of the data's 200 rows" in err


def test_text_options_on_a_npy_file_are_reported(lingam_data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", lingam_data(3, 200, "sparse", 935)[0])
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu", "--no-header",
                     "--delimiter", ";", "-o", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert ("paralingam: warning: --delimiter and --header/--no-header do not apply to a .npy "
            "file") in err
    assert cli.main(["fit", str(tmp_path / "x.npy"), "--backend", "cpu",
                     "-o", str(tmp_path / "r.json")]) == 0
    assert "warning" not in capsys.readouterr().err
