"""The paralingam command line.

Usage: paralingam fit [FILE] [options]. Run "paralingam fit --help" for the
options, and see docs/user_guide/command_line.rst for the rules (the header
rule, output paths, exit codes).

Exit codes: 0 done; 1 the work was done but an output could not be written
(or Graphviz failed); 2 a bad option or input (nothing was computed, or the
data were refused); 130 interrupted (Ctrl-C); 141 a result written to
standard output was cut off (a broken pipe: "paralingam fit x.csv -o - | head").
A summary cut off ("paralingam fit x.csv | head -1") does not stop the work
and does not change the exit code.

Text tables are read with Python's csv module (quoting, the sniffed
delimiter) and converted by numpy in one call; pandas stays optional. Which
first row is a header is decided here, by a rule that never drops or
invents a row silently (see :func:`read_table`).
"""

import argparse
import csv
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
import warnings
from dataclasses import dataclass, field
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
    "adjacency='ols'": "--adjacency ols",
    "for a single variable use X.reshape(-1, 1)":
        "for a single variable save an array of shape (n_samples, 1)",
}
# A number as a table may spell it. Python's float() also takes "1_000",
# non-ASCII digits and "0x"-free oddities; a table that holds those is more
# likely damaged than meant, so they are refused with the line and column.
_NUMBER = re.compile(r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)\s*",
                     re.IGNORECASE | re.ASCII)
_INTEGER = re.compile(r"\s*[+-]?\d+\s*", re.ASCII)

GRAPHVIZ_FORMATS = ("svg", "png")
GRAPHVIZ_HINT = ("install Graphviz (Debian/Ubuntu: apt install graphviz; macOS: brew install "
                 "graphviz; conda install graphviz); note that 'pip install graphviz' installs "
                 "only the Python bindings, not the dot program. --dot FILE writes the graph "
                 "without it")

# Exit codes (see the module docstring and docs/user_guide/command_line.rst).
EXIT_OK, EXIT_OUTPUT, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 0, 1, 2, 130, 141


class CLIError(Exception):
    """A problem the user can fix; printed as ``paralingam: error: ...``."""

    def __init__(self, message, code=EXIT_USAGE):
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------
# reading tables
# ----------------------------------------------------------------------

@dataclass
class Table:
    """A table read by :func:`read_table`.

    Attributes
    ----------
    X : ndarray of float64, shape (n_samples, n_features)
    names : list of str or None
        Column names from a header row, None without one.
    notes : list of str
        What the reader decided and why (header row, skipped index column),
        for the printed summary.
    """

    X: np.ndarray
    names: list = None
    notes: list = field(default_factory=list)


