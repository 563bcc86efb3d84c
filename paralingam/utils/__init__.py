"""A ``lingam.utils`` look-alike, so that lingam's tutorials run on paralingam.

With ``import paralingam as lingam``, the functions of lingam 1.13's
``lingam.utils`` that apply to the models paralingam fits are computed here,
with lingam's outputs and without lingam installed: ``make_dot`` (with all
its options), ``make_dot_highlight``, ``make_dot_ancestors``,
``make_dot_descendants``, ``make_dot_paths``,
``make_dot_for_nan_probability_matrix``, ``make_prior_knowledge``,
``print_causal_directions``, ``print_dagc``, ``find_all_paths``,
``calculate_total_effect``, ``calculate_distance_from_root_nodes``,
``get_sink_variables``, ``get_exo_variables``, ``remove_effect``,
``predict_adaptive_lasso``, ``get_common_edge_probabilities``,
``print_common_edge_directions``, ``extract_ancestors``, ``f_correlation``,
``likelihood_i``, ``log_p_super_gaussian``, ``variance_i`` and
``bic_select_logistic_l1``.

The rest (:data:`LINGAM_FORWARDED`: ``evaluate_model_fit``, which fits a
structural equation model with semopy; ``visualize_nonlinear_causal_effect``,
which fits a user's nonlinear regressor and plots with matplotlib;
``MGGD``/``MGGDEstimator``, lingam's multivariate generalized Gaussian) are
lingam's own, forwarded to lingam when it is installed; without it they raise
ImportError naming what to install.

Only numpy is imported with this module; graphviz when a graph is drawn,
matplotlib only for a colour map, scipy and scikit-learn when a statistic
needs them.
"""

import numbers

import numpy as np

from ._graph import (
    calculate_distance_from_root_nodes,
    make_dot_ancestors,
    make_dot_descendants,
    make_dot_for_nan_probability_matrix,
    make_dot_highlight,
    make_dot_paths,
)
from ._graph import _check_path, _check_path_color, _cycle_edges, _reach, _simple_path_edges
from ._graph import _topological_order
from ._graph import _add_nodes, _graphviz, _path_node_names
from ._rcd import extract_ancestors
from ._stats import (
    bic_select_logistic_l1,
    f_correlation,
    likelihood_i,
    log_p_super_gaussian,
    variance_i,
)
from ..lingam.bootstrap import _checked_path_ends, find_all_paths

__all__ = [
    "make_dot",
    "make_dot_highlight",
    "make_dot_ancestors",
    "make_dot_descendants",
    "make_dot_paths",
    "make_dot_for_nan_probability_matrix",
    "make_prior_knowledge",
    "print_causal_directions",
    "print_dagc",
    "find_all_paths",
    "calculate_total_effect",
    "calculate_distance_from_root_nodes",
    "get_sink_variables",
    "get_exo_variables",
    "remove_effect",
    "predict_adaptive_lasso",
    "get_common_edge_probabilities",
    "print_common_edge_directions",
    "extract_ancestors",
    "f_correlation",
    "likelihood_i",
    "log_p_super_gaussian",
    "variance_i",
    "bic_select_logistic_l1",
]

# lingam.utils names that paralingam forwards to lingam, with what they need
# beyond lingam itself: they fit models paralingam does not implement.
LINGAM_FORWARDED = {
    "evaluate_model_fit": "semopy and pandas (a structural equation model fit)",
    "visualize_nonlinear_causal_effect": "matplotlib (it plots a nonlinear regressor's effects)",
    "MGGD": "lingam's multivariate generalized Gaussian distribution",
    "MGGDEstimator": "lingam's multivariate generalized Gaussian distribution",
}


