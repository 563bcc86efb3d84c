"""Command line: ``paralingam fit FILE``."""

import argparse
import csv
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np

from ._api import ON_COLLINEAR

EXAMPLE = Path(__file__).parent / "data" / "example.csv"
# formats that are not text tables; named in the error instead of a decoding failure
BINARY_SUFFIXES = (".npz", ".gz", ".bz2", ".xz", ".zip", ".xlsx", ".xls", ".parquet",
                   ".feather", ".h5", ".hdf5", ".pkl", ".pickle")
# Hints in paralingam's error messages that give a Python spelling, as they
# read on the command line.
CLI_SPELLINGS = {
    "on_collinear='warn'": "--on-collinear warn",
    "for a single variable use X.reshape(-1, 1)":
        "for a single variable save an array of shape (n_samples, 1)",
}


def read_table(path, *, delimiter=None):
    """Read a .npy array or a delimited text table.

    A text table keeps its header names when the first row is not numeric.

    Parameters
    ----------
    path : str or pathlib.Path
    delimiter : str, optional
        One character separating the fields of a text table (``"\\t"``, a
        backslash and a t as typed in a shell, counts as a tab); by default
        it is sniffed.

    Returns
    -------
    X : ndarray of float64, shape (n_samples, n_features)
    names : list of str or None

    Raises
    ------
    ValueError
        For a bad delimiter or a file that cannot be read as a numeric table.
    """
    if delimiter is not None:
        delimiter = _checked_delimiter(delimiter)
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    suffix = path.suffix.lower()  # DATA.NPY as data.npy (Windows, instrument exports)
    if suffix == ".npy":
        try:
            return np.load(path, allow_pickle=False), None
        except ValueError as exc:  # object arrays, damaged files
            raise ValueError(f"{path}: cannot read this .npy file as a numeric array ({exc})") \
                from None
    if suffix in BINARY_SUFFIXES:
        raise ValueError(f"{path}: {suffix} files are not read; give a text table "
                         "(.csv, .tsv, .txt) or a .npy array")
    # utf-8-sig: spreadsheet programs start "CSV UTF-8" files with a byte-order mark
    with path.open(newline="", encoding="utf-8-sig") as fh:
        try:
            sample = fh.read(65536)
            fh.seek(0)
            if delimiter is None:
                try:
                    delimiter = csv.Sniffer().sniff(sample, delimiters=",;\t ").delimiter
                except csv.Error:
                    delimiter = ","
            reader = csv.reader(fh, delimiter=delimiter)
            rows = [row for row in reader if row]
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a UTF-8 text table; give a text table "
                             "(.csv, .tsv, .txt) or a .npy array") from None
        except csv.Error as exc:
            # a field over csv's size limit (131072 characters) is, in a table
            # of numbers, the rest of the file after an unclosed quote
            hint = " (an unclosed quote?)" if "field limit" in str(exc) else ""
            raise ValueError(f"{path}: line {reader.line_num}: {exc}{hint}") from None
    if not rows:
        raise ValueError(f"{path} is empty")
    names = None
    if not _numeric_row(rows[0]):
        names = [name.strip() for name in rows[0]]
        rows = rows[1:]
        empty = [j for j, name in enumerate(names) if not name]
        if empty:
            hint = (" (a table saved with its row index, such as pandas' to_csv "
                    "without index=False? remove that column)" if empty == [0] else "")
            raise ValueError(f"{path}: the header has no name for column(s) "
                             f"{', '.join(map(str, empty))}{hint}")
    width = len(names) if names else len(rows[0])
    for lineno, row in enumerate(rows, start=2 if names else 1):
        if len(row) != width:
            raise ValueError(f"{path}: line {lineno} has {len(row)} fields, expected {width}")
    X = np.empty((len(rows), width))
    for lineno, row in enumerate(rows, start=2 if names else 1):
        for j, field in enumerate(row):
            try:
                X[lineno - (2 if names else 1), j] = float(field)
            except ValueError:
                col = names[j] if names else j
                raise ValueError(
                    f"{path}: line {lineno}, column {col!r}: {field!r} is not a number") from None
    return X, names


def _checked_delimiter(delimiter):
    """``delimiter`` as one character csv can split on; ValueError naming it otherwise."""
    if delimiter == "\\t":  # --delimiter '\t' in a shell: a backslash and a t
        return "\t"
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"the delimiter must be one character other than a quote or a "
                         f"line break ('\\t' for a tab); got {delimiter!r}")
    return delimiter