def read_table(path, *, delimiter=None, header=None, square=False):
    """Read a .npy array or a delimited text table.

    The header rule, which never drops or invents a row silently:

    * ``header=True`` / ``False`` (``--header`` / ``--no-header``): the first
      row is names / a sample.
    * Otherwise a first row with a field that is not a number is a header.
    * A first row of numbers is a sample, unless it holds whole numbers in
      increasing order (``0,1,2,3`` or ``2001,2002,...``), which look like
      column labels. Those are pandas' labels, read as names, when they are
      exactly ``0..p-1`` and the other rows are not all whole numbers (what
      ``pd.DataFrame(X).to_csv()`` writes); any other such row is ambiguous
      and raises ValueError asking for ``--header`` or ``--no-header``.
    * With ``square=True`` (a prior-knowledge matrix, whose entries are -1, 0
      or 1) a numeric first row is a header only when it is ``0..p-1`` and
      the table has ``p + 1`` rows.
    * A header whose first name is empty over a first column holding
      ``0..n-1`` (or, with ``square``, the header's names) is pandas' row
      index (``to_csv()`` without ``index=False``): that column is skipped
      and the skip is reported in :attr:`Table.notes`.

    Fields are split with the sniffed (or given) delimiter; a table separated
    by blanks (``np.savetxt``'s default, fixed-width columns) is split on
    runs of blanks. Numbers are plain decimal numbers (``1``, ``-2.5``,
    ``3e-4``, ``nan``, ``inf``); ``1_000`` and other spellings Python
    accepts are refused with the line and column.

    Parameters
    ----------
    path : str or pathlib.Path
    delimiter : str, optional
        One character separating the fields of a text table (``"\\t"``, a
        backslash and a t as typed in a shell, counts as a tab); by default
        it is sniffed.
    header : bool or None
        Force the first row to be read as names (True) or as a sample
        (False); None applies the rule above.
    square : bool
        The table is a (p x p) matrix (prior knowledge); see above.

    Returns
    -------
    Table

    Raises
    ------
    FileNotFoundError
        For a missing file.
    ValueError
        For a bad delimiter, an ambiguous first row or a file that cannot be
        read as a numeric table; the message names the line and column.
    """
    if delimiter is not None:
        delimiter = _checked_delimiter(delimiter)
    path = _checked_input_path(path)
    suffix = path.suffix.lower()  # DATA.NPY as data.npy (Windows, instrument exports)
    if suffix == ".npy":
        try:
            X = np.load(path, allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:  # object arrays, damaged files
            why = ("it holds Python objects, or is not a .npy file" if "allow_pickle" in str(exc)
                   else str(exc) or type(exc).__name__)
            raise ValueError(f"{path}: cannot read this .npy file as a numeric array ({why})") \
                from None
        if X.dtype.names is not None:
            raise ValueError(f"{path}: a structured array (fields {', '.join(X.dtype.names[:5])}"
                             f"{', ...' if len(X.dtype.names) > 5 else ''}); save a plain 2-D "
                             "numeric array (n_samples, n_features)")
        given = [option for option, value in (("--delimiter", delimiter),
                                              ("--header/--no-header", header))
                 if value is not None]
        notes = ([f"warning: {' and '.join(given)} {'does' if len(given) == 1 else 'do'} not "
                  f"apply to a .npy file (it has no text to split, and no names)"]
                 if given else [])
        return Table(X, None, notes)
    if suffix in BINARY_SUFFIXES:
        raise ValueError(f"{path}: {suffix} files are not read; give a text table "
                         "(.csv, .tsv, .txt) or a .npy array")
    lines, rows = _tokenized(path, delimiter)
    if not rows:
        raise ValueError(f"{path} is empty")
    notes = []
    is_header = _header_decision(path, rows, header, square, notes)
    names = None
    if is_header:
        names = [name.strip() for name in rows[0]]
        if names and names[0].startswith("#"):
            # np.savetxt(header=...) writes "# a,b,c" (its comment mark)
            names[0] = names[0][1:].strip()
            if not names[0] and len(rows) > 1 and len(names) == len(rows[1]) + 1:
                names = names[1:]  # ("# a b c", blank-separated: the mark is a field)
            notes.append("the header's leading '#' (np.savetxt's comment mark) is not part "
                         "of the first name")
        rows, lines = rows[1:], lines[1:]
        if not rows:
            raise ValueError(f"{path} has a header row but no data rows")
        names, rows = _without_index_column(path, names, rows, square, notes)
        empty = [j for j, name in enumerate(names) if not name]
        if empty:
            hint = (" (a table saved with its row index, such as pandas' to_csv "
                    "without index=False? remove that column)" if empty == [0] else "")
            raise ValueError(f"{path}: the header has no name for column(s) "
                             f"{', '.join(map(str, empty))}{hint}")
        # (a NUL or escape byte: XML, the GraphML output, has no way to write them)
        control = [(j, name) for j, name in enumerate(names)
                   if any(unicodedata.category(c) == "Cc" for c in name)]
        if control:
            raise ValueError(f"{path}: the header's names hold control characters: "
                             + ", ".join(f"column {j} ({name!r})" for j, name in control[:5])
                             + ("; an unclosed quote?" if any("\n" in name for _, name in control)
                                else "; remove them"))
    width = len(names) if names else len(rows[0])
    for lineno, row in zip(lines, rows):
        if len(row) != width:
            hint = " (an unclosed quote?)" if any("\n" in f for f in row) else ""
            raise ValueError(f"{path}: line {lineno} has {len(row)} fields, expected "
                             f"{width}{hint}")
    X = _numbers(path, rows, lines, names)
    if X.shape[0] > 2:
        # pandas' to_csv() with a named index writes it as a named column
        counting = np.flatnonzero((X == np.arange(X.shape[0])[:, None]).all(axis=0))
        for j in counting:
            col = repr(names[j]) if names else str(j)
            notes.append(f"warning: column {col} holds 0, 1, ..., n-1, as a row index does; "
                         "if it is one, remove it (it is fitted as a variable)")
    return Table(X, names, notes)


def _checked_input_path(spec, what="data file"):
    """``spec`` as a Path to a file; FileNotFoundError or ValueError naming it otherwise."""
    if not str(spec).strip():
        raise ValueError(f"an empty {what} name")
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {spec}")
    if path.is_dir():
        raise ValueError(f"{spec} is a folder, not a {what}")
    return path


def _tokenized(path, delimiter):
    """``(line_numbers, rows)`` of the non-blank lines of a text table."""
    # utf-8-sig: spreadsheet programs start "CSV UTF-8" files with a byte-order mark
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a UTF-8 text table; give a text table "
                         "(.csv, .tsv, .txt) or a .npy array") from None
    if delimiter is None:
        sample = _sniff_sample(text)
        if not any(c in sample for c in ",;\t"):
            # blanks only (np.savetxt's default; fixed-width columns, whose
            # leading blanks vary from line to line and defeat the sniffer)
            delimiter = " "
        else:
            try:
                delimiter = csv.Sniffer().sniff(sample, delimiters=",;\t ").delimiter
            except csv.Error:  # nothing the sniffer recognises
                delimiter = ","
    if delimiter == " ":
        # Blank-separated, as np.savetxt writes by default; fixed-width formats
        # ("%10.4f") pad with several blanks and start lines with them.
        lines, rows = [], []
        for lineno, line in enumerate(text.splitlines(), start=1):
            try:
                # quoted names with blanks ('"body mass"', R's write.table)
                fields = shlex.split(line) if '"' in line else line.split()
            except ValueError:
                raise ValueError(f"{path}: line {lineno}: an unclosed quote") from None
            if fields:
                lines.append(lineno)
                rows.append(fields)
        return lines, rows
    reader = csv.reader(text.splitlines(keepends=True), delimiter=delimiter)
    lines, rows = [], []
    start = 1  # (the line a record starts on: a quoted field can span lines)
    try:
        for row in reader:
            if row and not (len(row) == 1 and not row[0].strip()):  # blank lines
                lines.append(start)
                rows.append(row)
            start = reader.line_num + 1
    except csv.Error as exc:
        # a field over csv's size limit (131072 characters) is, in a table
        # of numbers, the rest of the file after an unclosed quote
        hint = " (an unclosed quote?)" if "field limit" in str(exc) else ""
        raise ValueError(f"{path}: line {start}: {exc}{hint}") from None
    return lines, rows


def _sniff_sample(text, max_lines=10, max_chars=1 << 20):
    """The first complete non-blank lines of ``text``, for the delimiter sniffer.

    The sniffer fails on a sample that ends inside a line (a table of a few
    hundred columns fills 64 KiB in a few lines), and then every tab- or
    semicolon-separated line would be read as one field: whole lines only,
    up to ``max_lines`` of them, or fewer once ``max_chars`` are taken.
    """
    taken, size = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        taken.append(line)
        size += len(line)
        if len(taken) >= max_lines or size >= max_chars:
            break
    return "\n".join(taken)


def _is_number(field):
    return _NUMBER.fullmatch(field) is not None


def _is_integer(field):
    return _INTEGER.fullmatch(field) is not None


def _preview(fields, k=6):
    fields = [f.strip() for f in fields]
    shown = ",".join(fields[:k])
    return shown + (",..." if len(fields) > k else "")


def _header_decision(path, rows, header, square, notes):
    """Whether ``rows[0]`` is a header (see :func:`read_table`)."""
    first = rows[0]
    if header is not None:
        notes.append("first row read as " + ("column names (--header)" if header
                                             else "a sample (--no-header)"))
        return bool(header)
    if not all(_is_number(f) for f in first):
        notes.append("first row read as column names (it has fields that are not numbers)")
        return True
    if not all(_is_integer(f) for f in first):
        return False
    values = [int(f) for f in first]
    pandas_labels = values == list(range(len(values)))
    if square:
        # -1, 0 and 1 are prior knowledge; 0..p-1 over p more rows are labels
        if pandas_labels and len(values) >= 2 and len(rows) == len(values) + 1:
            notes.append("first row 0..p-1 read as column labels (pandas' header)")
            return True
        return False
    increasing = all(a < b for a, b in zip(values, values[1:]))
    if not increasing:
        return False
    body_integer = all(_is_integer(f) for row in rows[1:] for f in row)
    if pandas_labels and not body_integer:
        notes.append(f"first row {_preview(first)} read as column labels "
                     "(pandas' default header 0..p-1)")
        return True
    raise ValueError(
        f"{path}: the first row ({_preview(first)}) is whole numbers in increasing order: "
        "it may be column labels or a sample. Pass --header to read it as column names or "
        "--no-header to read it as a sample")