def __getattr__(name):
    if name in LINGAM_FORWARDED:
        try:
            import lingam.utils as lingam_utils
        except ImportError as exc:
            raise ImportError(
                f"paralingam.utils.{name} is lingam's own function ({LINGAM_FORWARDED[name]}), "
                f"which paralingam forwards to lingam: pip install lingam "
                f"(which installs it with its dependencies); {exc}") from exc
        return getattr(lingam_utils, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def print_causal_directions(cdc, n_sampling, labels=None):
    """Print the edge counts of ``BootstrapResult.get_causal_direction_counts``.

    One line per edge, ``"x1 <--- x0 (b>0) (95.0%)"``, as lingam prints them.

    Parameters
    ----------
    cdc : dict
        The counts, as returned by ``get_causal_direction_counts``.
    n_sampling : int
        Number of resamples (the percentages' denominator).
    labels : sequence of str, optional
        Variable names; ``x0, x1, ...`` without.
    """
    for k, (frm, to, count) in enumerate(zip(cdc["from"], cdc["to"], cdc["count"])):
        sign = _sign_text(cdc["sign"][k]) if "sign" in cdc else ""
        print(f"{_label(labels, to)} <--- {_label(labels, frm)} {sign} "
              f"({100 * count / n_sampling:.1f}%)")


def print_dagc(dagc, n_sampling, labels=None):
    """Print the graph counts of ``BootstrapResult.get_directed_acyclic_graph_counts``.

    Parameters
    ----------
    dagc : dict
        The counts, as returned by ``get_directed_acyclic_graph_counts``.
    n_sampling : int
        Number of resamples (the percentages' denominator).
    labels : sequence of str, optional
        Variable names; ``x0, x1, ...`` without.
    """
    for k, (dag, count) in enumerate(zip(dagc["dag"], dagc["count"])):
        print(f"DAG[{k}]: {100 * count / n_sampling:.1f}%")
        for e, (frm, to) in enumerate(zip(dag["from"], dag["to"])):
            sign = _sign_text(dag["sign"][e]) if "sign" in dag else ""
            print(f"\t{_label(labels, to)} <--- {_label(labels, frm)} {sign}")


def _sign_text(sign):
    return "(b>0)" if sign > 0 else "(b<0)"


def _label(labels, i):
    return labels[i] if labels else f"x{i}"


def make_prior_knowledge(n_variables, exogenous_variables=None, sink_variables=None,
                         paths=None, no_paths=None):
    """Build lingam's prior-knowledge matrix.

    Parameters
    ----------
    n_variables : int
    exogenous_variables : sequence of int, optional
        Variables with no parents (their rows are 0).
    sink_variables : sequence of int, optional
        Variables with no children (their columns are 0).
    paths : sequence of (int, int), optional
        ``(i, j)``: ``x_i`` has a directed path to ``x_j`` (entry ``[j, i] = 1``).
    no_paths : sequence of (int, int), optional
        ``(i, j)``: ``x_i`` has no directed path to ``x_j`` (entry ``[j, i] = 0``).

    Returns
    -------
    ndarray of int, shape (n_variables, n_variables)
        ``-1`` unknown, ``0`` no path, ``1`` path; ``-1`` on the diagonal.
        Later kinds override earlier ones in the order no_paths, paths,
        sink_variables, exogenous_variables, as in lingam.
    """
    pk = np.full((n_variables, n_variables), -1)
    for frm, to in no_paths or ():
        pk[to, frm] = 0
    for frm, to in paths or ():
        pk[to, frm] = 1
    for var in sink_variables or ():
        pk[:, var] = 0
    for var in exogenous_variables or ():
        pk[var, :] = 0
    np.fill_diagonal(pk, -1)
    return pk


def calculate_total_effect(adjacency_matrix, from_index, to_index, is_continuous=None):
    """Total effect of one variable on another: the sum over directed paths.

    The sum over the directed paths of the products of their edge weights
    (lingam's definition), computed without listing the paths, whose number
    grows exponentially with the variables (a dense DAG of 20 variables has
    2**18 paths between its first and last): in a DAG it is the entry
    ``[to_index, from_index]`` of ``(I - B)^{-1}``, here one forward
    substitution over the variables between the two in a topological order.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        ``B[i, j]`` the direct effect of ``x_j`` on ``x_i``; zero and NaN
        entries are no edge.
    from_index, to_index : int
    is_continuous : sequence of bool, optional
        Whether each variable is continuous; every variable on a path after
        its start must be.

    Returns
    -------
    float
        Sum over the directed paths of the products of their edge weights.

    Raises
    ------
    ValueError
        As lingam: for a matrix that is not square, indices out of range or
        equal, a discrete variable on a path, or a cycle reachable from
        ``from_index`` before ``to_index``.
    """
    B = _checked_path_ends(adjacency_matrix, from_index, to_index)
    p = B.shape[0]
    W = np.where(np.isnan(B), 0.0, B)  # NaN is no edge (lingam's nan_to_num)
    edge = W != 0.0  # edge[i, j]: j -> i
    # Paths end at to_index: its own edges are never followed (lingam's search
    # does not go on from it, so a cycle through it is not an error).
    edge[:, to_index] = False
    forward = edge.T  # forward[u, v]: u -> v (the graph helpers' direction)
    reached = _reach(forward, from_index)
    order = _topological_order(forward, reached)
    if order is None:  # lingam's path search would go round the cycle
        raise ValueError("Unable to find the path because a cyclic graph has been specified.")
    if not reached[to_index]:
        return 0.0
    if is_continuous is not None:
        # the variables on some path: reached from from_index, reaching to_index
        on_path = reached & _reach(edge, to_index)
        on_path[from_index] = False
        if not all(is_continuous[v] for v in np.flatnonzero(on_path)):
            raise ValueError("Variables on the path must be continuous variables.")
    # effect[v]: the sum over paths from from_index to v, in topological order
    effect = np.zeros(p)
    effect[from_index] = 1.0
    for v in order:
        if v != from_index:
            parents = np.flatnonzero(edge[v] & reached)
            effect[v] = W[v, parents] @ effect[parents]
    return float(effect[to_index])


def get_sink_variables(adjacency_matrix):
    """Indices of the variables without children (zero columns off the diagonal)."""
    B = np.abs(np.array(adjacency_matrix, dtype=np.float64))
    np.fill_diagonal(B, 0)
    return [i for i in range(B.shape[1]) if B[:, i].sum() == 0]


def get_exo_variables(adjacency_matrix):
    """Indices of the variables without parents (zero rows off the diagonal)."""
    B = np.abs(np.array(adjacency_matrix, dtype=np.float64))
    np.fill_diagonal(B, 0)
    return [i for i in range(B.shape[1]) if B[i, :].sum() == 0]


def make_dot(adjacency_matrix, labels=None, lower_limit=0.01,
             prediction_feature_indices=None, prediction_target_label="Y(pred)",
             prediction_line_color="red", prediction_coefs=None,
             prediction_feature_importance=None, path=None, path_color=None,
             detect_cycle=False, ignore_shape=False, **unknown):
    """The graph of an adjacency matrix as a ``graphviz.Digraph``.

    lingam 1.13's ``make_dot``: an edge ``j -> i`` labelled with ``B[i, j]``
    (two decimals) where ``|B[i, j]| > lower_limit``, and a double-headed
    edge where ``B[i, j]`` (lower triangle) is NaN.

    Parameters
    ----------
    adjacency_matrix : array-like, shape (n_features, n_features)
        NaN entries are unknown orders (drawn ``<->``).
    labels : sequence of str, optional
        Node names; ``x0, x1, ...`` without.
    lower_limit : float
        Edges with ``|weight| <= lower_limit`` are not drawn.
    prediction_feature_indices : sequence of int, optional
        Also draw a prediction target fed by these variables (dashed).
    prediction_target_label : str
        The target's name.
    prediction_line_color : str
        Colour of the prediction edges and target.
    prediction_coefs, prediction_feature_importance : sequence of float, optional
        Labels of the prediction edges (coefficients: only those above
        ``lower_limit`` are drawn).
    path : tuple of int, optional
        ``(start, end)``: highlight the simple paths between them.
    path_color : str, optional
        Their colour; black without.
    detect_cycle : bool
        Dash the edges that lie on a cycle.
    ignore_shape : bool
        Accept a matrix that is not square, such as VARLiNGAM's
        ``np.hstack(adjacency_matrices_)`` (columns: the variables at each lag;
        give one label per column).

    Returns
    -------
    graphviz.Digraph
    """
    if unknown:
        raise TypeError(f"make_dot got unexpected keyword arguments {sorted(unknown)}")
    try:
        raw = np.array(adjacency_matrix, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"adjacency_matrix must be a numeric matrix: {exc}") from None
    if raw.ndim != 2 or raw.size == 0:
        raise ValueError(f"adjacency_matrix must be a 2D matrix; got shape {raw.shape}")
    if np.isinf(raw).any():
        raise ValueError("adjacency_matrix has infinite entries")
    if not ignore_shape and raw.shape[0] != raw.shape[1]:
        raise ValueError(f"'adjacency_matrix' is not square matrix (shape {raw.shape}).")
    if labels is not None and len(labels) != raw.shape[1]:
        raise ValueError("Length of 'labels' does not match length of 'adjacency_matrix'")
    if prediction_feature_indices is not None:
        for name, values in (("prediction_coefs", prediction_coefs),
                             ("prediction_feature_importance", prediction_feature_importance)):
            if values is not None and len(values) != len(prediction_feature_indices):
                raise ValueError(f"Length of '{name}' does not match length of "
                                 "'prediction_feature_indices'")
    if detect_cycle is not None and not isinstance(detect_cycle, bool):
        raise TypeError("'detect_cycle' should be boolean.")
    B = np.nan_to_num(raw)
    idx = np.abs(B) > lower_limit
    names = labels if labels else [f"x{i}" for i in range(len(B))]

    path_edges = set()
    path_nodes = []
    if path is not None or detect_cycle is True:
        if B.shape[0] != B.shape[1]:
            raise ValueError("path and detect_cycle need a square adjacency_matrix")
    if path is not None:
        path_start, path_end = _check_path(path, B.shape[0])
        path_color = _check_path_color(path_color)
        path_edges = _simple_path_edges(idx.T, path_start, path_end)
        path_nodes = _path_node_names(path_edges, names)
    cycle_edges = _cycle_edges(idx.T) if detect_cycle is True else set()

    dot = _graphviz().Digraph(engine="dot")
    _add_nodes(dot, names, None if path is None else (path_nodes, path_start, path_end, path_color))
    for to, frm in zip(*np.nonzero(idx)):
        kwargs = {}
        if (frm, to) in path_edges:
            kwargs.update(penwidth="2", fontcolor=path_color, color=path_color)
        if (frm, to) in cycle_edges:
            kwargs["style"] = "dashed"
        dot.edge(names[frm], names[to], label=f"{B[to, frm]:.2f}", **kwargs)

    if prediction_feature_indices is not None:
        color = prediction_line_color
        dot.node(prediction_target_label, color=color, fontcolor=color)
        if prediction_coefs is not None:
            for frm, coef in zip(prediction_feature_indices, prediction_coefs):
                if np.abs(coef) > lower_limit:
                    dot.edge(names[frm], prediction_target_label, label=f"{coef:.2f}",
                             color=color, fontcolor=color, style="dashed")
        elif prediction_feature_importance is not None:
            for frm, imp in zip(prediction_feature_indices, prediction_feature_importance):
                dot.edge(names[frm], prediction_target_label, label=f"({imp})",
                         color=color, fontcolor=color, style="dashed")
        else:
            for frm in prediction_feature_indices:
                dot.edge(names[frm], prediction_target_label, color=color, style="dashed")

    unknown_to, unknown_from = np.nonzero(np.isnan(np.tril(raw)))
    # lingam's set, filled in its order: its iteration order is the drawing's
    unknown_nodes = set(unknown_to.tolist() + unknown_from.tolist())
    with dot.subgraph() as same_rank:
        same_rank.attr(rank="same")
        for node in unknown_nodes:
            same_rank.node(names[node])
    for to, frm in zip(unknown_to, unknown_from):
        dot.edge(names[frm], names[to], dir="both")
    return dot


def remove_effect(X, remove_features, return_coefs=False):
    """Remove the linear effect of some columns from the others.

    Each column not in ``remove_features`` is replaced by its residual of the
    least-squares regression (with intercept) on the ``remove_features``
    columns, as lingam's ``remove_effect``.

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
    remove_features : sequence of int
    return_coefs : bool
        Also return the regression coefficients.

    Returns
    -------
    X : ndarray, shape (n_samples, n_features)
    coefs : dict, only with ``return_coefs``
        ``{column: coefficients on remove_features}`` for the other columns.
    """
    from .._validation import as_data_matrix

    X = as_data_matrix(X, allow_constant=True)[0]
    removed = list(remove_features)
    p = X.shape[1]
    bad = [f for f in removed if not isinstance(f, (numbers.Integral, np.integer))
           or not 0 <= f < p]
    if bad:
        raise ValueError(f"remove_features must be column indices in [0, {p - 1}]; got {bad}")
    kept = [i for i in range(p) if i not in removed]
    coefs = {}
    if kept and removed:
        A = X[:, removed]
        A_mean = A.mean(axis=0)
        Y_mean = X[:, kept].mean(axis=0)
        W = np.linalg.lstsq(A - A_mean, X[:, kept] - Y_mean, rcond=None)[0]
        fitted = (A - A_mean) @ W + Y_mean
        for k, feature in enumerate(kept):
            X[:, feature] = X[:, feature] - fitted[:, k]
            coefs[feature] = W[:, k]
    if return_coefs:
        return X, coefs
    return X


def predict_adaptive_lasso(X, predictors, target, gamma=1.0):
    """lingam's adaptive lasso: the coefficients of ``target`` on ``predictors``.

    Standardised data, least-squares weights ``|b| ** gamma``, the lasso path
    scored by BIC, then least squares on the kept predictors at the data's
    scale (lingam's ``predict_adaptive_lasso``), computed by
    :func:`paralingam.adjacency.adaptive_lasso_adjacency`.

    Parameters
    ----------
    X : array-like, shape (n_samples, n_features)
    predictors : sequence of int
    target : int
    gamma : float

    Returns
    -------
    ndarray, shape (len(predictors),)
    """
    from .._validation import as_data_matrix
    from ..adjacency import adaptive_lasso_adjacency

    X = as_data_matrix(X, allow_constant=True)[0]
    predictors = [int(i) for i in predictors]
    p = X.shape[1]
    if not 0 <= int(target) < p or any(not 0 <= i < p for i in predictors):
        raise ValueError(f"predictors and target must be column indices in [0, {p - 1}]")
    if int(target) in predictors or len(set(predictors)) != len(predictors):
        raise ValueError("predictors must be distinct and must not contain the target")
    m = len(predictors)
    if m == 0:
        return np.zeros(0)
    columns = predictors + [int(target)]
    pk = -np.ones((m + 1, m + 1))
    pk[:m] = 0  # only the target is regressed
    B = adaptive_lasso_adjacency(X[:, columns], list(range(m + 1)), prior_knowledge=pk,
                                 gamma=gamma)
    return B[m, :m]


def get_common_edge_probabilities(bootstrap_results, mode="across"):
    """Probabilities of the edges that several bootstrap results share.

    Parameters
    ----------
    bootstrap_results : list
        Objects with ``adjacency_matrices_`` (the results of several groups
        or models).
    mode : {"across", "per"}
        ``"across"``: the product over the results of each edge's
        probability; ``"per"``: the fraction of resamples ``k`` in which the
        edge is in resample ``k`` of every result.

    Returns
    -------
    ndarray, shape (2, n_features, n_features)
        ``[0]`` the probabilities of common edges (non-zero, not NaN),
        ``[1]`` those of common NaN entries (hidden common causes).
    """
    if not isinstance(bootstrap_results, list):
        raise ValueError("bootstrap_results must be a list.")
    for result in bootstrap_results:
        if not hasattr(result, "adjacency_matrices_"):
            raise AttributeError("The bootstrap_result must implement a callable "
                                 "'adjacency_matrices_'.")
    if mode == "across":
        present, hidden = [], []
        for result in bootstrap_results:
            ams = np.array(result.adjacency_matrices_)
            nan = np.isnan(ams)
            present.append(((ams != 0) & ~nan).sum(axis=0) / len(ams))
            hidden.append(nan.sum(axis=0) / len(ams))
        return np.stack((np.prod(present, axis=0), np.prod(hidden, axis=0)), axis=0)
    if mode == "per":
        n_samples = len(bootstrap_results[0].adjacency_matrices_)
        stacks = [np.array(r.adjacency_matrices_)[:n_samples] for r in bootstrap_results]
        present = np.logical_and.reduce([(a != 0) & ~np.isnan(a) for a in stacks])
        hidden = np.logical_and.reduce([np.isnan(a) for a in stacks])
        n = stacks[0].shape[1]
        return np.stack((present.sum(axis=0)[:n, :n] / n_samples,
                         hidden.sum(axis=0)[:n, :n] / n_samples), axis=0)
    raise ValueError("Invalid mode. Choose 'per' or 'across'.")


def print_common_edge_directions(common_edge_probabilities, confidence_level=0.01, labels=None):
    """Print the common edges above ``confidence_level``, most probable first.

    Parameters
    ----------
    common_edge_probabilities : ndarray, shape (2, n_features, n_features)
        From :func:`get_common_edge_probabilities`.
    confidence_level : float
        In [0, 1): edges with a larger probability are printed.
    labels : sequence of str, optional
    """
    if not 0.0 <= confidence_level < 1.0:
        raise ValueError("confidence_level must be a value between 0 and 1.")
    if not isinstance(common_edge_probabilities, np.ndarray):
        raise TypeError("common_edge_probabilities must be a NumPy ndarray.")
    if common_edge_probabilities.ndim != 3:
        raise ValueError("common_edge_probabilities must be a 3-dimensional array.")
    if common_edge_probabilities.shape[0] != 2:
        raise ValueError("The first dimension of common_edge_probabilities must be 2 "
                         "(presence and unobserved probabilities).")
    n_rows, n_cols = common_edge_probabilities.shape[1:]
    presence, unobserved = common_edge_probabilities
    directions = []
    for frm in range(n_cols):
        for to in range(n_rows):
            if presence[to, frm] > confidence_level:
                directions.append((frm, to, presence[to, frm], "<---"))
    both = set()
    for frm in range(n_cols):
        for to in range(n_rows):
            if (to, frm) in both:
                continue
            prob = unobserved[to, frm]
            if prob > confidence_level:
                if frm < n_rows and prob == unobserved[frm, to]:
                    both.update({(to, frm), (frm, to)})
                directions.append((frm, to, prob, "<-->"))
    directions.sort(key=lambda d: -d[2])  # stable: ties keep the scan order, as lingam
    for frm, to, prob, arrow in directions:
        print(f"{_label(labels, to)} {arrow} {_label(labels, frm)} ({100 * prob:.1f}%)")
