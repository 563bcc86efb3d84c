"""Bootstrap results and the graph arithmetic behind them.

:class:`BootstrapResult` has lingam 1.13's ``BootstrapResult`` interface: the
same attributes, methods, arguments, defaults and return formats, and the same
ordering of ties (the same sort calls on the same arrays), so that code written
for lingam reads paralingam's results unchanged.

Total effects follow lingam 1.13's bootstrap, which sums the products of edge
weights over all directed paths (``calculate_total_effect``). On a DAG that sum
is an entry of ``(I - B)^{-1}``: :func:`total_effects` gets all of them from
one triangular inverse in the causal order.
"""

import numbers
import time
import warnings

import numpy as np

from .. import _memory

__all__ = ["BootstrapResult", "total_effects", "find_all_paths"]


# Phases of a DirectLiNGAM bootstrap's timings_ (seconds summed over the resamples).
BOOTSTRAP_PHASES = ("resample", "search", "adjacency", "total_effects")


def resample_source(X):
    """The checked data that bootstrap resamples are drawn from, and the columns' names.

    Float input (up to double) is checked and kept as it is: each resample
    is its rows, made float64 one resample at a time (:func:`fit_resample`),
    so no float64 copy of the whole input is held beside them (a DataFrame:
    its values as float64, a copy unless they are one float64 block). Other
    input (integers, booleans, object columns) comes as ``as_data_matrix``'s
    float64 copy. The resamples' values, hence the results, are the same
    either way.
    """
    from .._preparation import ScaledData
    from .._validation import _as_data_matrix, as_data_matrix

    data, names, _ = _as_data_matrix(X, scaled="deferred")
    if isinstance(data, ScaledData):
        return data.source, names
    del data  # the scaled copy, not the input's values: freed before the float64 copy
    return as_data_matrix(X)