def _without_index_column(path, names, rows, square, notes):
    """Drop pandas' row-index column: no name, and 0..n-1 (or the row labels) below."""
    if not names or names[0] or not all(names[1:]):
        return names, rows
    column = [row[0].strip() if row else "" for row in rows]
    range_index = all(_is_integer(v) for v in column) and \
        [int(v) for v in column] == list(range(len(rows)))
    row_labels = square and column == names[1:]
    if not (range_index or row_labels):
        return names, rows
    notes.append("column 0 has no name and holds " + ("0..n-1" if range_index else
                 "the column names") + ": read as pandas' row index and skipped")
    return names[1:], [row[1:] for row in rows]


def _numbers(path, rows, lines, names):
    """The fields as float64, refusing anything but plain decimal numbers."""
    # Fast path: numpy converts every field in C. Python's float() syntax,
    # which numpy follows, is wider than a table's (underscores, non-ASCII
    # digits): where the text has any of those, the slow check below names
    # the field.
    plain = all(f.isascii() and "_" not in f for row in rows for f in row)
    if plain:
        try:
            return np.array(rows, dtype=np.float64).reshape(len(rows), -1)
        except ValueError:
            pass
    for lineno, row in zip(lines, rows):
        for j, f in enumerate(row):
            if not _is_number(f):
                col = names[j] if names else j
                # (one field per line: a delimiter the sniffer does not know)
                other = [d for d in "|:;" if len(row) == 1 and d in f
                         and all(_is_number(v) for v in f.split(d))]
                hint = (" (digit-group underscores are not read)" if "_" in f else
                        " (a decimal comma? write a decimal point)"
                        if _is_number(f.replace(",", ".", 1)) else
                        f" (fields separated by {other[0]!r}? pass --delimiter '{other[0]}')"
                        if other else "")
                shown = f if len(f) <= 40 else f[:40] + "..."
                what = "an empty field (a missing value?)" if not f.strip() else \
                    f"{shown!r} is not a number{hint}"
                raise ValueError(f"{path}: line {lineno}, column {col!r}: {what}")
    return np.array(rows, dtype=np.float64).reshape(len(rows), -1)  # pragma: no cover


def _checked_delimiter(delimiter):
    """``delimiter`` as one character csv can split on; ValueError naming it otherwise."""
    if delimiter == "\\t":  # --delimiter '\t' in a shell: a backslash and a t
        return "\t"
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '"\r\n':
        raise ValueError(f"the delimiter must be one character other than a quote or a "
                         f"line break ('\\t' for a tab); got {delimiter!r}")
    return delimiter


def read_prior_knowledge(path, names, *, delimiter=None, n_features=None):
    """Read a prior-knowledge matrix; a header must repeat the data's column names.

    Its shape is checked against ``n_features`` where given (the message names
    the file), its values by :func:`paralingam.fit`.
    """
    table = read_table(path, delimiter=delimiter, square=True)
    if n_features is not None and table.X.shape != (n_features, n_features):
        raise ValueError(f"{path}: prior knowledge of shape {table.X.shape}, but the data have "
                         f"{n_features} columns: it must be ({n_features}, {n_features})")
    pk_names = table.names
    if names is None and pk_names is not None and \
            pk_names == [str(k) for k in range(len(pk_names))]:
        pk_names = None  # pandas' labels 0..p-1 of unnamed data: positions
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
    return table.X


# ----------------------------------------------------------------------
# outputs, checked before any work
# ----------------------------------------------------------------------

class Output:
    """One output of a run: a file, a device or FIFO, or standard output (``-``).

    Made before any work so that a path that cannot be written is an error
    before the fit, not after it. A regular file is written to a temporary
    file beside it and renamed over it at the end, so a failed write leaves
    the previous file (if any) as it was and nothing half-written.
    """

    def __init__(self, spec, what):
        self.spec, self.what = spec, what
        self.fd = None
        self.stdout = spec == "-"
        self.path = None if self.stdout else Path(spec)
        if self.stdout:
            if sys.stdout is None:  # (started with standard output closed: >&-)
                raise CLIError(f"cannot write {what} to standard output: it is closed")
            return
        path = self.path
        if path.is_dir() or spec.endswith(("/", os.sep)):
            raise CLIError(f"{what} {spec} is a folder; give a file name")
        if path.exists() and not path.is_file():
            # a device or FIFO (/dev/null, /dev/stdout, a pipe): opened now and
            # probed with an empty write, which /dev/full already refuses
            try:
                self.fd = os.open(path, os.O_WRONLY)
                os.write(self.fd, b"")
            except OSError as exc:
                self.close()
                raise CLIError(f"cannot write {what} {path}: {exc.strerror}") from None
            return
        # through symbolic links (/dev/stdout to a file, a link to a result):
        # the rename at the end replaces the file, not the link
        self.path = path = Path(os.path.realpath(path))
        parent = path.parent
        if not parent.is_dir():
            raise CLIError(f"cannot write {what} {path}: the folder {parent} does not exist")
        if not os.access(parent, os.W_OK | os.X_OK) or (path.exists()
                                                        and not os.access(path, os.W_OK)):
            raise CLIError(f"cannot write {what} {path}: permission denied "
                           "(or a read-only file system)")
        # the temporary file of write(), made and removed now: access() grants
        # root everything, and /proc or /sys take no new file
        try:
            fd, tmp = self._temporary()
            os.close(fd)
            os.unlink(tmp)
        except OSError as exc:
            raise CLIError(f"cannot write {what} {path}: {exc.strerror or exc}") from None

    def _temporary(self):
        """``(fd, path)`` of a new hidden temporary file beside the output, renamed over it."""
        return tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")

    def write(self, data):
        """Write ``data`` (str or bytes); OSError on failure, nothing half-written."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if self.stdout:
            sys.stdout.flush()
            out = getattr(sys.stdout, "buffer", None)
            if out is None:  # a text-only stream (tests' capture)
                sys.stdout.write(data.decode("utf-8"))
            else:
                out.write(data)
                out.flush()
            return
        if self.fd is not None:
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]
            return
        fd, tmp = self._temporary()
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            mode = (self.path.stat().st_mode & 0o7777) if self.path.exists() else \
                0o666 & ~_umask()
            os.chmod(tmp, mode)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __str__(self):
        return "standard output" if self.stdout else str(self.path)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _default_output(args):
    """The JSON result's path when ``-o`` is not given; None for the bundled example."""
    if Path(args.files[0]).resolve() == EXAMPLE.resolve():
        return None  # the installed package's folder is no place for it, the cwd unasked
    if not Path(args.files[0]).is_file():  # a pipe (/dev/stdin, <(...)) or a device
        raise CLIError(f"{args.files[0]} is not a regular file (a pipe or a device), so the "
                       "result has no default file beside it: pass -o FILE, or -o - for "
                       "standard output")
    return str(Path(args.files[0]).with_suffix(".paralingam.json"))


