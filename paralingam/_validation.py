"""Checks on user input, with errors that name the problem."""

import numbers
import os
import sys

import numpy as np

MAX_THREADS = 1024  # more OpenMP threads than this are a mistake, and can abort the process
CUDA_BLOCKS = tuple(range(32, 1025, 32))  # threads per block: whole warps
WARPS_PER_PAIR = (1, 2, 4, 8, 16, 32)  # powers of two up to a 1024-thread block


class DataTypeError(ValueError, TypeError):
    """X holds values that are not real numbers (text, objects, complex numbers).

    Both a ValueError (paralingam's rule for bad input) and a TypeError
    (scikit-learn's and numpy's for non-numeric data), so that code
    catching either convention catches it.
    """


def as_data_matrix(X, names=None, *, allow_constant=False):
    """Return ``X`` as a float64 (n_samples, n_features) array and its names.

    Accepts numpy arrays (masked arrays without masked entries), nested
    lists, and pandas DataFrames with numeric, boolean or nullable numeric
    columns (and object columns that hold only real numbers).

    Parameters
    ----------
    X : array-like or pandas.DataFrame, shape (n_samples, n_features)
    names : sequence, optional
        Column names (one per column); by default a DataFrame's, else None.
    allow_constant : bool
        Accept constant columns (the adjacency step regresses on them with
        coefficient zero; a causal order has no place for them).

    Returns
    -------
    data : ndarray of float64, C-contiguous
        A new array: the caller may modify it.
    names : list of str or None
        The column names.

    Raises
    ------
    ValueError
        For input that is not a rectangular 2-D table, fewer than 3 samples,
        no variables, missing (NaN, NA, masked) or infinite values, values
        too large for float64, constant columns, integer columns whose spread
        float64 cannot represent, or values too large to centre and square
        in float64. The message names the shape, the columns, and the counts
        (and, for empty data, uses scikit-learn's wording).
    DataTypeError
        (a ValueError and a TypeError) For non-numeric or complex columns.
    """
    data, names, _ = _as_data_matrix(X, names, allow_constant=allow_constant)
    return data, names