def fit_resample(model, data, rows, k, names, settings, backend, timings):
    """Fit the DirectLiNGAM ``model`` on resample ``k``, ``data[rows]``, timing its phases.

    The serial bootstrap and the Dask workers' batches both fit their
    resamples here (``model._fit_data``), so the results are the same either
    way. The seconds of each phase are added to ``timings`` (keys
    :data:`BOOTSTRAP_PHASES`; ``resample`` here is the copy of the rows and
    its check for constant columns).

    Returns
    -------
    B, T : ndarray
        The resample's adjacency matrix and its total effects.
    """
    from .._validation import constant_in_resample

    t0 = time.perf_counter()
    Xk = np.ascontiguousarray(data[rows], dtype=np.float64)  # (the input's rows: a new array)
    constant_in_resample(data, Xk, k, names)
    t1 = time.perf_counter()
    order, B, stats = model._fit_data(Xk, settings, backend)
    t3 = time.perf_counter()
    t2 = t3 - stats["time"]["adjacency"]
    T = total_effects(B, order)
    t4 = time.perf_counter()
    for key, dt in zip(BOOTSTRAP_PHASES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
        timings[key] += dt
    return B, T


def total_effects(adjacency_matrix, causal_order):
    """Total effects of every variable on every later one.

    Parameters
    ----------
    adjacency_matrix : ndarray, shape (n_features, n_features)
        ``B[i, j]`` the direct effect of ``j`` on ``i``; zero unless ``j``
        precedes ``i`` in ``causal_order``.
    causal_order : sequence of int

    Returns
    -------
    T : ndarray, shape (n_features, n_features)
        ``T[to, from]`` the sum over directed paths from ``from`` to ``to``
        of the products of their edge weights; zero on the diagonal and where
        ``to`` precedes ``from``.
    """
    order = np.asarray(causal_order, dtype=np.intp)
    p = len(order)
    _memory.require("the total effects (n_features^2 float64)", _memory.total_effects_bytes(p),
                    _memory.FEWER)
    B_ord = np.nan_to_num(np.asarray(adjacency_matrix, dtype=np.float64))[np.ix_(order, order)]
    B_ord = np.tril(B_ord, -1)
    # (I - B)^{-1} = I + B + B^2 + ...: B is strictly lower triangular in causal
    # order. Row by row, T[i] = e_i + B[i, :i] @ T[:i] (forward substitution):
    # where no directed path exists every term is an exact zero, so the effect
    # is exactly 0 as in lingam's path sums. (An LU-based inverse leaves ~1e-16
    # there, which get_total_causal_effects would count as an effect.)
    T_ord = np.eye(p)
    for i in range(1, p):
        T_ord[i, :i] = B_ord[i, :i] @ T_ord[:i, :i]
    np.fill_diagonal(T_ord, 0.0)
    T = np.zeros((p, p))
    T[np.ix_(order, order)] = T_ord
    return T


def warn_if_order_reversed(causal_order, frm, to, from_index, to_index, stacklevel=3):
    """lingam's warning of ``estimate_total_effect`` when ``to`` precedes ``frm`` in the order.

    ``from_index`` and ``to_index`` are the user's spelling of ``frm`` and
    ``to`` (a column name, say), as the message shows them; the default
    ``stacklevel`` points at the caller of the estimator's method.
    """
    if causal_order.index(frm) > causal_order.index(to):
        warnings.warn(
            f"The estimated causal effect may be incorrect because the causal order of "
            f"the destination variable (to_index={to_index}) is earlier than the source "
            f"variable (from_index={from_index}).",
            stacklevel=stacklevel,
        )


def regression_effect(X, predictors, target):
    """Least-squares coefficient of ``predictors[0]`` in the regression of column ``target``
    on the columns ``predictors`` (the source and its parents), both centred: lingam's
    ``estimate_total_effect``.
    """
    A = X[:, predictors] - X[:, predictors].mean(axis=0)
    y = X[:, target] - X[:, target].mean()
    return float(np.linalg.lstsq(A, y, rcond=None)[0][0])


def _checked_path_ends(dag, from_index, to_index):
    """``dag`` as a square float64 matrix, with the ends of a path on it checked.

    Raises
    ------
    ValueError
        When ``dag`` is not square, or ``from_index`` and ``to_index`` are
        not two different integers in ``[0, p - 1]`` (naming the one that
        is not).
    """
    B = np.asarray(dag, dtype=np.float64)
    if B.ndim != 2 or B.shape[0] != B.shape[1]:
        raise ValueError(f"adjacency_matrix must be a square matrix; got shape {B.shape}")
    p = B.shape[0]
    for name, value in (("from_index", from_index), ("to_index", to_index)):
        if (not isinstance(value, (numbers.Integral, np.integer)) or isinstance(value, bool)
                or not 0 <= value < p):
            raise ValueError(f"{name} must be an integer in [0, {p - 1}]; got {value!r}")
    if from_index == to_index:
        raise ValueError("from_index and to_index mustn't be the same.")
    return B


def find_all_paths(dag, from_index, to_index, min_causal_effect=0.0):
    """All directed paths from one variable to another, and their effects.

    Parameters
    ----------
    dag : array-like, shape (n_features, n_features)
        Adjacency matrix, ``dag[i, j]`` the edge ``j -> i``; NaN counts as 0.
    from_index, to_index : int
    min_causal_effect : float
        Only edges with ``|weight| > min_causal_effect`` are followed.

    Returns
    -------
    paths : list of list of int
        Each path from ``from_index`` to ``to_index``, in lingam's
        depth-first order (children in ascending index).
    effects : list of float
        Product of the edge weights along each path.

    Raises
    ------
    ValueError
        When the graph has a cycle on the way, is not square, or the ends
        are not two different variables of it.
    """
    dag = _checked_path_ends(dag, from_index, to_index)
    p = dag.shape[0]
    edges = np.abs(np.nan_to_num(dag)) > min_causal_effect
    children = [np.flatnonzero(edges[:, j]).tolist() for j in range(p)]

    paths = []
    stack = [from_index]
    pending = [list(children[from_index])]
    while stack:
        if len(stack) > p:
            raise ValueError("Unable to find the path because a cyclic graph has been specified.")
        if stack[-1] == to_index:
            paths.append(list(stack))
            stack.pop()
            pending.pop()
        elif pending[-1]:
            nxt = pending[-1].pop(0)
            stack.append(nxt)
            pending.append(list(children[nxt]))
        else:
            stack.pop()
            pending.pop()

    effects = [np.prod([dag[b, a] for a, b in zip(path, path[1:])]) for path in paths]
    return paths, effects


def _check_min_causal_effect(value):
    if value is None:
        return 0.0
    if not 0.0 < value:
        raise ValueError("min_causal_effect must be an value greater than 0.")
    return value


def _check_top(name, value):
    if value is None:
        return None
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool) \
            and value > 0:
        return int(value)
    raise ValueError(f"{name} must be an integer greater than 0")