def _outputs(args, parser):
    """Every output of ``fit``, checked; ``{name: Output}``."""
    specs = {"json": args.output if args.output is not None else _default_output(args)}
    for fmt in ("dot", "graphml") + GRAPHVIZ_FORMATS:
        specs[fmt] = getattr(args, fmt)
    specs = {k: v for k, v in specs.items() if v is not None}
    options = {k: "--output" if k == "json" else f"--{k}" for k in specs}
    for key, spec in specs.items():
        if not spec.strip():
            parser.error(f"{options[key]} is empty: give a file name, or '-' for standard output")
    to_stdout = [k for k, v in specs.items() if v == "-"]
    if len(to_stdout) > 1:
        parser.error(f"only one output can go to standard output ('-'); got "
                     f"{', '.join(to_stdout)}")
    wanted = [fmt for fmt in GRAPHVIZ_FORMATS if fmt in specs]
    if wanted and shutil.which("dot") is None:
        raise CLIError(f"--{wanted[0]} needs Graphviz's dot program, which is not on PATH: "
                       + GRAPHVIZ_HINT)
    # Before any work: "-o data.csv" (or another spelling of the input's path)
    # would replace the data by the result.
    inputs = [(f, "the data file") for f in args.files] + \
        [(args.prior_knowledge, "the prior-knowledge file")]
    for key, spec in specs.items():
        if spec == "-":
            continue
        for given, what in inputs:
            if given and Path(spec).exists() and Path(given).exists() \
                    and os.path.samefile(spec, given):
                parser.error(f"the output file {spec} is {what} {given}: writing the result "
                             f"would overwrite it; give another {options[key]}")
    # Two outputs onto one file: the second would replace the first.
    seen = {}
    for key, spec in specs.items():
        if spec == "-":
            continue
        real = os.path.realpath(spec)
        if real in seen:
            parser.error(f"{options[seen[real]]} and {options[key]} name the same file {spec}: "
                         "one would overwrite the other; give each output its own file")
        seen[real] = key
    names = {"json": "the result file", "dot": "the DOT file", "graphml": "the GraphML file",
             "svg": "the SVG file", "png": "the PNG file"}
    outputs = {}
    try:
        for key, spec in specs.items():
            outputs[key] = Output(spec, names[key])
    except CLIError:
        for out in outputs.values():
            out.close()
        raise
    return outputs


# ----------------------------------------------------------------------
# graphs
# ----------------------------------------------------------------------

@dataclass
class Graph:
    """What ``--dot``, ``--graphml``, ``--svg`` and ``--png`` draw.

    Attributes
    ----------
    nodes : list of str
    edges : list of tuple
        ``(source, target, weight, probability, group)``; ``probability``
        (after a bootstrap) and ``group`` (a multi-group file) may be None.
    """

    nodes: list
    edges: list = field(default_factory=list)


def _edges(B, lower_limit):
    """``(from, to, weight)`` of the edges with ``|B[to, from]| > lower_limit``."""
    to, frm = np.nonzero(np.abs(np.nan_to_num(B)) > lower_limit)
    return [(int(j), int(i), float(B[i, j])) for i, j in zip(to, frm)]


def matrix_edges(B, sources, targets, lower_limit=0.01, probabilities=None, group=None):
    """Graph edges ``sources[j] -> targets[i]`` of ``B[i, j]`` (see :class:`Graph`)."""
    return [(sources[j], targets[i], w,
             None if probabilities is None else float(probabilities[i, j]), group)
            for j, i, w in _edges(B, lower_limit)]