def _as_data_matrix(X, names=None, *, allow_constant=False, scaled=False):
    """:func:`as_data_matrix`, also returning each column's largest ``|x|``.

    With ``scaled=True`` the data come with each column ``j`` multiplied by
    ``2**-e[j]`` (exact), where ``max |X[:, j]| * 2**-e[j]`` lies in [0.5, 1)
    (``paralingam._preparation.column_exponents``), and the third item is ``e``
    instead of the maxima: float input is then read once for the checks and
    once for the scaled copy, with no unscaled copy in between. With
    ``scaled="deferred"``, float input up to double comes as a
    :class:`paralingam._preparation.ScaledData` over the input itself (no
    copy: the steps read it scaled, block by block; ``.copy()`` gives the
    array ``scaled=True`` returns); other input as that array.
    """
    given = names
    names = labels = None
    if hasattr(X, "columns") and hasattr(X, "dtypes"):  # pandas DataFrame
        labels = list(X.columns)
        names = [str(c) for c in labels]
        arr = _frame_to_array(X, names)
    else:
        arr = _as_array(X)
    _check_shape(arr, X)
    n, p = arr.shape
    if given is not None:
        if not isinstance(given, str):
            # any iterable of names (a generator, a pandas Index, ...): len() needs a list
            try:
                given = list(given)
            except TypeError:
                raise ValueError(f"feature_names must be a sequence of names, one per column; "
                                 f"got {given!r}") from None
        if isinstance(given, str) or len(given) != p:
            count = "a string" if isinstance(given, str) else f"{len(given)} names"
            raise ValueError(f"feature_names must give one name per column: X has {p} "
                             f"columns, got {count}")
        labels = given
        names = [str(v) for v in given]
    if names is not None:
        _check_unique(names, labels)
    if _is_masked(arr):
        masked = np.ma.getmaskarray(arr)
        if masked.any():
            raise ValueError(
                "masked (missing) values in columns: "
                f"{_per_column(names, masked.sum(axis=0), 'masked')}; "
                "drop those rows or fill them (X.filled(value))")
        arr = arr.data
    # Floats up to double convert to float64 exactly: they are checked as
    # they are, in any layout, and copied once at the end. Other input
    # (integers, objects, long double) is converted first.
    direct = arr.dtype.kind == "f" and arr.dtype.itemsize <= 8
    data = None if direct else _to_float64(arr, names)
    src = arr if direct else data

    # One pass each for the column maxima and minima; the per-entry checks
    # below run only when these say something is wrong. A NaN makes its
    # column's maximum and minimum NaN, and an infinite entry is its
    # column's maximum or minimum.
    hi, lo = _column_extremes(src)
    if not (np.isfinite(hi).all() and np.isfinite(lo).all()):
        _check_finite(arr, _to_float64(arr, names) if data is None else data, names)
    absmax = np.maximum(hi, -lo)  # == np.abs(data).max(axis=0), without its n x p temporary
    with np.errstate(over="ignore", invalid="ignore"):
        spread = hi - lo  # == np.ptp(data, axis=0)
        # every |x - mean| <= spread: the sum of squares is finite when this is
        bound = n * spread * spread
    if not (bound <= 0.5 * np.finfo(np.float64).max).all():
        values = np.asarray(src, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            centred = values - values.mean(axis=0)
            sq = (centred**2).sum(axis=0)
        del centred, values
        if not np.isfinite(sq).all():
            bad = [_name(names, j) for j in np.flatnonzero(~np.isfinite(sq))]
            raise ValueError(
                f"values too large to centre and square in float64 in columns: {_list(bad)} "
                "(rescale them)")
    constant = (np.zeros(p, dtype=bool) if allow_constant
                else _constant_from_extremes(spread, absmax))
    _check_integer_spread(X, arr, src, names, constant, absmax)
    if constant.any():
        bad = [_name(names, j) for j in np.flatnonzero(constant)]
        raise ValueError(f"constant columns (zero variance): {_list(bad)}")
    if not scaled:
        return (_to_float64(arr, names) if data is None else data), names, absmax
    from ._preparation import ScaledData, scale_columns

    exponents = np.frexp(absmax)[1]
    if data is not None:  # our own float64 copy: scaled in place
        return scale_columns(data, exponents), names, exponents
    product = ScaledData(src, exponents)
    if scaled == "deferred":
        return product, names, exponents
    return product.copy(_by_rows), names, exponents


# Bytes of rows whose column maxima and minima are taken together, while they
# are in the cache; and bytes of data each thread of a pass over the data
# gets at least (fewer than this run on one thread).
EXTREMES_BLOCK_BYTES = 1 << 20
THREAD_BYTES = 1 << 24
# Entries per row of the wide view in which the extremes of narrow data are
# taken (_max_min): numpy's reduction over the first axis loops over the
# columns innermost, so that 11 columns ran at an eighth of the speed of 1024.
EXTREMES_WIDTH = 1024


def _by_rows(work, src, n_threads=None):
    """``work(r0, r1)`` over ranges of ``src``'s rows that cover them, on threads for large data.

    numpy's loops release the GIL; the ranges are contiguous and as many as
    the usable cores allow (each at least ``THREAD_BYTES`` of data).
    Returns the list of the results, in row order.
    """
    n = src.shape[0]
    threads = n_threads or _usable_cores()
    parts = int(max(1, min(threads, n, src.nbytes // THREAD_BYTES)))
    bounds = np.linspace(0, n, parts + 1).astype(int)
    ranges = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    if parts == 1:
        return [work(0, n)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(parts) as pool:
        return list(pool.map(lambda r: work(*r), ranges))


def _column_extremes(src):
    """Each column's maximum and minimum as float64 (NaN where the column holds one).

    A C-ordered array is read once: the maxima and minima of each block of
    rows are taken while the block is in the cache, on several threads for
    large data (maxima and minima do not depend on the order of reading).
    """
    n, p = src.shape
    with np.errstate(invalid="ignore"):
        if not src.flags.c_contiguous or src.nbytes <= EXTREMES_BLOCK_BYTES:
            hi, lo = _max_min(src)
            return hi.astype(np.float64, copy=False), lo.astype(np.float64, copy=False)
        rows = max(1, EXTREMES_BLOCK_BYTES // (src.itemsize * p))

        def part(r0, r1):
            hi, lo = _max_min(src[r0:r0 + rows])
            for b0 in range(r0 + rows, r1, rows):
                block_hi, block_lo = _max_min(src[b0:min(b0 + rows, r1)])
                np.maximum(hi, block_hi, out=hi)  # NaN propagates
                np.minimum(lo, block_lo, out=lo)
            return hi, lo

        parts = _by_rows(part, src)
        hi, lo = parts[0]
        for h, l in parts[1:]:
            np.maximum(hi, h, out=hi)
            np.minimum(lo, l, out=lo)
    return hi.astype(np.float64, copy=False), lo.astype(np.float64, copy=False)


def _max_min(block):
    """Each column's maximum and minimum of ``block`` (NaN where the column holds one).

    A C-ordered block of narrow rows is viewed as fewer rows of
    ``EXTREMES_WIDTH`` entries, ``k`` of its rows each, whose extremes are
    then folded over the ``k`` copies of each column: maxima and minima do
    not depend on the order of the comparisons.
    """
    m, p = block.shape
    k = max(1, EXTREMES_WIDTH // max(p, 1))
    whole = (m // k) * k
    if k == 1 or not whole or not block.flags.c_contiguous:
        return block.max(axis=0), block.min(axis=0)
    wide = block[:whole].reshape(whole // k, k * p)
    hi = wide.max(axis=0).reshape(k, p).max(axis=0)
    lo = wide.min(axis=0).reshape(k, p).min(axis=0)
    if whole < m:  # the rows left over
        np.maximum(hi, block[whole:].max(axis=0), out=hi)
        np.minimum(lo, block[whole:].min(axis=0), out=lo)
    return hi, lo


def _check_finite(arr, data, names):
    """ValueError naming the columns with NaN, missing, infinite or overflowed values."""
    n, p = data.shape
    source = arr if arr.dtype.kind == "f" else data  # NaN/inf of the input itself
    nan, inf = np.isnan(source), np.isinf(source)
    if nan.any() or inf.any():
        counts = [", ".join(f"{c} {what}" for c, what in ((nan[:, j].sum(), "NaN/missing"),
                                                            (inf[:, j].sum(), "infinite")) if c)
                  for j in range(p)]
        bad = [f"{_name(names, j)}: {counts[j]}" for j in range(p) if counts[j]]
        raise ValueError(f"NaN, missing or infinite values in columns: {_list(bad)}")
    if not np.isfinite(data).all():  # finite input that overflowed (long double)
        bad = [_name(names, j) for j in np.flatnonzero(~np.isfinite(data).all(axis=0))]
        raise ValueError(f"values too large for float64 in columns: {_list(bad)}")


def check_order(causal_order, n_features):
    """``causal_order`` as an intp array, checked to hold each column index once.

    Raises
    ------
    ValueError
        For anything but a permutation of ``0 .. n_features - 1``: the message
        names the entries out of range, repeated or missing.
    """
    order = np.asarray(causal_order)
    if order.ndim != 1:
        raise ValueError(f"causal_order must be a 1-D sequence of column indices; got shape "
                         f"{order.shape}")
    if order.size and order.dtype.kind not in "iu":
        integral = (order.dtype.kind == "f" and np.isfinite(order).all()
                    and (order == np.round(order)).all())
        if not integral:
            raise ValueError(f"causal_order must hold integer column indices; got "
                             f"{_list([repr(v) for v in order.tolist()])}")
    order = order.astype(np.intp)
    outside = order[(order < 0) | (order >= n_features)]
    if outside.size:
        shown = [str(v) for v in sorted(set(outside.tolist()))]
        raise ValueError(f"causal_order has indices outside 0..{n_features - 1} (X has "
                         f"{n_features} columns): {_list(shown)}")
    counts = np.bincount(order, minlength=n_features)
    if (counts != 1).any():
        problems = []
        if (counts > 1).any():
            problems.append(f"repeated {_list([str(v) for v in np.flatnonzero(counts > 1)])}")
        if (counts == 0).any():
            problems.append(f"missing {_list([str(v) for v in np.flatnonzero(counts == 0)])}")
        raise ValueError(f"causal_order must list each of the {n_features} columns once; "
                         f"{' and '.join(problems)}")
    return order


# An integer column keeps its information in float64 only where float64's
# step at the column's magnitude is small against its spread: with fewer
# than this many steps across its range the column is mostly rounding.
MIN_FLOAT_STEPS = 1024


def _check_integer_spread(X, arr, data, names, constant, absmax=None):
    """ValueError for integer columns that vary but whose float64 values lost the spread.

    Integers beyond 2**53 round to float64's step there (2048 near 2**63):
    columns such as nanosecond timestamps or 64-bit ids that differ by less
    than a few steps become constant, or nearly so, in float64. Only such
    large columns are examined; ``constant`` (the float64 test) is updated so
    that they are not reported as constant too.
    """
    if absmax is None:
        absmax = np.abs(data).max(axis=0)
    big = np.flatnonzero(absmax >= 2.0**53)
    lost = []
    for j in big:
        exact = _integer_range(X, arr, j)
        if exact is None:
            continue
        lo, hi = exact
        if hi == lo:
            continue  # truly constant: reported as such
        step = float(np.spacing(np.abs(data[:, j]).max()))
        if constant[j] or step * MIN_FLOAT_STEPS > hi - lo:
            constant[j] = False
            lost.append(f"{_name(names, j)} (from {lo} to {hi}: a spread of {hi - lo}, where "
                        f"float64 steps by {step:.0f})")
    if lost:
        raise ValueError(
            f"integer columns whose spread float64 cannot represent: {_list(lost)}; they "
            "vary, but their values are so large that converting them to float64 loses "
            "(nearly) all of their differences. Subtract a baseline first (e.g. "
            "X - X.min(axis=0), in integer arithmetic) or rescale them")


def _integer_range(X, arr, j):
    """Exact ``(min, max)`` of column ``j`` as Python ints when the input column holds integers."""
    if hasattr(X, "columns") and hasattr(X, "dtypes"):  # DataFrame
        col = X.iloc[:, j]
        kind = getattr(col.dtype, "kind", "O")
        if kind in "iu":
            return int(col.min()), int(col.max())
        if kind == "O":
            values = [v for v in col.tolist() if v is not None]
        else:
            return None
    elif arr.dtype.kind in "iu":
        return int(arr[:, j].min()), int(arr[:, j].max())
    elif arr.dtype.kind == "O":
        values = arr[:, j].tolist()
    else:
        return None
    if not values or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                             for v in values):
        return None
    ints = [int(v) for v in values]
    return min(ints), max(ints)


def constant_columns(data):
    """Columns constant up to rounding: their spread is a few ulps of their largest value."""
    return _constant_from_extremes(np.ptp(data, axis=0), np.abs(data).max(axis=0))


def _constant_from_extremes(spread, absmax):
    """:func:`constant_columns` from each column's ``max - min`` and largest ``|x|``."""
    scale = np.maximum(absmax, np.finfo(np.float64).tiny)
    return spread <= 8 * np.finfo(np.float64).eps * scale


def constant_in_resample(data, resampled, k, names=None):
    """ValueError if resample ``k`` of ``data`` has a constant column, naming them.

    A column with few distinct values (binary with rare ones, say) can take
    a single value in a bootstrap resample, where it has no variance and no
    place in a causal order.
    """
    constant = constant_columns(resampled)
    if not constant.any():
        return
    bad = []
    for j in np.flatnonzero(constant):
        value = resampled[0, j]
        count = int(np.count_nonzero(data[:, j] == value))
        bad.append(f"{_name(names, j)} (the resample drew only rows where it is {value:g}: "
                   f"{count} of the data's {data.shape[0]} rows)")
    raise ValueError(f"bootstrap resample {k} (0-based) has constant columns: {_list(bad)}; "
                     "drop or merge such columns, or collect more samples")


def _as_array(X):
    """``np.asarray(X)``, refusing ragged nested sequences by name."""
    lengths = _row_lengths(X)
    if lengths is not None and len(set(lengths)) > 1:
        raise ValueError(
            "X is ragged: its rows have different lengths "
            f"({_list([str(v) for v in sorted(set(lengths))])}); every row must have one "
            "value per variable")
    try:
        arr = X if _is_masked(X) else np.asarray(X)
    except (ValueError, TypeError) as exc:  # e.g. ragged deeper down
        raise ValueError(f"X cannot be read as a 2-D numeric table: {exc}") from None
    return arr


def _is_masked(X):
    """``isinstance(X, np.ma.MaskedArray)`` without importing ``numpy.ma``.

    numpy loads ``numpy.ma`` on first use, which costs most of a small first
    fit (docs/design/pipeline.rst, "The first fit without scipy.linalg"); no
    masked array exists before it is loaded.
    """
    ma = sys.modules.get("numpy.ma")
    return ma is not None and isinstance(X, ma.MaskedArray)


def _row_lengths(X):
    """Lengths of the rows of a list/tuple (or 1-D object array) of sequences."""
    if isinstance(X, np.ndarray) and X.dtype == object and X.ndim == 1:
        X = list(X)
    if not isinstance(X, (list, tuple)) or not X:
        return None
    if not all(isinstance(row, (list, tuple, np.ndarray)) for row in X):
        return None
    return [len(row) for row in X]


def _check_shape(arr, X):
    if arr.ndim != 2:
        if arr.ndim == 0:
            got = f"a {type(X).__name__}"
            if hasattr(X, "toarray"):
                got += " (a sparse matrix: pass X.toarray())"
        else:
            got = f"an array of shape {arr.shape}"
            if arr.ndim == 1 and arr.size:
                got += " (for a single variable use X.reshape(-1, 1))"
        raise ValueError(f"X must be 2-D (n_samples, n_features); got {got}")
    n, p = arr.shape
    # The second half of each message is scikit-learn's check_array wording,
    # which estimator checks and its users match.
    if p == 0:
        raise ValueError(f"X has no variables (shape {arr.shape}): found array with 0 "
                         f"feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if n < 3:
        raise ValueError(f"X needs at least 3 samples; got {n} (shape {arr.shape}): found "
                         f"array with {n} sample(s) (shape={arr.shape}) while a minimum of 3 "
                         "is required.")


def _require_float64_copy(n, p, converted=True):
    """Room for a float64 copy of data of ``n`` samples and ``p`` columns
    (:func:`paralingam._memory.require`): a copy larger than the memory left
    could be ended by the system's out-of-memory killer rather than refused.
    ``converted``: the copy converts input that is not float32 or float64
    (before its checks); else it is the float64 array a caller asked for."""
    from . import _memory

    if converted:
        step = ("a float64 copy of the data (input that is not float32 or float64 is "
                "converted first)")
        advice = ("pass float64 or float32 data, which are read without a copy, or fewer "
                  "samples or columns")
    else:
        step, advice = "a float64 copy of the data", "use fewer samples or columns"
    _memory.require(step, 8 * n * p, advice)


def _frame_to_array(X, names):
    """A DataFrame's values as a float64 array; NA becomes NaN."""
    bad = []
    for j, dt in enumerate(X.dtypes):
        kind = getattr(dt, "kind", "O")  # pandas extension dtypes have .kind
        if kind in "biuf":
            continue
        if kind == "O" and str(dt) == "object":
            col = X.iloc[:, j]
            values = col[~col.isna()]
            if all(isinstance(v, numbers.Real) for v in values):
                continue
        bad.append(f"{_name(names, j)}: {dt} dtype")
    if bad:
        raise DataTypeError(f"non-numeric columns: {_list(bad)}")
    if not all(dt == np.float64 for dt in X.dtypes):  # (a float64 frame's values may be its own)
        _require_float64_copy(*X.shape)
    try:
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    except OverflowError:  # object columns holding integers beyond float64
        big = [_name(names, j) for j in range(X.shape[1]) if not _fits_float64(X.iloc[:, j])]
        raise ValueError(f"values too large for float64 in columns: {_list(big)}") from None


def _to_float64(arr, names):
    """A new C-ordered float64 copy of a 2-D array with real numeric entries."""
    kind = arr.dtype.kind
    if kind == "c" or (kind == "O" and any(isinstance(v, numbers.Complex)
                                           and not isinstance(v, numbers.Real)
                                           for v in arr.flat)):
        # scikit-learn's wording ("Complex data not supported") and type (ValueError)
        raise DataTypeError("X must be real; got complex values (Complex data not supported)")
    if kind == "O":
        bad = []
        for j in range(arr.shape[1]):
            rows = [i for i, v in enumerate(arr[:, j])
                    if not isinstance(v, (numbers.Real, np.bool_))]
            if rows:
                value = arr[rows[0], j]
                bad.append(f"{_name(names, j)}: {value!r} in row {rows[0]}{_why(value)}")
        if bad:
            raise DataTypeError(f"non-numeric columns: {_list(bad)}")
        big = [_name(names, j) for j in range(arr.shape[1]) if not _fits_float64(arr[:, j])]
        if big:
            raise ValueError(f"values too large for float64 in columns: {_list(big)}")
    elif kind not in "biuf":
        raise DataTypeError(
            f"non-numeric columns: {_list([_name(names, j) for j in range(arr.shape[1])])} "
            f"(dtype {arr.dtype})")
    _require_float64_copy(*arr.shape, converted=not (kind == "f" and arr.dtype.itemsize <= 8))
    with np.errstate(over="ignore"):  # long double beyond float64: checked by the caller
        return np.array(arr, dtype=np.float64, order="C", copy=True)


def _why(value):
    """Why ``value`` is no number, in float()'s words, for values other than text and None.

    (numpy's ``np.asarray(X, dtype=float)`` raises the same TypeError, which
    scikit-learn's users and its estimator checks expect.)
    """
    if value is None or isinstance(value, (str, bytes)):
        return ""
    try:
        float(value)
    except TypeError as exc:
        return f" ({exc})"
    except (ValueError, OverflowError):
        pass
    return ""


def _fits_float64(values):
    try:
        np.array(list(values), dtype=np.float64)
    except OverflowError:
        return False
    return True


def _check_unique(names, labels=None):
    """Refuse repeated column names: the order and effects would be ambiguous.

    ``names`` are the labels as text; ``labels``, where given, the originals.
    Labels that differ but read the same as text (``1`` and ``"1"``) are
    shown by their reprs, so that the message shows what differs.
    """
    first = {}
    repeated = {}
    for j, name in enumerate(names):
        if name in first:
            repeated.setdefault(name, [first[name]]).append(j)
        else:
            first[name] = j
    if repeated:
        listed, as_text = [], False
        for name, cols in sorted(repeated.items(), key=lambda kv: kv[1]):
            shown = ", ".join(map(str, cols))
            if labels is not None and len({repr(labels[j]) for j in cols}) > 1:
                shown = ", ".join(f"{j} = {labels[j]!r}" for j in cols)
                as_text = True
            listed.append(f"{name!r} (columns {shown})")
        note = " (labels are compared as text)" if as_text else ""
        raise ValueError(f"column names must be unique: {_list(listed)} repeated{note}")


def _name(names, j):
    return f"column {j}" if names is None else f"column {j} ({names[j]!r})"


def _per_column(names, counts, what):
    return _list([f"{_name(names, j)}: {counts[j]} {what}" for j in np.flatnonzero(counts)])


def _list(items, limit=10):
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------

def _finite_float(value):
    """``value`` as a finite float, or None when it is not a finite real number.

    Booleans are refused: ``gamma0=True`` is a mistake, not ``1.0``. The
    conversion comes first because ``np.isfinite`` raises TypeError for real
    numbers numpy has no dtype for (``fractions.Fraction``, ints beyond
    float64 such as ``10**400``).
    """
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
        return None
    try:
        with np.errstate(over="ignore"):  # np.longdouble beyond float64: inf, refused below
            x = float(value)
    except OverflowError:  # an int or Fraction beyond float64
        return None
    return x if np.isfinite(x) else None


def check_positive(name, value, *, above=0.0, below=None):
    """``value`` as a float; ValueError unless it is a finite real in (above, below).

    Booleans are refused: ``gamma0=True`` is a mistake, not ``1.0``.
    """
    x = _finite_float(value)
    if x is None or not (x > above and (below is None or x < below)):
        bound = f"greater than {above}" + ("" if below is None else f" and less than {below}")
        raise ValueError(f"{name} must be a finite number {bound}; got {value!r}")
    return x


def check_coef_threshold(value):
    """``coef_threshold`` as a float or None; ValueError unless None or a finite real >= 0."""
    if value is None:
        return None
    x = _finite_float(value)
    if x is None or x < 0:
        raise ValueError(f"coef_threshold must be None or a finite number >= 0; got {value!r}")
    return x


def check_int(name, value, allowed=None, *, low=1, high=None):
    """``value`` as an int; ValueError unless it is an integer in range (or in ``allowed``)."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if ok and allowed is not None:
        ok = value in allowed
    elif ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        if allowed is not None:
            want = f"one of {', '.join(str(a) for a in allowed)}"
        else:
            want = f"an integer >= {low}" + ("" if high is None else f" and <= {high}")
        raise ValueError(f"{name} must be {want}; got {value!r}")
    return int(value)


def check_choice(name, value, choices):
    """``value`` unchanged; ValueError unless it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_bool(name, value):
    """``value`` as a bool; ValueError unless it is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


_openmp = None  # threadpoolctl's controllers of the loaded OpenMP runtimes, made once


def default_threads():
    """Threads of a CPU step (order search, adaptive lasso) given no ``n_threads``.

    OpenMP's default (``OMP_NUM_THREADS``, else the usable cores; or what
    ``threadpoolctl.threadpool_limits`` set), at most the usable cores and
    ``MAX_THREADS``.

    Returns
    -------
    int
    """
    global _openmp
    cores = _usable_cores()
    if _openmp is None:
        from threadpoolctl import ThreadpoolController

        # ~1 ms: made once, and only after an extension has loaded OpenMP
        found = ThreadpoolController().select(user_api="openmp")
        if found.lib_controllers:
            _openmp = found
    openmp = cores
    if _openmp is not None:
        openmp = max(int(lib.num_threads or 1) for lib in _openmp.lib_controllers)
    # OMP_NUM_THREADS=100000 had OpenMP start 100000 threads: a segfault. Past
    # the usable cores, threads only slow the steps down: each parallel step
    # ends when its slowest thread does, and a thread without a core waits for
    # one (docs/design/cpu_search.rst, "Busy cores"). A number given as
    # n_threads is used as given.
    return max(1, min(openmp, cores, MAX_THREADS))


def _usable_cores():
    """The cores this process may run on (all of the machine's where unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def check_dtype(value):
    """``None``, ``"float64"`` or ``"float32"`` for a dtype option."""
    if value is None:
        return None
    try:
        name = np.dtype(value).name
    except (TypeError, ValueError):
        name = None
    if name not in ("float64", "float32"):
        raise ValueError(f"dtype must be None, 'float64' or 'float32'; got {value!r}")
    return name


PACKAGE_DIR = os.path.dirname(__file__) + os.sep


def user_stacklevel():
    """``stacklevel`` that points a warning of the caller at the user's code.

    The first frame outside this package: ``fit`` is called by the user, but
    also by ``DirectLiNGAM.fit``, its bootstrap and the command line, each
    at a different depth, and a fixed ``stacklevel`` would name a line of
    paralingam as the warning's source.
    """
    frame, level = sys._getframe(1), 1  # the function that warns: stacklevel=1
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