class BootstrapResult:
    """The result of bootstrapping, with lingam's ``BootstrapResult`` interface.

    Parameters
    ----------
    adjacency_matrices : ndarray, shape (n_sampling, n_features, n_features)
        The adjacency matrix of each resample.
    total_effects : ndarray, shape (n_sampling, n_features, n_features)
        The total effects of each resample, ``[k, to, from]``.
    resampled_indices : list of ndarray, optional
        The rows of the original data drawn for each resample.
    """

    def __init__(self, adjacency_matrices, total_effects, resampled_indices=None):
        self._adjacency_matrices = adjacency_matrices
        self._total_effects = total_effects
        self._resampled_indices = resampled_indices

    @property
    def adjacency_matrices_(self):
        """ndarray, shape (n_sampling, n_features, n_features): one matrix per resample."""
        return self._adjacency_matrices

    @property
    def total_effects_(self):
        """ndarray, shape (n_sampling, n_features, n_features): ``[k, to, from]``."""
        return self._total_effects

    @property
    def resampled_indices_(self):
        """list of ndarray: the original row indices drawn for each resample."""
        return self._resampled_indices

    def get_causal_direction_counts(self, n_directions=None, min_causal_effect=None,
                                    split_by_causal_effect_sign=False):
        """Count how often each edge appears across the resamples.

        Parameters
        ----------
        n_directions : int, optional
            Keep only the ``n_directions`` most frequent edges.
        min_causal_effect : float, optional
            Count an edge only where ``|weight| > min_causal_effect`` (> 0).
        split_by_causal_effect_sign : bool
            Count positive and negative weights of an edge separately.

        Returns
        -------
        dict
            ``{"from": [...], "to": [...], "count": [...]}`` (plus ``"sign"``
            when split), sorted by count, most frequent first.
        """
        n_directions = _check_top("n_directions", n_directions)
        threshold = _check_min_causal_effect(min_causal_effect)

        rows = []
        for am in np.nan_to_num(self._adjacency_matrices):
            to, frm = np.nonzero(np.abs(am) > threshold)
            cols = [to, frm]
            if split_by_causal_effect_sign:
                cols.append(np.sign(am[to, frm]).astype(np.int64))
            rows.append(np.column_stack(cols).astype(np.int64))
        directions = np.concatenate(rows) if rows else np.empty((0, 2), dtype=np.int64)

        if len(directions) == 0:
            out = {"from": [], "to": [], "count": []}
            if split_by_causal_effect_sign:
                out["sign"] = []
            return out

        directions, counts = np.unique(directions, axis=0, return_counts=True)
        top = np.argsort(-counts)[:n_directions]
        directions, counts = directions[top], counts[top]
        out = {
            "from": directions[:, 1].tolist(),
            "to": directions[:, 0].tolist(),
            "count": counts.tolist(),
        }
        if split_by_causal_effect_sign:
            out["sign"] = directions[:, 2].tolist()
        return out

    def get_directed_acyclic_graph_counts(self, n_dags=None, min_causal_effect=None,
                                          split_by_causal_effect_sign=False):
        """Count how often each whole graph appears across the resamples.

        Parameters
        ----------
        n_dags : int, optional
            Keep only the ``n_dags`` most frequent graphs.
        min_causal_effect : float, optional
            An edge exists where ``|weight| > min_causal_effect`` (> 0).
        split_by_causal_effect_sign : bool
            Graphs that differ only in the signs of their edges count apart.

        Returns
        -------
        dict
            ``{"dag": [{"from": [...], "to": [...]}, ...], "count": [...]}``
            (each graph also with ``"sign"`` when split), most frequent first.
        """
        n_dags = _check_top("n_dags", n_dags)
        threshold = _check_min_causal_effect(min_causal_effect)

        ams = np.nan_to_num(self._adjacency_matrices)
        present = np.abs(ams) > threshold
        if split_by_causal_effect_sign:
            graphs = np.where(present, np.sign(ams), 0).astype(np.int64)
        else:
            graphs = present
        graphs, counts = np.unique(graphs, axis=0, return_counts=True)
        top = np.argsort(-counts)[:n_dags]
        graphs, counts = graphs[top], counts[top]

        dags = []
        for g in graphs:
            to, frm = np.nonzero(g)
            dag = {"from": frm.tolist(), "to": to.tolist()}
            if split_by_causal_effect_sign:
                dag["sign"] = list(g[to, frm])
            dags.append(dag)
        return {"dag": dags, "count": counts.tolist()}

    def get_probabilities(self, min_causal_effect=None):
        """Fraction of resamples in which each edge appears.

        Parameters
        ----------
        min_causal_effect : float, optional
            An edge exists where ``|weight| > min_causal_effect`` (> 0).

        Returns
        -------
        ndarray, shape (n_features, n_features)
            ``[to, from]`` the probability of the edge ``from -> to``.
        """
        threshold = _check_min_causal_effect(min_causal_effect)
        ams = np.nan_to_num(self._adjacency_matrices)
        bp = (np.abs(ams) > threshold).sum(axis=0) / len(ams)
        rows, cols = bp.shape
        if cols // rows == 1:
            return bp
        return np.hsplit(bp, cols // rows)  # lingam's layout for stacked lags

    def get_total_causal_effects(self, min_causal_effect=None):
        """Total effects that appear in the resamples, with their probability.

        Parameters
        ----------
        min_causal_effect : float, optional
            A total effect counts where ``|effect| > min_causal_effect`` (> 0).

        Returns
        -------
        dict
            ``{"from": [...], "to": [...], "effect": [...], "probability": [...]}``
            sorted by probability, highest first; ``effect`` is the median of
            the non-zero effects of the pair.
        """
        threshold = _check_min_causal_effect(min_causal_effect)
        te = self._total_effects
        probs = (np.abs(te) > threshold).sum(axis=0) / len(te)
        to, frm = np.nonzero(np.abs(probs) > 0)
        probs = probs[to, frm]
        effects = np.zeros(len(to))
        for k, (t, f) in enumerate(zip(to, frm)):
            values = te[:, t, f]
            effects[k] = np.median(values[np.abs(values) > 0])
        order = np.argsort(-probs)
        return {
            "from": frm[order].tolist(),
            "to": to[order].tolist(),
            "effect": effects[order].tolist(),
            "probability": probs[order].tolist(),
        }

    def get_paths(self, from_index, to_index, min_causal_effect=None):
        """All directed paths between two variables across the resamples.

        Parameters
        ----------
        from_index, to_index : int
            Start and end of the paths.
        min_causal_effect : float, optional
            Follow only edges with ``|weight| > min_causal_effect`` (> 0).

        Returns
        -------
        dict
            ``{"path": [[...], ...], "effect": [...], "probability": [...]}``
            sorted by probability, highest first; ``effect`` is the median over
            the resamples of the product of edge weights along the path.
        """
        threshold = _check_min_causal_effect(min_causal_effect)
        keys, effects = [], []
        for am in self._adjacency_matrices:
            paths, path_effects = find_all_paths(am, from_index, to_index, threshold)
            keys.extend("_".join(map(str, path)) for path in paths)
            effects.extend(path_effects)
        keys, effects = np.array(keys), np.array(effects)

        unique, counts = np.unique(keys, return_counts=True)
        order = np.argsort(-counts)
        unique = unique[order]
        return {
            "path": [[int(v) for v in key.split("_")] for key in unique],
            "effect": [np.median(effects[keys == key]) for key in unique],
            "probability": (counts[order] / len(self._adjacency_matrices)).tolist(),
        }


# VARLiNGAM's bootstrap (VARLiNGAM.bootstrap and its Dask tasks in _distributed)

def _simulate(coefs, innovations):
    """Series of the VAR ``coefs`` driven by ``innovations``, lingam's bootstrap way.

    ``x_t = innovation_t`` for the first ``lags`` steps, then
    ``x_t = sum_tau M_tau x_{t-tau} + innovation_t``; all series of the batch
    advance together.

    Parameters
    ----------
    coefs : ndarray, shape (lags, p, p)
    innovations : ndarray, shape (batch, n_samples, p)

    Returns
    -------
    ndarray, shape (batch, n_samples, p)
    """
    lags = coefs.shape[0]
    out = np.array(innovations, dtype=np.float64, copy=True)
    T = out.shape[1]
    coefs_t = np.ascontiguousarray(coefs.transpose(0, 2, 1))
    for j in range(lags, T):
        ar = np.zeros((out.shape[0], out.shape[2]))
        for t in range(lags):
            ar += out[:, j - t - 1] @ coefs_t[t]
        out[:, j] = ar + innovations[:, j]
    return out


def _var_total_effects(B_taus, causal_order):
    """lingam's VAR bootstrap total effects, ``[to, from + n_features * lag]``.

    At lag 0 the effects of earlier variables in the causal order (sums over
    directed paths of ``B0``); at lag ``tau`` the effect of ``x_from(t - tau)``
    on every ``x_to(t)``: its direct edges into time ``t`` followed by the
    paths of ``B0``, ``(I + T0) B_tau``.
    """
    n = B_taus[0].shape[0]
    T0 = total_effects(B_taus[0], causal_order)
    reach = np.eye(n) + T0
    out = np.zeros((n, n * len(B_taus)))
    out[:, :n] = T0
    for tau in range(1, len(B_taus)):
        out[:, n * tau:n * (tau + 1)] = reach @ np.nan_to_num(B_taus[tau])
    return out