def _dot_id(name):
    return '"' + str(name).replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_dot(graph):
    """A :class:`Graph` in Graphviz's DOT language.

    Edges are labelled with the weight (two decimals, as lingam's
    ``make_dot``), after a bootstrap the fraction of resamples that have the
    edge, and for multi-group data the group's file.
    """
    lines = ["digraph paralingam {"]
    lines += [f"  {_dot_id(name)};" for name in graph.nodes]
    for source, target, w, probability, group in graph.edges:
        label = f"{w:.2f}" + (f" ({probability:.0%})" if probability is not None else "")
        if group is not None:
            label = f"{group}: {label}"
        lines.append(f"  {_dot_id(source)} -> {_dot_id(target)} [label={_dot_id(label)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def graph_graphml(graph):
    """A :class:`Graph` as GraphML (Cytoscape, networkx.read_graphml, yEd, Gephi).

    Written with xml.etree, so networkx is not needed. Nodes have the names
    as ids and ``label``; edges have ``weight`` and, where known,
    ``probability`` and ``group`` (multi-group data: one edge per group, read
    by networkx as a MultiDiGraph).
    """
    import xml.etree.ElementTree as ET

    ns = "http://graphml.graphdrawing.org/xmlns"
    root = ET.Element("graphml", {"xmlns": ns})
    keys = [("label", "node", "string"), ("weight", "edge", "double")]
    if any(e[3] is not None for e in graph.edges):
        keys.append(("probability", "edge", "double"))
    if any(e[4] is not None for e in graph.edges):
        keys.append(("group", "edge", "string"))
    for name, target, typ in keys:
        ET.SubElement(root, "key", {"id": name, "for": target, "attr.name": name,
                                    "attr.type": typ})
    g = ET.SubElement(root, "graph", {"id": "paralingam", "edgedefault": "directed"})
    for name in graph.nodes:
        node = ET.SubElement(g, "node", {"id": str(name)})
        ET.SubElement(node, "data", {"key": "label"}).text = str(name)
    for source, target, w, probability, group in graph.edges:
        edge = ET.SubElement(g, "edge", {"source": str(source), "target": str(target)})
        ET.SubElement(edge, "data", {"key": "weight"}).text = repr(w)
        if probability is not None:
            ET.SubElement(edge, "data", {"key": "probability"}).text = repr(probability)
        if group is not None:
            ET.SubElement(edge, "data", {"key": "group"}).text = str(group)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def dot_text(B, labels, lower_limit=0.01, probabilities=None):
    """The graph of ``B`` (edges ``j -> i`` where ``|B[i, j]| > lower_limit``) in DOT."""
    return graph_dot(Graph(list(labels), matrix_edges(B, labels, labels, lower_limit,
                                                      probabilities)))


def graphml_text(B, labels, lower_limit=0.01, probabilities=None):
    """The graph of ``B`` as GraphML (see :func:`graph_graphml`)."""
    return graph_graphml(Graph(list(labels), matrix_edges(B, labels, labels, lower_limit,
                                                          probabilities)))


def _render(dot, fmt):
    """``dot`` rendered by Graphviz's dot program as ``fmt`` bytes."""
    try:
        run = subprocess.run(["dot", f"-T{fmt}"], input=dot.encode("utf-8"),
                             capture_output=True, check=False)
    except OSError as exc:
        raise CLIError(f"cannot run Graphviz's dot program: {exc}", EXIT_OUTPUT) from None
    if run.returncode != 0:
        raise CLIError(f"Graphviz's dot program failed ({run.returncode}): "
                       f"{run.stderr.decode(errors='replace').strip()}", EXIT_OUTPUT)
    return run.stdout


# ----------------------------------------------------------------------
# models
# ----------------------------------------------------------------------

def _progress(args):
    """The ``progress=`` of the long steps: silent under --quiet, else a bar on a terminal."""
    return False if args.quiet else "auto"


def _labels(table):
    X = table.X
    return table.names if table.names is not None else [str(i) for i in range(X.shape[1])]


def _fit_options(args):
    """:func:`paralingam.fit` options of the order search from the command line."""
    options = {"threshold": not args.no_threshold, "on_collinear": args.on_collinear or "warn"}
    if args.threads is not None:
        options["n_threads"] = args.threads
    if args.devices is not None:
        options["devices"] = args.devices
    return options


def _directions(probabilities, sources, targets):
    """``(probability, from, to)`` of the edges seen in any resample, most probable first."""
    found = sorted(((float(probabilities[i, j]), j, i) for i, j in zip(*np.nonzero(probabilities))),
                   key=lambda t: (-t[0], t[1], t[2]))
    return [(p, sources[j], targets[i]) for p, j, i in found]


def _bootstrap_lines(args, directions, title=None):
    """The summary's table of the most probable bootstrap edges."""
    lines = [title or (f"bootstrap: {args.bootstrap} resamples; edge probabilities "
                       "(fraction of resamples with the edge):")]
    width = max([len(f"{a} -> {b}") for _, a, b in directions] + [4])
    shown = directions if args.bootstrap_top is None else directions[:args.bootstrap_top]
    for p, a, b in shown:
        lines.append(f"  {a + ' -> ' + b:<{width}}  {p:6.1%}")
    if len(shown) < len(directions):
        lines.append(f"  ... {len(directions) - len(shown)} more in the JSON result")
    if not directions:
        lines.append("  (no edge in any resample)")
    return lines


def _bootstrap_json(args, probabilities, directions):
    return {"n_sampling": args.bootstrap, "seed": args.seed,
            "probabilities": probabilities.tolist(),
            "directions": [{"from": a, "to": b, "probability": p} for p, a, b in directions]}


def _fit_direct(args, tables, prior):
    """DirectLiNGAM: causal order, adjacency matrix, optional bootstrap.

    Returns the JSON result (a dict), the lines of the printed summary and
    the :class:`Graph`.
    """
    import paralingam
    from . import _api
    from ._validation import _as_data_matrix

    table = tables[0]
    options = _fit_options(args)
    on_collinear = options.pop("on_collinear")

    # paralingam.fit's phases with the estimator's adjacency step
    # (DirectLiNGAM._fit_data), so that the data's names reach its messages.
    t0 = time.perf_counter()
    # read scaled where it is, as paralingam.fit reads it (no copy of the table)
    X, names, exponents = _as_data_matrix(table.X, table.names, scaled="deferred")
    if args.adjacency == "adaptive_lasso":  # (before a search whose result it could not use)
        from .adjacency._adaptive_lasso import check_samples_before_search

        check_samples_before_search(*X.shape, prior)
    settings = _api.check_settings(
        X.shape[1], names, backend=args.backend, prior_knowledge=prior,
        apply_prior_knowledge_softly=args.soft_prior, on_collinear=on_collinear,
        progress=_progress(args), n_samples=X.shape[0], **options)
    pk = settings.prior.matrix if settings.prior is not None else None
    result = _api.fit_checked(X, names, settings, t0, exponents=exponents,
                              method=args.adjacency, adjacency_threads=args.threads or 1,
                              n_threads=args.threads, prior_knowledge=pk,
                              progress=_progress(args))
    out = result.to_dict()
    out["model"] = "DirectLiNGAM"
    out["adjacency"] = args.adjacency
    st = result.stats
    labels = _labels(table)
    n_edges = int(np.count_nonzero(np.nan_to_num(result.adjacency_matrix)))
    lines = [f"causal order (backend {st['backend']}, {st['time']['search'] * 1e3:.1f} ms "
             f"search, {100 * st['comparisons_saved']:.0f}% comparisons saved):",
             "  " + " -> ".join(str(v) for v in result.causal_order_names)]
    if st["explained"]:
        lines.append("  fully explained (placed after the root that completed them): "
                     + ", ".join(f"{labels[v]} (after {labels[r]})"
                                 for v, r in st["explained"].items()))
    lines.append(f"adjacency matrix: {args.adjacency.replace('_', ' ')}, {n_edges} nonzero "
                 "coefficients")
    probabilities = None
    if args.bootstrap:
        model = paralingam.DirectLiNGAM(
            random_state=args.seed, prior_knowledge=prior,
            apply_prior_knowledge_softly=args.soft_prior, backend=st["backend"],
            adjacency=args.adjacency, fit_options=dict(options, on_collinear=on_collinear))
        from .lingam.bootstrap import resample_source

        data, _ = resample_source(table.X)  # (the file's names for the messages)
        boot = model._bootstrap(data, table.names, args.bootstrap, _progress(args))
        probabilities = boot.get_probabilities()
        directions = _directions(probabilities, labels, labels)
        out["bootstrap"] = _bootstrap_json(args, probabilities, directions)
        lines += _bootstrap_lines(args, directions)
    graph = Graph(list(labels), matrix_edges(result.adjacency_matrix, labels, labels,
                                             args.lower_limit, probabilities))
    return out, lines, graph


def _lag_labels(labels, lags):
    """``[[x(t), ...], [x(t-1), ...], ...]``: the variables at each lag, as lingam's make_dot."""
    return [[f"{name}(t)" if tau == 0 else f"{name}(t-{tau})" for name in labels]
            for tau in range(lags + 1)]


def _fit_var(args, tables, prior):
    """VARLiNGAM (``--lags K``): instantaneous order, ``B0 .. Bk``, optional bootstrap."""
    import paralingam

    table = tables[0]
    X = table.X
    labels = _labels(table)
    criterion = args.criterion or "bic"  # lingam's default
    criterion = None if criterion == "none" else criterion

    def model(lags, criterion):
        # The residuals' DirectLiNGAM with the command line's search and edge options;
        # with the defaults it is VARLiNGAM's own default model.
        inner = paralingam.DirectLiNGAM(backend=args.backend, adjacency=args.adjacency,
                                        fit_options=_fit_options(args))
        return paralingam.VARLiNGAM(lags=lags, criterion=criterion,
                                    prune=not args.no_prune, lingam_model=inner,
                                    random_state=args.seed, backend=args.backend,
                                    fit_options=_fit_options(args))

    fitted = model(args.lags, criterion).fit(X)
    matrices = fitted.adjacency_matrices_
    lags = len(matrices) - 1
    at_lag = _lag_labels(labels, lags)
    order = [int(i) for i in fitted.causal_order_]
    out = {"model": "VARLiNGAM", "names": table.names, "lags": lags,
           "max_lags": args.lags, "criterion": criterion, "prune": not args.no_prune,
           "adjacency": args.adjacency,
           "causal_order": order, "causal_order_names": [labels[i] for i in order],
           "adjacency_matrices": [B.tolist() for B in matrices],
           "matrix_names": [f"B{tau}" for tau in range(lags + 1)]}
    chosen = (f"{lags} lag{'s' * (lags != 1)}" + (f", chosen by {criterion} from 1..{args.lags}"
                                                   if criterion else ""))
    lines = [f"VARLiNGAM: {chosen}; {X.shape[0] - lags} residuals",
             "causal order of the instantaneous effects:",
             "  " + " -> ".join(labels[i] for i in order),
             "adjacency matrices (nonzero coefficients): " + ", ".join(
                 f"B{tau} {int(np.count_nonzero(np.nan_to_num(B)))}"
                 for tau, B in enumerate(matrices))]
    targets = at_lag[0]
    sources = [name for names in at_lag for name in names]  # columns of [B0 B1 ... Bk]
    joined = np.concatenate(list(matrices), axis=1)
    probabilities = None
    if args.bootstrap:
        # A new model with the lags the fit chose: each resample refits the VAR
        # (a fitted VARLiNGAM would keep its coefficients) and its matrices
        # line up with B0..Bk.
        boot = model(lags, None).bootstrap(X, args.bootstrap, progress=_progress(args))
        per_lag = boot.get_probabilities()  # lingam's layout: one matrix per lag
        probabilities = np.hstack(per_lag)
        directions = _directions(probabilities, sources, targets)
        out["bootstrap"] = _bootstrap_json(args, np.array(per_lag), directions)
        lines += _bootstrap_lines(args, directions)
    nodes = [name for names in at_lag for name in names]
    graph = Graph(nodes, matrix_edges(joined, sources, targets, args.lower_limit,
                                      probabilities))
    return out, lines, graph


def _fit_groups(args, tables, prior):
    """MultiGroupDirectLiNGAM (several files): one order, one matrix per group."""
    import paralingam

    labels = _labels(tables[0])
    files = list(args.files)

    def model():
        return paralingam.MultiGroupDirectLiNGAM(
            random_state=args.seed, prior_knowledge=prior,
            apply_prior_knowledge_softly=args.soft_prior, backend=args.backend,
            adjacency=args.adjacency, n_threads=args.threads)

    # each group checked with its file's name and column names in the message
    # (the model's own check of the list names neither); float data are
    # read as they are here, with no float64 copy (scaled="deferred")
    from ._validation import _as_data_matrix

    for f, t in zip(files, tables):
        try:
            _as_data_matrix(t.X, t.names, scaled="deferred")
        except ValueError as exc:
            raise ValueError(f"{f}: {exc}") from None
    data = [t.X for t in tables]
    fitted = model().fit(data)
    order = [int(i) for i in fitted.causal_order_]
    out = {"model": "MultiGroupDirectLiNGAM", "names": tables[0].names,
           "adjacency": args.adjacency,
           "causal_order": order, "causal_order_names": [labels[i] for i in order],
           "groups": [{"file": f, "n_samples": int(t.X.shape[0]), "adjacency_matrix": B.tolist()}
                      for f, t, B in zip(files, tables, fitted.adjacency_matrices_)]}
    lines = [f"multi-group DirectLiNGAM: {len(files)} groups, one causal order:",
             "  " + " -> ".join(labels[i] for i in order),
             f"adjacency matrices ({args.adjacency.replace('_', ' ')}), nonzero coefficients:"]
    width = max(len(f) for f in files)
    for f, B in zip(files, fitted.adjacency_matrices_):
        lines.append(f"  {f:<{width}}  {int(np.count_nonzero(np.nan_to_num(B)))}")
    probabilities = [None] * len(files)
    if args.bootstrap:
        results = model().bootstrap(data, args.bootstrap, progress=_progress(args))
        for g, (f, res) in enumerate(zip(files, results)):
            probabilities[g] = res.get_probabilities()
            directions = _directions(probabilities[g], labels, labels)
            out["groups"][g]["bootstrap"] = _bootstrap_json(args, probabilities[g], directions)
            lines += _bootstrap_lines(args, directions, title=(
                f"bootstrap of {f}: {args.bootstrap} resamples; edge probabilities:"))
    edges = []
    for f, B, P in zip(files, fitted.adjacency_matrices_, probabilities):
        edges += matrix_edges(B, labels, labels, args.lower_limit, P, group=f)
    return out, lines, Graph(list(labels), edges)


def _model(args):
    """The fitting function for the input: the one place where the model is chosen.

    ``--lags K``: VARLiNGAM on one time series; several files: multi-group
    DirectLiNGAM; else DirectLiNGAM. Options that do not apply to the chosen
    model are refused here, before any work.
    """
    several = len(args.files) > 1
    if args.devices is not None and args.backend == "cpu":
        raise CLIError("--devices selects GPUs, but --backend is cpu: use --backend cuda "
                       "(or auto), or leave out --devices")
    if args.lags is not None:
        if several:
            raise CLIError(f"--lags fits one time series; got {len(args.files)} data files "
                           "(several files are multi-group data, without --lags)")
        if args.prior_knowledge:
            raise CLIError("--prior-knowledge does not apply to --lags (VARLiNGAM has no "
                           "prior knowledge)")
        return _fit_var
    for option, given in (("--criterion", args.criterion is not None),
                          ("--no-prune", args.no_prune)):
        if given:
            raise CLIError(f"{option} needs --lags (the time-series mode)")
    if several:
        for option, given in (("--no-threshold", args.no_threshold),
                              ("--on-collinear", args.on_collinear is not None),
                              ("--devices", args.devices is not None)):
            if given:
                raise CLIError(f"{option} does not apply to multi-group data (several files: "
                               "its search compares every pair in numpy)")
        return _fit_groups
    return _fit_direct


# ----------------------------------------------------------------------
# the command
# ----------------------------------------------------------------------

def _devices(text):
    """``--devices``: ``all`` or GPU ids separated by commas, checked by fit's own rules."""
    from .search._devices import check_devices

    if text.strip() == "all":
        return "all"
    try:
        ids = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'all' or GPU ids separated by commas, such as 0,1; "
                                         f"got {text!r}") from None
    try:
        return list(check_devices(ids))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _whole_number(text):
    """An option's whole number, or argparse's error naming the text."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _positive_int(text):
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def _seed(text):
    """``--seed``: a whole number in [0, 2**32 - 1] (numpy's RandomState seeds)."""
    value = _whole_number(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be from 0 to 2**32 - 1 = {2**32 - 1}; got {value}")
    return value


def _thread_count(text):
    """``--threads``: 1 to paralingam's thread limit."""
    from ._validation import MAX_THREADS

    value = _positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_THREADS}; got {value}")
    return value


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0; got {text}")
    return value


def build_parser():
    """The argument parser of ``paralingam`` (help texts are plain text)."""
    import paralingam

    parser = argparse.ArgumentParser(
        prog="paralingam",
        description="Learn causal graphs from data with ParaLiNGAM, a fast exact DirectLiNGAM.",
        epilog="Run 'paralingam fit --help' for the options of fit. Without a command, "
               "this help is printed.")
    parser.add_argument("--version", action="version",
                        version=f"paralingam {paralingam.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    p = sub.add_parser(
        "fit", help="learn the causal order and graph of the columns of a table",
        description="Learn the causal order and the adjacency matrix of the columns of FILE. "
                    "Three modes: one FILE is DirectLiNGAM; one FILE with --lags K is a time "
                    "series (VARLiNGAM); several FILEs with the same columns are groups "
                    "(multi-group DirectLiNGAM: one causal order, one matrix per group). "
                    "Prints a summary and writes the result as JSON.",
        epilog="Exit codes: 0 done; 1 an output could not be written after the work; "
               "2 bad options or input; 130 interrupted; 141 a result on standard output "
               "was cut off (broken pipe).")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="a .csv/.tsv/.txt table or .npy array; several files are groups "
                        "with the same columns; default: the bundled example (whose result "
                        "is written only with -o)")
    inp = p.add_argument_group("input")
    inp.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                     help="read the first row as column names (--header) or as a sample "
                          "(--no-header); by default a first row with a non-number is a "
                          "header, pandas' 0,1,...,p-1 labels are a header, and other "
                          "whole numbers in increasing order are refused as ambiguous")
    inp.add_argument("--delimiter", metavar="CHAR",
                     help="field separator of a text table, one character ('\\t' for a "
                          "tab; a blank splits on runs of blanks; default: sniffed)")
    inp.add_argument("--prior-knowledge", metavar="PK_FILE",
                     help="a (n_features x n_features) table or .npy array of prior "
                          "knowledge as lingam's: entry [i, j] is 1 when column j has a "
                          "directed path to column i, 0 when it has none, -1 or nan when "
                          "unknown; a header, if any, must name the data's columns in order")
    inp.add_argument("--soft-prior", action="store_true",
                     help="apply the prior knowledge softly (lingam's "
                          "apply_prior_knowledge_softly)")
    model = p.add_argument_group("model")
    model.add_argument("--adjacency", default="adaptive_lasso",
                       choices=("adaptive_lasso", "ols"),
                       help="edge estimator: adaptive lasso as lingam's and "
                            "paralingam.DirectLiNGAM's (default, sparse) or ols, least "
                            "squares on every earlier variable (dense, fastest)")
    model.add_argument("--on-collinear", choices=ON_COLLINEAR,
                       help="exact linear dependencies: warn (default), ignore, or stop "
                            "with an error naming the variables")
    model.add_argument("--no-threshold", action="store_true",
                       help="compare every pair (same order, slower)")
    model.add_argument("--bootstrap", type=_positive_int, metavar="N",
                       help="also fit N bootstrap resamples and report each edge's "
                            "probability (a table, and 'bootstrap' in the JSON)")
    model.add_argument("--seed", type=_seed,
                       help="random seed of the bootstrap's resamples (default: unseeded)")
    ts = p.add_argument_group("time series (VARLiNGAM)")
    ts.add_argument("--lags", type=_positive_int, metavar="K",
                    help="FILE is a time series (one row per time point, oldest first): fit "
                         "VARLiNGAM with up to K lags; reports the instantaneous causal order "
                         "and the matrices B0 (instantaneous) to BK (lag K)")
    ts.add_argument("--criterion", choices=("bic", "aic", "hqic", "fpe", "none"),
                    help="information criterion that picks the number of lags in 1..K "
                         "(default bic, as lingam); none uses K lags")
    ts.add_argument("--no-prune", action="store_true",
                    help="keep every lagged coefficient (lingam's prune=False); by default "
                         "the matrices are pruned by adaptive lasso")
    run = p.add_argument_group("run")
    run.add_argument("--backend", default="auto", choices=("auto", "cpu", "cuda"),
                     help="where to search: auto (CUDA when usable, else CPU), cpu, cuda")
    run.add_argument("--threads", type=_thread_count, metavar="N",
                     help="CPU threads (default: all cores, or OMP_NUM_THREADS)")
    run.add_argument("--devices", type=_devices, metavar="all|I,J,...",
                     help="GPUs of this host that share one search (CUDA backend): 'all' or "
                          "ids such as 0,1 (default: one GPU); they need peer access (NVLink)")
    out = p.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE",
                     help="JSON file for the result, '-' for standard output "
                          "(default: FILE with suffix .paralingam.json)")
    out.add_argument("--dot", metavar="FILE", help="the graph in Graphviz's DOT language")
    out.add_argument("--svg", metavar="FILE", help="the graph drawn as SVG (needs Graphviz's "
                     "dot program; 'pip install graphviz' does not install it)")
    out.add_argument("--png", metavar="FILE", help="the graph drawn as PNG (needs Graphviz's "
                     "dot program)")
    out.add_argument("--graphml", metavar="FILE",
                     help="the graph as GraphML, for Cytoscape, networkx, yEd or Gephi")
    out.add_argument("--lower-limit", type=_non_negative_float, default=0.01, metavar="X",
                     help="graphs draw edges with |weight| > X (default 0.01, as lingam's "
                          "make_dot)")
    out.add_argument("--bootstrap-top", type=_positive_int, metavar="K", default=20,
                     help="print the K most probable bootstrap edges (default 20; the JSON "
                          "has all)")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="print nothing but warnings and errors (no summary, no progress)")
    out.add_argument("-v", "--verbose", action="store_true", help="log the backend choice")
    return parser