def read_prior_knowledge(path, names, *, delimiter=None):
    """Read a prior-knowledge matrix; a header must repeat the data's column names.

    Shape and values are checked by :func:`paralingam.fit`.
    """
    pk, pk_names = read_table(path, delimiter=delimiter)
    if pk_names is not None and names is None:
        raise ValueError(f"{path} has a header but the data file has none: the header "
                         "cannot be checked against the data's columns (remove it, or "
                         "name the data's columns)")
    if pk_names is not None and pk_names != names:
        k = next((k for k, (a, b) in enumerate(zip(pk_names, names)) if a != b),
                 min(len(pk_names), len(names)))
        got = repr(pk_names[k]) if k < len(pk_names) else "nothing"
        want = repr(names[k]) if k < len(names) else "nothing"
        raise ValueError(f"{path}: header column {k} is {got}, but the data's column {k} "
                         f"is {want}: the prior knowledge must list the data's columns in "
                         "the same order")
    return pk


def _output_path(args):
    """Where ``fit`` writes its JSON result."""
    if args.output:
        return Path(args.output)
    if Path(args.file).resolve() == EXAMPLE.resolve():
        return Path.cwd() / "example.paralingam.json"  # not inside the installed package
    return Path(args.file).with_suffix(".paralingam.json")


def _numeric_row(row):
    try:
        [float(v) for v in row]
    except ValueError:
        return False
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="paralingam", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_fit = sub.add_parser("fit", help="learn the causal order of the columns of FILE")
    p_fit.add_argument("file", nargs="?", default=str(EXAMPLE),
                       help="a .csv/.tsv/.txt table (header optional) or .npy array; "
                            "default: the bundled example")
    p_fit.add_argument("-o", "--output", help="JSON file for the result "
                       "(default: FILE with suffix .paralingam.json)")
    p_fit.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"))
    p_fit.add_argument("--no-threshold", action="store_true",
                       help="compare every pair (same order, slower)")
    p_fit.add_argument("--prior-knowledge", metavar="PK_FILE",
                       help="a (n_features x n_features) table or .npy array of prior "
                            "knowledge as lingam's: entry [i, j] is 1 when column j has a "
                            "directed path to column i, 0 when it has none, -1 or nan when "
                            "unknown; a header, if any, must name the data's columns in order")
    p_fit.add_argument("--soft-prior", action="store_true",
                       help="apply the prior knowledge softly (lingam's "
                            "apply_prior_knowledge_softly)")
    p_fit.add_argument("--on-collinear", default="warn", choices=ON_COLLINEAR,
                       help="exact linear dependencies: warn (default), ignore, or stop "
                            "with an error naming the variables")
    p_fit.add_argument("--delimiter", help="field separator of a text table, one character "
                       "('\\t' for a tab; default: sniffed)")
    p_fit.add_argument("-v", "--verbose", action="store_true", help="log backend choice")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(message)s")

    import paralingam

    if args.soft_prior and not args.prior_knowledge:
        parser.error("--soft-prior needs --prior-knowledge")
    out = _output_path(args)
    # Before any work: "-o data.csv" (or another spelling of the input's path)
    # would replace the data by the result.
    for given, what in ((args.file, "the data file"),
                        (args.prior_knowledge, "the prior-knowledge file")):
        if given and out.exists() and Path(given).exists() and os.path.samefile(out, given):
            parser.error(f"the output file {out} is {what} {given}: writing the result would "
                         "overwrite it; give another --output")
    try:
        X, names = read_table(args.file, delimiter=args.delimiter)
        prior = None
        if args.prior_knowledge:
            prior = read_prior_knowledge(args.prior_knowledge, names, delimiter=args.delimiter)
        result = paralingam.fit(X, backend=args.backend, threshold=not args.no_threshold,
                                feature_names=names, prior_knowledge=prior,
                                apply_prior_knowledge_softly=args.soft_prior,
                                on_collinear=args.on_collinear)
    except (OSError, ValueError, RuntimeError) as exc:
        message = str(exc)
        for python, typed in CLI_SPELLINGS.items():
            message = message.replace(python, typed)
        print(f"paralingam: error: {message}", file=sys.stderr)
        return 2
    try:
        out.write_text(json.dumps(result.to_dict(), indent=1))
    except OSError as exc:
        print(f"paralingam: error: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    st = result.stats
    print(f"causal order ({X.shape[1]} variables, {X.shape[0]} samples, "
          f"backend {st['backend']}, {st['time']['search'] * 1e3:.1f} ms search, "
          f"{100 * st['comparisons_saved']:.0f}% comparisons saved):")
    print("  " + " -> ".join(str(v) for v in result.causal_order_names))
    if st["explained"]:
        label = (lambda i: str(i)) if names is None else (lambda i: names[i])
        print("  fully explained (placed after the root that completed them): "
              + ", ".join(f"{label(v)} (after {label(r)})" for v, r in st["explained"].items()))
    print(f"result written to {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
