"""Checks on user input, with errors that name the problem."""

import numbers

import numpy as np


def as_data_matrix(X):
    """Return ``X`` as a float64 (n_samples, n_features) array and its names.

    Parameters
    ----------
    X : array-like or pandas.DataFrame, shape (n_samples, n_features)

    Returns
    -------
    data : ndarray of float64
    names : list of str or None
        Column names of a DataFrame, else None.

    Raises
    ------
    ValueError
        For a shape that is not 2-D, fewer than 3 samples, no variables,
        non-numeric columns, NaN or infinite values, constant columns, or
        values too large to centre in float64.
    """
    names = None
    if hasattr(X, "columns") and hasattr(X, "dtypes"):  # pandas DataFrame
        names = [str(c) for c in X.columns]
        bad = [str(c) for c, dt in zip(X.columns, X.dtypes) if not _numeric_dtype(dt)]
        if bad:
            raise ValueError(f"non-numeric columns: {_list(bad)}")
        X = X.to_numpy()
    arr = np.asarray(X)
    if arr.ndim != 2:
        raise ValueError(
            f"X must be 2-D (n_samples, n_features); got an array of shape {arr.shape}"
        )
    n, p = arr.shape
    if p == 0:
        raise ValueError(f"X has no variables (shape {arr.shape})")
    if n < 3:
        raise ValueError(f"X needs at least 3 samples; got {n} (shape {arr.shape})")
    if np.iscomplexobj(arr):
        raise ValueError("X must be real; got complex values")
    if arr.dtype.kind not in "biuf":
        bad = [_name(names, j) for j in range(p) if not _numeric_column(arr[:, j])]
        if bad:
            raise ValueError(f"non-numeric columns: {_list(bad)}")
    data = np.array(arr, dtype=np.float64, order="C", copy=True)

    finite = np.isfinite(data)
    if not finite.all():
        counts = (~finite).sum(axis=0)
        bad = [f"{_name(names, j)} ({counts[j]} values)" for j in np.flatnonzero(counts)]
        raise ValueError(f"NaN or infinite values in columns: {_list(bad)}")
    with np.errstate(over="ignore", invalid="ignore"):
        centred = data - data.mean(axis=0)
        sq = (centred**2).sum(axis=0)
    if not np.isfinite(sq).all():
        bad = [_name(names, j) for j in np.flatnonzero(~np.isfinite(sq))]
        raise ValueError(f"values too large to centre and square in float64 in columns: {_list(bad)}")
    spread = np.ptp(data, axis=0)
    scale = np.maximum(np.abs(data).max(axis=0), np.finfo(np.float64).tiny)
    constant = spread <= 8 * np.finfo(np.float64).eps * scale
    if constant.any():
        bad = [_name(names, j) for j in np.flatnonzero(constant)]
        raise ValueError(f"constant columns (zero variance): {_list(bad)}")
    return data, names


def _numeric_dtype(dt):
    try:
        return np.dtype(dt).kind in "biuf"
    except TypeError:  # pandas extension dtypes
        return getattr(dt, "kind", "O") in "biuf"


def _numeric_column(col):
    """True when every entry is a real number (strings are refused)."""
    return all(isinstance(v, (numbers.Real, np.bool_)) for v in col)


def _name(names, j):
    return f"column {j}" if names is None else f"column {j} ({names[j]!r})"


def _list(items, limit=10):
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def check_positive(name, value, *, above=0.0):
    """Raise ValueError unless ``value`` is a finite real number > ``above``."""
    if not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= above:
        raise ValueError(f"{name} must be a finite number greater than {above}; got {value!r}")
    return float(value)