def _check_groups(files, tables):
    """ValueError unless the tables of multi-group data have the same columns.

    The first file sets the columns; the message names the first file that
    differs and how (its shape, or the first differing column name).
    """
    for path, table in zip(files, tables):
        if table.X.ndim != 2:
            raise ValueError(f"{path}: an array of shape {table.X.shape}; groups must be tables "
                             "(n_samples, n_features)")
    first, ref = files[0], tables[0]
    for path, table in zip(files[1:], tables[1:]):
        if table.X.shape[1] != ref.X.shape[1]:
            raise ValueError(f"{path} has {table.X.shape[1]} columns but {first} has "
                             f"{ref.X.shape[1]}: the groups must have the same columns")
        if (table.names is None) != (ref.names is None):
            named, unnamed = (path, first) if table.names is not None else (first, path)
            raise ValueError(f"{named} has a header but {unnamed} has none: the groups' columns "
                             "cannot be matched (give every file the same header, or none)")
        if table.names is not None and table.names != ref.names:
            k = next(k for k, (a, b) in enumerate(zip(table.names, ref.names)) if a != b)
            raise ValueError(f"{path}: column {k} is {table.names[k]!r} but {first}'s column {k} "
                             f"is {ref.names[k]!r}: the groups must have the same columns in "
                             "the same order")


def _names_preview(names, k=8):
    if len(names) <= k:
        return ", ".join(names)
    return ", ".join(names[:k - 2]) + f", ..., {names[-1]}"


def _run(argv):
    parser = build_parser()
    # Files may come between options ("fit a.csv --seed 1 b.csv"): argparse
    # leaves the later ones over, and only those are taken as files.
    args, extra = parser.parse_known_args(argv)
    stray = [a for a in extra if a.startswith("-") and a != "-"]
    if stray or (extra and args.command != "fit"):
        parser.error(f"unrecognized arguments: {' '.join(stray or extra)}")
    if extra:
        args.files = list(args.files) + extra
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(message)s")
    if args.soft_prior and not args.prior_knowledge:
        parser.error("--soft-prior needs --prior-knowledge")
    if args.seed is not None and not args.bootstrap:
        parser.error("--seed needs --bootstrap")
    if not args.files:
        args.files = [str(EXAMPLE)]
    fit = _model(args)
    _check_inputs(args)
    outputs = _outputs(args, parser)
    try:
        return _fit_and_write(args, fit, outputs)
    finally:
        for output in outputs.values():
            output.close()


def _check_inputs(args):
    """CLIError for an input path that names no file, before any output is made
    (the default result's path is the data file's with another suffix)."""
    given = [(f, "data file") for f in args.files]
    if args.prior_knowledge is not None:
        given.append((args.prior_knowledge, "prior-knowledge file"))
    for spec, what in given:
        try:
            _checked_input_path(spec, what)
        except (OSError, ValueError) as exc:
            raise CLIError(str(exc)) from None


def _fit_and_write(args, fit, outputs):
    # The summary goes to stderr when a result goes to stdout.
    say_to = sys.stderr if any(o.stdout for o in outputs.values()) else sys.stdout

    cut = []

    def say(line=""):
        # A reader that stops early ("| head -3") cuts the summary only: the
        # work goes on and its files are written.
        if args.quiet or cut:
            return
        try:
            print(line, file=say_to, flush=True)
        except BrokenPipeError:
            cut.append(True)
            _silence(say_to)
        except OSError as exc:  # a full disk under a redirection, say: the files still come
            cut.append(True)
            stream = "standard error" if say_to is sys.stderr else "standard output"
            try:
                print(f"paralingam: warning: the summary could not be written to {stream} "
                      f"({exc.strerror or exc}); it stops here", file=sys.stderr, flush=True)
            except OSError:
                pass

    try:
        tables = []
        for path in args.files:
            table = read_table(path, delimiter=args.delimiter, header=args.header)
            X = table.X
            shape = (f"{X.shape[0]} samples, {X.shape[1]} variables" if X.ndim == 2
                     else f"an array of shape {X.shape}")
            names = (f"names {_names_preview(table.names)}" if table.names is not None
                     else "no names (columns numbered from 0)")
            say(f"read {path}: {shape}; {names}")
            for note in table.notes:
                if note.startswith("warning: "):  # shown under --quiet too
                    print(f"paralingam: {path}: {note}" if len(args.files) > 1
                          else f"paralingam: {note}", file=sys.stderr)
                else:
                    say(f"  {note}")
            tables.append(table)
        if len(tables) > 1:
            _check_groups(args.files, tables)
        prior = None
        if args.prior_knowledge:
            X = tables[0].X
            prior = read_prior_knowledge(args.prior_knowledge, tables[0].names,
                                         delimiter=args.delimiter,
                                         n_features=X.shape[1] if X.ndim == 2 else None)
        result, lines, graph = fit(args, tables, prior)
    except BrokenPipeError:
        raise
    except (OSError, ValueError, RuntimeError, MemoryError) as exc:
        # MemoryError: paralingam.InsufficientMemoryError names the step and the size
        # before anything is allocated or written.
        message = str(exc) or f"out of memory ({type(exc).__name__})"
        for python, typed in CLI_SPELLINGS.items():
            message = message.replace(python, typed)
        raise CLIError(message) from None
    for line in lines:
        say(line)
    texts = {"json": lambda: json.dumps(result, indent=1) + "\n",
             "dot": lambda: graph_dot(graph),
             "graphml": lambda: graph_graphml(graph)}
    for fmt in GRAPHVIZ_FORMATS:
        texts[fmt] = (lambda fmt=fmt: _render(graph_dot(graph), fmt))
    failed = False
    for key, output in outputs.items():
        try:
            output.write(texts[key]())
        except CLIError as exc:
            print(f"paralingam: error: {exc}", file=sys.stderr)
            failed = True
            continue
        except BrokenPipeError:
            raise
        except OSError as exc:
            print(f"paralingam: error: cannot write {output.what} {output}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            failed = True
            continue
        if key == "json":
            say(f"result written to {output}")
        else:
            say(f"{key} graph written to {output}")
    if "json" not in outputs:
        say("result not written (the bundled example): pass -o FILE, or -o - for standard "
            "output, to keep it")
    return EXIT_OUTPUT if failed else EXIT_OK


def _format_warning(message, category, filename, lineno, line=None):
    """A warning as the command line prints it: ``paralingam: warning: <message>``.

    Python's own format names the file and line that warned (here the
    ``paralingam`` script) and repeats that line, which tell a user of the
    command line nothing.
    """
    return f"paralingam: warning: {message}\n"


def main(argv=None):
    """Run the command line; returns the exit code (see the module docstring)."""
    python_format = warnings.formatwarning
    warnings.formatwarning = _format_warning
    try:
        return _run(argv)
    except CLIError as exc:
        print(f"paralingam: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("paralingam: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # A result written to standard output was cut off (-o - | head).
        _silence(sys.stdout)
        return EXIT_BROKEN_PIPE
    finally:
        warnings.formatwarning = python_format


def _silence(stream):
    """Point ``stream``'s descriptor at /dev/null after a broken pipe.

    Else Python prints a second BrokenPipeError when it flushes the stream at
    exit.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
